"""Digital twin invariants: capacity, modelled run time, evictions keep checkpointed work."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from agents.replay import Slice, TraceJob, TraceNode, Twin, TwinConfig, TwinError
from scorer import ThroughputModel

# measured steps/s: V100 10, K80 2.5 -> a job runs 4x longer on a K80; spread at 2 GPUs: 15
TABLE = {
    ("bert", "V100-16", 1, True): 10.0,
    ("bert", "K80", 1, True): 2.5,
    ("bert", "V100-16", 2, True): 20.0,
    ("bert", "V100-16", 2, False): 15.0,
}


def node(node_id: str, model: str = "V100-16", gpus: int = 4, **kw: int) -> TraceNode:
    return TraceNode(node_id, "eu", model, gpus, **kw)  # type: ignore[arg-type]


def job(job_id: str, gpus: int = 1, duration: float = 3600.0, **kw: object) -> TraceJob:
    return TraceJob(job_id, 0.0, gpus, duration, job_type="bert", reference_model="V100-16", **kw)  # type: ignore[arg-type]


def twin(*nodes: TraceNode, **cfg: Any) -> Twin:
    return Twin(
        nodes or (node("v1"), node("k1", "K80")), ThroughputModel(measured=TABLE), TwinConfig(**cfg)
    )


def test_job_runs_exactly_its_modelled_time() -> None:
    t = twin()
    t.submit(job("a"), 0.0)
    t.submit(job("b"), 0.0)
    assert t.start("a", [Slice("v1", (0,))], 10.0) == pytest.approx(3610.0)
    assert t.start("b", [Slice("k1", (0,))], 10.0) == pytest.approx(10.0 + 4 * 3600)
    first = t.pop_finish()
    assert first.job.job_id == "a" and first.end_s == pytest.approx(3610.0)
    assert first.gpu_seconds == pytest.approx(3600.0)
    assert t.pop_finish().end_s == pytest.approx(14410.0)
    assert math.isinf(t.next_finish())


def test_perf_factor_and_spread_figures_change_the_rate() -> None:
    t = twin(node("v1", gpus=1), node("v2", gpus=1), node("v3"))
    t.set_perf_factor("v3", 0.5)
    for name in ("spread", "slow"):
        t.submit(job(name, gpus=2), 0.0)
    # consolidated=0 measured: 15 / 20 of the consolidated speed
    assert t.start("spread", [Slice("v1", (0,)), Slice("v2", (0,))], 0) == pytest.approx(4800)
    assert t.start("slow", [Slice("v3", (0, 1))], 0) == pytest.approx(7200)


def test_unmeasured_spread_pays_the_documented_penalty() -> None:
    t = twin(node("k1", "K80", gpus=1), node("k2", "K80", gpus=1), spread_penalty=0.5)
    t.submit(job("g", gpus=2), 0.0)
    # K80 at 2 GPUs scales linearly from 1 GPU (2 x 2.5 vs 20 on V100) -> 4x, x 1/0.5 spread
    assert t.start("g", [Slice("k1", (0,)), Slice("k2", (0,))], 0) == pytest.approx(8 * 3600)


# spread over two K80s, no measured spread figure; penalty 0.5
@pytest.mark.parametrize(
    ("kind", "gpus", "tp", "pp", "factor"),
    [
        ("TRAINING", 2, 1, 1, 0.5),  # data parallel: gradients cross the nodes
        ("INFERENCE", 2, 1, 1, 1.0),  # two replicas: nothing crosses the nodes
        ("INFERENCE", 4, 2, 1, 1.0),  # two TP-2 replicas, one per node
        ("INFERENCE", 2, 1, 2, 0.5),  # two pipeline stages: activations cross the nodes
        ("INFERENCE", 1, 1, 1, 1.0),  # one GPU never spreads
    ],
)
def test_spread_factor_charges_only_traffic_across_nodes(
    kind: str, gpus: int, tp: int, pp: int, factor: float
) -> None:
    t = twin(spread_penalty=0.5)
    spec = job("g", gpus=gpus, kind=kind, tensor_parallel=tp, pipeline_parallel=pp)
    assert t.spread_factor(spec, "K80") == factor


def test_capacity_is_never_exceeded() -> None:
    t = twin(node("v1", gpus=2, cpu_milli=4000, memory_mib=1000))
    t.submit(job("a", gpus=1, cpu_milli=3000), 0)
    t.submit(job("b", gpus=1, cpu_milli=3000), 0)
    t.submit(job("s1", gpu_milli=600), 0)
    t.start("a", [Slice("v1", (0,))], 0)
    # GPU 1 is free but the CPU is not: b holds GPU 1 and waits for a's CPU
    assert math.isinf(t.start("b", [Slice("v1", (1,))], 0))
    assert t.free_cpu["v1"] == 1000 and t.runs["b"].blocked
    with pytest.raises(TwinError, match="lacks"):
        t.start("s1", [Slice("v1", (1,), 600)], 0)  # GPU 1 is whole-held by b
    assert t.pop_finish().job.job_id == "a"  # at 3600 s; b starts then
    assert t.runs["b"].first_start_s == pytest.approx(3600) and t.free_cpu["v1"] == 1000
    assert t.next_finish() == pytest.approx(7200)
    t.start("s1", [Slice("v1", (0,), 600)], 3600)
    assert (t.free_milli["v1"] >= 0).all() and t.free_cpu["v1"] >= 0
    assert t.alloc_rate == pytest.approx(1.6 / 2)


def test_random_starts_and_finishes_keep_capacity_sane() -> None:
    rng = np.random.default_rng(0)
    t = twin(node("v1"), node("v2"))
    now = 0.0
    for i in range(300):
        now += float(rng.exponential(100))
        while t.next_finish() <= now:
            t.pop_finish()
        j = job(f"j{i}", gpus=int(rng.choice([1, 2])), duration=float(rng.uniform(50, 900)))
        t.submit(j, now)
        for node_id in ("v1", "v2"):
            free = np.flatnonzero(t.free_milli[node_id] == 1000)
            if free.size >= j.num_gpus:
                t.start(j.job_id, [Slice(node_id, tuple(free[: j.num_gpus]))], now)
                break
        assert all((f >= 0).all() and (f <= 1000).all() for f in t.free_milli.values())
        held = sum(len(s.gpu_indices) * 1000 for r in t.running_jobs() for s in r.slices)
        assert held == t.allocated_milli


def test_evicted_job_resumes_with_its_checkpointed_progress() -> None:
    t = twin(checkpoint_interval_s=1000.0, restore_s=60.0)
    t.submit(job("a"), 0)
    t.start("a", [Slice("v1", (0,))], 0)
    # 2,500 s computed; checkpoints at 1,000 and 2,000: 500 s of work lost
    assert t.evict("a", 2500.0) == pytest.approx(2000.0)
    assert t.runs["a"].preemptions == 1 and t.alloc_rate == 0
    assert math.isinf(t.next_finish())  # the old finish event is stale
    # resumes on a K80 (4x slower) after a 60 s restore: 1,600 s of work left -> 6,400 s
    assert t.start("a", [Slice("k1", (0,))], 3000.0) == pytest.approx(3000 + 60 + 6400)
    run = t.pop_finish()
    assert run.end_s == pytest.approx(9460.0) and run.done == pytest.approx(3600)


def test_migration_keeps_all_work_and_pays_the_restore() -> None:
    t = twin(restore_s=100.0)
    t.submit(job("a"), 0)
    t.start("a", [Slice("k1", (0,))], 0)  # 4x slow: 900 s of work per hour
    finish = t.migrate("a", [Slice("v1", (0,))], 3600.0)
    assert finish == pytest.approx(3600 + 100 + 2700)
    assert t.runs["a"].migrations == 1 and t.free_milli["k1"][0] == 1000
    with pytest.raises(TwinError):
        t.evict("nobody", 4000)
