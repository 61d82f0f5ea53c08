"""Domain types: conversion from decoded Avro records, validation."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scorer import ClusterState, InvalidSpecError, JobSpec, NodeSpec, UnknownNodeError


def test_job_from_a_decoded_record() -> None:
    record = {
        "event_id": "e1",
        "ts": 1,
        "schema": 1,
        "job_id": "j",
        "allowed_gpu_models": ["H100", "A100-80"],
        "precision": "bf16",
        "deferrable_until_ts": datetime(2026, 1, 1, tzinfo=UTC),
    }
    job = JobSpec.from_record(record)
    assert job.allowed_gpu_models == ("H100", "A100-80")  # lists frozen into tuples
    assert job.precision == "BF16"
    assert job.deferrable_until_ts == 1_767_225_600_000  # ms since epoch
    assert hash(job)  # frozen and hashable


def test_node_from_a_decoded_record_drops_extra_fields() -> None:
    record = {
        "event_id": "e",
        "node_id": "n",
        "region": "eu",
        "gpu_model": "H100",
        "gpu_count": 8,
        "gpu_memory_mib": 81920,
        "nvlink_islands": [[0, 1, 2, 3], [4, 5, 6, 7]],
        "driver_version": "550",
        "labels": {"pool": "a"},
    }
    node = NodeSpec.from_record(record)
    assert node.nvlink_islands == ((0, 1, 2, 3), (4, 5, 6, 7))
    with pytest.raises(InvalidSpecError):
        NodeSpec.from_record({"node_id": "n"})  # required fields missing


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gpu_count": 0},
        {"gpu_milli": 0},
        {"gpu_milli": 1500},
        {"gpu_milli": 500, "gpu_count": 2},  # a share is of one GPU
    ],
)
def test_inconsistent_jobs_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(InvalidSpecError):
        JobSpec("j", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError):  # also a ValueError for callers that expect one
        JobSpec("j", **kwargs)  # type: ignore[arg-type]


def test_unknown_nodes_raise_a_scorer_error_that_is_a_key_error() -> None:
    state = ClusterState()
    with pytest.raises(UnknownNodeError):
        state.set_gpu_health("ghost", [True])
    with pytest.raises(KeyError):
        state.set_perf_factor("ghost", [1.0])


def test_region_view_from_a_region_summary() -> None:
    from scorer import RegionView

    record = {
        "event_id": "e",
        "region": "eu",
        "total_gpus_by_model": {"H100": 16},
        "free_gpus_by_model": {"H100": 9},
        "max_free_per_node_by_model": {"H100": 8},
        "queue_depth": 3,
        "price_per_gpu_hour_mean": 11.0,
        "carbon_g_per_kwh": 210.0,
    }
    view = RegionView.from_record(record)
    assert (view.free_gpus, view.largest_free_block, view.total_gpus) == (
        {"H100": 9},
        {"H100": 8},
        {"H100": 16},
    )
    assert view.queue_depth == 3 and view.carbon_g_per_kwh == 210.0
