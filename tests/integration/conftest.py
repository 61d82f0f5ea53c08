"""Integration fixtures live in `harness.py` so tests can import its helpers too."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import running
from slurm_cluster import close_readers, needs_slurm

__all__ = ["running", "slurm"]


@pytest.fixture
def slurm() -> Iterator[None]:
    """A Slurm test (`pytest.mark.usefixtures("slurm")`): Slurm installed; readers closed after."""
    needs_slurm()
    yield
    close_readers()
