"""`python -m gpuflow`."""

from __future__ import annotations

from gpuflow.cli import main

main()
