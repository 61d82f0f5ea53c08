"""The Slurm bridge: a Slurm cluster as a gpuflow region (docs/slurm.md)."""

from __future__ import annotations
