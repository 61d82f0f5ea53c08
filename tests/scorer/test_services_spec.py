"""Service specs: every bad field is one error naming it; a good file gives the replica job."""

from __future__ import annotations

from typing import Any

import pytest

from scorer.services import ServiceSpecError, parse_service, replica_job, warm_target

GOOD: dict[str, Any] = {
    "name": "chat",
    "model_family": "llama",
    "params_b": 8,
    "regions": ["us-east"],
    "gpu_models": ["H100"],
}


def test_a_good_file_parses_with_defaults() -> None:
    spec = parse_service(GOOD)
    assert (spec.name, spec.precision, spec.slo_p99_ms, spec.min_replicas) == (
        "chat",
        "FP16",
        230,
        1,
    )
    assert spec.regions == ("us-east",) and spec.gpu_models == ("H100",)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": "Bad Name"}, "name"),
        ({"name": ""}, "name"),
        ({"colour": "red"}, "colour"),
        ({"max_replicas": 0}, "max_replicas"),
        ({"min_replicas": 5, "max_replicas": 3}, "max_replicas"),
        ({"min_replicas": "two"}, "min_replicas"),
        ({"batch": True}, "batch"),
        ({"slo_p99_ms": -1}, "slo_p99_ms"),
        ({"max_zone_share": 1.5}, "max_zone_share"),
        ({"precision": "FP4"}, "precision"),
        ({"degrade": "DROP"}, "degrade"),
        ({"regions": []}, "regions"),
        ({"regions": [1]}, "regions"),
        ({"gpu_models": ["TPU9"]}, "gpu_models"),
        ({"capacity_rps": {"H100": 0}}, "capacity_rps.H100"),
        ({"capacity_rps": {"nope": 3}}, "capacity_rps.nope"),
        ({"capacity_rps": 5}, "capacity_rps"),
        ({"service_ms_on": "nope"}, "service_ms_on"),
        ({"params_b": 70, "gpu_models": ["L4"]}, "gpus_per_replica"),  # 140 GB on a 24 GB GPU
    ],
)
def test_a_bad_field_is_named_in_one_line(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ServiceSpecError) as caught:
        parse_service({**GOOD, **change})
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ") and "\n" not in str(caught.value)


def test_a_replica_is_an_online_inference_job_never_preempted() -> None:
    job = replica_job(parse_service({**GOOD, "gpus_per_replica": 2, "batch": 16}), 3)
    assert (job.priority_class, job.preemptible, job.kind) == (
        "online-inference",
        False,
        "INFERENCE",
    )
    assert (job.gpu_count, job.tensor_parallel, job.micro_batch) == (2, 2, 16)
    assert job.job_id == "svc-chat-3" and job.allowed_regions == ("us-east",)


@pytest.mark.parametrize(
    ("pool", "share", "active", "want"),
    [(1, 0.0, 10, 1), (1, 0.25, 10, 4), (0, 0.25, 1, 1), (2, 0.5, 0, 2)],  # pool + ceil(share x n)
)
def test_warm_target(pool: int, share: float, active: int, want: int) -> None:
    spec = parse_service({**GOOD, "warm_pool": pool, "warm_share": share})
    assert warm_target(spec, active) == want
