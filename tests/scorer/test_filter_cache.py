"""Static filters' masks kept across decisions equal the masks computed afresh.

`scorer/filter_cache.py` computes a keyed static filter's mask once per (region, job key,
inventory version). Here a seeded stream of jobs differing in every field a static filter reads
(GPU models allowed, regions, precision, memory, shares, software stack, host CPU and memory)
meets a fleet whose inventory changes between decisions (another model, region, memory, stack
or host size, nodes added and removed), and every mask the placer uses is compared with the
filter run now; and the placements equal those of a placer that keeps nothing.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scorer import ClusterState, JobSpec, NodeSpec, default_catalog, make_placer
from scorer.filter_cache import StaticMasks

MODELS = ("H100", "A100-80", "T4", "MI300X")
REGIONS = ("a", "b", "c")
STACKS = ("", "cuda-12.4", "cuda-11.8", "rocm-6.2")


def _node(i: int, rng: np.random.Generator) -> NodeSpec:
    model = MODELS[int(rng.integers(len(MODELS)))]
    stack = "rocm-6.2" if model == "MI300X" else STACKS[int(rng.integers(3))]
    host = bool(rng.integers(2))
    return NodeSpec(
        f"n{i}",
        REGIONS[int(rng.integers(len(REGIONS)))],
        model,
        8,
        default_catalog()[model].memory_mib,
        software_stack=stack,
        cpu_milli=int(rng.choice([32_000, 64_000])) if host else 0,
        memory_mib=int(rng.choice([128_000, 512_000])) if host else 0,
    )


def _job(k: int, rng: np.random.Generator) -> JobSpec:
    share = bool(rng.integers(4) == 0)
    return JobSpec(
        f"j{k}",
        gpu_count=1 if share else int(rng.choice([1, 2, 4, 8])),
        gpu_milli=int(rng.choice([250, 500])) if share else 1000,
        precision=str(rng.choice(["FP16", "BF16", "FP8"])),
        min_gpu_memory_mib=int(rng.choice([0, 20_000, 60_000])),
        allowed_gpu_models=tuple(rng.choice(MODELS, int(rng.integers(3)), replace=False)),
        allowed_regions=tuple(rng.choice(REGIONS, int(rng.integers(3)), replace=False)),
        software_stack=str(rng.choice(["portable", "cuda-12.1", "rocm-6"])),
        cpu_milli=int(rng.choice([0, 16_000, 48_000])),
        memory_mib=int(rng.choice([0, 64_000, 256_000])),
    )


def _share_job(rng: np.random.Generator) -> JobSpec:
    """A share whose memory need fits some shares and not others."""
    return replace(_job(99, rng), gpu_count=1, gpu_milli=500, min_gpu_memory_mib=30_000)


def _variants(jobs: list[JobSpec], rng: np.random.Generator) -> list[JobSpec]:
    """Each job, and copies differing in one field a static filter reads: a cache keyed on
    too little hands one of them another's mask."""
    out = []
    for job in jobs:
        out += [
            job,
            replace(job, allowed_regions=("a",) if job.allowed_regions != ("a",) else ("b",)),
            replace(job, software_stack="rocm-6" if "cuda" in job.software_stack else "cuda-12.1"),
            replace(job, cpu_milli=48_000 - job.cpu_milli),
            replace(job, memory_mib=256_000 - job.memory_mib),
        ]
        if job.gpu_count == 1:
            out.append(replace(job, gpu_milli=250 if job.gpu_milli != 250 else 1000))
    return out


def _churn(state: ClusterState, rng: np.random.Generator, next_id: int) -> int:
    """Change the inventory a little: a node re-described, one added, or one removed."""
    action = int(rng.integers(4))
    live = [state.spec(int(s)).node_id for s in state.slots()]
    if action == 0 and len(live) > 10:
        state.remove_node(live[int(rng.integers(len(live)))])
    elif action == 1:
        state.upsert_node(_node(next_id, rng))
        return next_id + 1
    elif action == 2:
        old = state.node(live[int(rng.integers(len(live)))])
        new = _node(0, rng)
        state.upsert_node(replace(new, node_id=old.node_id))
    return next_id  # 3: nothing changes (the masks are reused)


def test_kept_masks_equal_fresh_ones_through_inventory_changes() -> None:
    rng = np.random.default_rng(36)
    state = ClusterState(capacity=8)
    for i in range(40):
        state.upsert_node(_node(i, rng))
    placer = make_placer("gpuflow", state)
    jobs = _variants(
        [*(_job(k, rng) for k in range(3)), _share_job(rng)], rng
    )  # few kinds, met again and again
    next_id = 40
    for step in range(800):
        if step % 50 == 0:  # the inventory changes now and then, the jobs come again between
            next_id = _churn(state, rng, next_id)
        job = jobs[int(rng.integers(len(jobs)))]
        region = None if step % 2 else "a"
        ctx, masks, _, _ = placer._filter(job, region)
        for f, mask in masks:
            np.testing.assert_array_equal(mask, f.filter(ctx), err_msg=f"{f.name} at {step}")
    assert placer._static.hits > 300  # most decisions used kept masks


def test_placements_equal_a_placer_that_keeps_no_masks() -> None:
    rng = np.random.default_rng(7)
    state = ClusterState(capacity=8)
    for i in range(60):
        state.upsert_node(_node(i, rng))
    cached, fresh = make_placer("gpuflow", state), make_placer("gpuflow", state)
    fresh._static = StaticMasks(state, fresh.filters, keep=False)  # every mask computed now
    jobs = [_job(k, rng) for k in range(10)]
    next_id = 60
    for step in range(300):
        next_id = _churn(state, rng, next_id)
        job = replace(jobs[int(rng.integers(len(jobs)))], job_id=f"p{step}")
        region = REGIONS[step % len(REGIONS)]
        a, b = cached.place(job, region), fresh.place(job, region)
        assert (a.placed, a.assignments, a.score, a.reasons) == (
            b.placed,
            b.assignments,
            b.score,
            b.reasons,
        ), step
        if a.placed and step % 2:
            state.reserve(job.job_id, a.assignments)
