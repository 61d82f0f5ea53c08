"""The root error sits on the bottom floor: it imports nothing of the project, and every
package's error tree hangs from it (issue 34, part 5)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agents.errors import AgentError
from agents.replay.errors import TraceError, TwinError
from forecast.errors import ForecastError
from gpuflow_errors import GpuflowError
from infra.errors import InfraError
from schemas.errors import CodecError, KeySpecError
from scorer.errors import ScorerError
from scorer.services.errors import ServiceSpecError

REPO = Path(__file__).resolve().parents[2]
PROJECT = ("agents", "forecast", "gpuflow", "infra", "schemas", "scorer", "streams")


def test_the_root_imports_nothing_of_the_project() -> None:
    code = "import json, sys, gpuflow_errors; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    loaded = [m for m in json.loads(out.stdout) if m.split(".")[0] in PROJECT]
    assert loaded == []


TREES = (ScorerError, ServiceSpecError, InfraError, CodecError, KeySpecError, ForecastError,
         AgentError, TraceError, TwinError)  # fmt: skip


@pytest.mark.parametrize("error", TREES)
def test_every_package_error_is_a_gpuflow_error(error: type[Exception]) -> None:
    assert issubclass(error, GpuflowError)


def test_scorer_still_names_the_root() -> None:
    import scorer

    assert scorer.GpuflowError is GpuflowError
