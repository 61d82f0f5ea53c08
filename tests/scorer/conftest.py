"""Shared fixtures: the Gavel table, read from the shared data folder (never skipped)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scorer_fixtures import GAVEL, shared_data_dir

from scorer import ThroughputModel, load_gavel_csv


@pytest.fixture(scope="session")
def gavel_csv() -> Path:
    path = shared_data_dir() / GAVEL
    if not path.is_file():
        pytest.fail(
            f"Gavel throughputs not found at {path}: set GPUFLOW_SHARED_DATA to the folder "
            f"holding {GAVEL} (see shared/data/README.md)"
        )
    return path


@pytest.fixture(scope="session")
def gavel(gavel_csv: Path) -> ThroughputModel:
    return load_gavel_csv(gavel_csv)

