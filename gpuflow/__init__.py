"""gpuflow: the front door. `gpuflow up` runs the embedded stack; see `gpuflow --help`."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
