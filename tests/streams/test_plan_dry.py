"""`/plan/` is a dry run: planning jobs changes nothing that a later placement sees (issue 34,
part 4: scoring never learns; the placer's plugins learn at commit only)."""

from __future__ import annotations

from typing import Any

from scorer import ClusterState, JobSpec, make_placer
from streams.scheduler.core import Scheduler
from streams.scheduler.plan import plan_job

FLEET = [("eu", "H100", 81_559), ("eu", "T4", 16_384), ("us", "A100-80", 81_920),
         ("us", "L4", 24_576)] * 2  # fmt: skip


def scheduler() -> Scheduler:
    state = ClusterState()
    s = Scheduler(state, make_placer("gpuflow", state), reservations={}, queue={}, nodes={},
                  partitions=4)  # fmt: skip
    for i, (region, model, memory) in enumerate(FLEET):
        s.nodes[f"n{i}"] = {"node_id": f"n{i}", "region": region, "gpu_model": model,
                            "gpu_count": 8, "gpu_memory_mib": memory, "cpu_milli": 64_000,
                            "memory_mib": 512_000}  # fmt: skip
    s.rebuild({})
    return s


def job(job_id: str, **kw: Any) -> dict[str, Any]:
    return {"event_id": f"e-{job_id}", "ts": 1, "job_id": job_id, "kind": "INFERENCE",
            "precision": "FP16", "params_b": 1.0, "gpu_count": 1, **kw}  # fmt: skip


DRY = [
    job("dry-pinned", allowed_gpu_models=["T4"]),
    job("dry-gang", kind="TRAINING", params_b=7.0, gpu_count=4, tensor_parallel=4),
    job("dry-share", gpu_milli=300),
    job("dry-cpu", gpu_count=0, cpu_milli=4000, memory_mib=8000),
]


def test_planning_changes_no_later_placement() -> None:
    planned, plain = scheduler(), scheduler()
    for record in DRY * 2:
        status, answer = plan_job(planned, record)
        assert status == 200 and answer["submitted"] is False, answer
    assert planned.state.jobs == {}
    for i, gpus in enumerate([1, 2, 1, 4, 1]):
        spec = JobSpec(f"real-{i}", kind="INFERENCE", precision="FP16", params_b=1.0,
                       gpu_count=gpus, tensor_parallel=gpus)  # fmt: skip
        got, want = planned.placer.place(spec), plain.placer.place(spec)
        assert (got.assignments, got.score) == (want.assignments, want.score), spec.job_id
        for s in (planned, plain):
            s.state.reserve(spec.job_id, got.assignments)
            s.placer.observe(spec)
