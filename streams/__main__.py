"""`python -m streams`: run one gpuflow worker with the configuration from file and env."""

from __future__ import annotations

from streams.worker.main import main

if __name__ == "__main__":
    main()
