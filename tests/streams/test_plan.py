"""`/plan/` (gpuflow submit --dry-run) against plain dicts: where a job would go, nothing held."""

from __future__ import annotations

from typing import Any

from scorer import ClusterState, make_placer
from streams.scheduler.core import Scheduler
from streams.scheduler.plan import plan_job


def node(node_id: str, region: str, model: str, memory_mib: int, price: float,
         stack: str = "") -> dict[str, Any]:  # fmt: skip
    return {"node_id": node_id, "region": region, "gpu_model": model, "gpu_count": 8,
            "gpu_memory_mib": memory_mib, "price_per_gpu_hour": price, "interconnect": "nvlink",
            "software_stack": stack}  # fmt: skip


def scheduler() -> Scheduler:
    state = ClusterState()
    s = Scheduler(state, make_placer("gpuflow", state), reservations={}, queue={}, nodes={},
                  partitions=4)  # fmt: skip
    for n in (
        node("eu-h100", "eu", "H100", 81_559, 3.9, "cuda-12.4"),
        node("eu-mi300x", "eu", "MI300X", 196_608, 3.4, "rocm-6.2"),
        node("us-a100", "us", "A100-80", 81_920, 2.5, "cuda-12.4"),
        node("us-v100", "us", "V100-16", 16_384, 1.1, "cuda-12.2"),
    ):
        s.nodes[n["node_id"]] = n
    s.rebuild({})
    return s


def job(**kw: Any) -> dict[str, Any]:
    return {"event_id": "e", "ts": 1, "job_id": "dry-1", "kind": "TRAINING", "precision": "BF16",
            "model_family": "llama", "params_b": 13.0, "gpu_count": 8, "tensor_parallel": 2,
            "software_stack": "cuda-12.1", "expected_duration_s": 36_000.0, **kw}  # fmt: skip


def test_plan_names_the_placement_alternatives_and_refusals() -> None:
    s = scheduler()
    status, plan = plan_job(s, job())
    assert status == 200 and plan["submitted"] is False and plan["outcome"] == "PLACED"
    chosen = plan["placement"]
    assert (chosen["region"], chosen["gpu_model"], chosen["gpus"]) in {
        ("eu", "H100", 8),
        ("us", "A100-80", 8),
    }
    # H100 and A100 both fit: the one not chosen is the alternative, with its breakdown
    (alt,) = plan["alternatives"]
    assert {alt["gpu_model"], chosen["gpu_model"]} == {"H100", "A100-80"}
    assert alt["score_breakdown"] and alt["score"] <= chosen["score"]
    # 10 h on a V100 / relative speed; cost = price per hour x hours
    assert chosen["expected_cost_usd"] == round(
        chosen["price_per_hour"] * chosen["expected_duration_s"] / 3600, 2
    )
    assert chosen["peak_tflops"] in (989.5, 312.0)  # BF16 peaks of H100 and A100
    # the ROCm node and the V100 cannot take this CUDA-12.1 BF16 job; each says why, first
    assert plan["refused"] == {
        "MI300X": "software_stack: MI300X runs rocm-6.2; the job is built for cuda-12.1 "
        "(1 of 2 nodes)",
        "V100-16": "precision: V100-16 has no native BF16 arithmetic (1 of 2 nodes)",
    }
    assert plan["memory_per_gpu_mib"] > 20 * 1024
    assert s.state.jobs == {} and s.queue == {} and s.final == set()  # nothing held or decided


def test_plan_of_a_job_that_never_fits() -> None:
    # 70B full fine-tune over 8 GPUs with FSDP: 138 GiB per GPU, more than any CUDA GPU here
    status, plan = plan_job(scheduler(), job(params_b=70.0, tensor_parallel=1))
    assert status == 200 and plan["outcome"] == "REJECTED" and plan["placement"] is None
    assert plan["refused"]["H100"].startswith(
        "memory: needs 138 GiB per GPU, H100 has 79.6 GiB; fits on 16 GPUs"
    )
    # the MI300X (192 GiB) holds it: a portable build may go there
    _, plan = plan_job(scheduler(), job(params_b=70.0, tensor_parallel=1, software_stack=""))
    assert plan["outcome"] == "PLACED" and plan["placement"]["gpu_model"] == "MI300X"


def test_plan_queued_when_full_and_bad_specs_are_400() -> None:
    s = scheduler()
    for name in ("eu-h100", "us-a100"):
        s.state.reserve(f"busy-{name}", [__import__("scorer").Assignment(name, tuple(range(8)))])
    _, plan = plan_job(s, job())
    assert plan["outcome"] == "QUEUED" and plan["placement"] is None
    status, answer = plan_job(s, job(gpu_milli=1500))
    assert status == 400 and answer["error"].startswith("bad job spec: gpu_milli")
