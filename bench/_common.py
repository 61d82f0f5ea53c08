"""Helpers shared by the benchmarks: machine facts, percentiles, result files."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
    }


def percentiles(values: Sequence[float]) -> dict[str, float]:
    if not len(values):
        return {"p50": float("nan"), "p99": float("nan")}
    arr = np.asarray(values, dtype=float)
    return {"p50": float(np.percentile(arr, 50)), "p99": float(np.percentile(arr, 99))}


def write_result(name: str, result: dict[str, Any], out: Path | None = None) -> Path:
    """bench/results/<name>.json, or `out` when given, with the command and machine."""
    result = {
        **result,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": machine(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path = out or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path
