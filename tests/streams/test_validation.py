"""Telemetry validation: each per-GPU value out of range is named, and nothing else is."""

from __future__ import annotations

import math
from typing import Any

import pytest

from streams.scheduler.validation import problems


def telemetry(**gpu: Any) -> dict[str, Any]:
    base = {"index": 0, "util_pct": 50.0, "mem_used_mib": 1024, "ecc_errors": 0}
    return {"event_id": "e1", "ts": 0, "node_id": "n1", "region": "eu",
            "gpus": [{**base, "index": 1}, {**base, **gpu}]}  # fmt: skip


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [
        ({}, []),
        ({"util_pct": None, "temperature_c": None}, []),  # optional: absent is fine
        ({"util_pct": 100.0, "perf_factor": 10.0}, []),  # bounds are inclusive
        ({"util_pct": 100.5}, ["gpus[1].util_pct: must be <= 100, got 100.5"]),
        ({"mem_bw_util_pct": -1.0}, ["gpus[1].mem_bw_util_pct: must be >= 0, got -1"]),
        ({"temperature_c": math.nan}, ["gpus[1].temperature_c: must be finite, got nan"]),
        ({"power_w": math.inf}, ["gpus[1].power_w: must be finite, got inf"]),
        ({"nvlink_tx_mbps": 1e12}, []),  # unbounded above
        ({"ecc_errors": -3}, ["gpus[1].ecc_errors: must be >= 0, got -3"]),
        ({"sm_clock_mhz": None}, []),
        (
            {"util_pct": -5.0, "mem_used_mib": -1},
            [
                "gpus[1].util_pct: must be >= 0, got -5",
                "gpus[1].mem_used_mib: must be >= 0, got -1",
            ],
        ),
    ],
)
def test_each_bad_gpu_value_is_named(gpu: dict[str, Any], expected: list[str]) -> None:
    assert problems("NodeTelemetry", telemetry(**gpu)) == expected


def _inventory(**fields: Any) -> dict[str, Any]:
    return {"event_id": "e1", "ts": 0, "node_id": "n1", "region": "eu", "gpu_model": "H100",
            "gpu_count": 8, "gpu_memory_mib": 81920, **fields}  # fmt: skip


def test_a_gpu_less_node_names_no_model_and_a_gpu_node_must() -> None:
    assert problems("NodeInventory", _inventory(gpu_model="", gpu_count=0, gpu_memory_mib=0)) == []
    assert any(
        p.startswith("gpu_model") for p in problems("NodeInventory", _inventory(gpu_model=""))
    )


def _job(**fields: Any) -> dict[str, Any]:
    return {"event_id": "e1", "ts": 0, "job_id": "j1", "tenant": "t", "gpu_count": 1, **fields}


def test_a_cpu_only_job_passes_the_input_check_with_its_cpu_and_memory() -> None:
    assert problems("JobSubmitted", _job(gpu_count=0, cpu_milli=4000)) == []
    assert any(p.startswith("gpu_count") for p in problems("JobSubmitted", _job(gpu_count=0)))
    assert any(p.startswith("gpu_count") for p in problems("JobSubmitted", _job(gpu_count=-1)))
