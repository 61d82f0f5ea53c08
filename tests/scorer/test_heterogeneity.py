"""Heterogeneity pays: on Gavel's mixed K80/P100/V100 cluster with the measured table, gpuflow's
placements give more total throughput than a model-agnostic first fit (and than best fit).

Throughput of a job = its measured steps/s on the GPUs it got over its steps/s on a V100, so
every job counts alike whatever its raw step rate (Gavel's normalised throughput).
"""

from __future__ import annotations

import random

import pytest

from scorer import ClusterState, JobSpec, NodeSpec, ThroughputModel, default_catalog, make_placer

DISTRIBUTED = ("ResNet-18", "ResNet-50", "Transformer", "LM")


def _cluster(seed: int) -> ClusterState:
    # Gavel's evaluation shape scaled down: 12 nodes of 4 GPUs, 16 GPUs of each type,
    # listed in a shuffled order so first fit is not accidentally model-aware
    specs = [(m, i) for m in ("K80", "P100", "V100-16") for i in range(4)]
    random.Random(seed).shuffle(specs)
    state = ClusterState()
    cat = default_catalog()
    for model, i in specs:
        state.upsert_node(
            NodeSpec(f"{model}-{i}", "eu", model, 4, cat[model].memory_mib, rack=f"r{i % 2}")
        )
    return state


def _jobs(gavel: ThroughputModel, n: int, seed: int) -> list[JobSpec]:
    # Gavel's recipe: job types uniform; distributed ones use 1/2/4 GPUs w.p. .7/.1/.2
    rng = random.Random(seed)
    types = sorted({k[0] for k in gavel.measured})
    jobs = []
    for i in range(n):
        job_type = rng.choice(types)
        gpus = 1
        if job_type.startswith(DISTRIBUTED):
            gpus = rng.choices((1, 2, 4), (0.7, 0.1, 0.2))[0]
        jobs.append(JobSpec(f"j{i}", kind="TRAINING", job_type=job_type, gpu_count=gpus))
    return jobs


def _total_throughput(policy: str, gavel: ThroughputModel, seed: int, n: int) -> float:
    state = _cluster(seed)
    placer = make_placer(policy, state, throughput=gavel)
    total = 0.0
    for job in _jobs(gavel, n, seed):
        result = placer.place(job)
        if result.placed:
            state.reserve(job.job_id, result.assignments)
            total += gavel.relative_speed(
                job, result.gpu_model or "", consolidated=len(result.assignments) == 1
            )
    return total


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("n_jobs", [20, 30])
def test_gpuflow_beats_model_agnostic_first_fit(gavel: ThroughputModel, seed: int, n_jobs: int):
    gpuflow = _total_throughput("gpuflow", gavel, seed, n_jobs)
    first_fit = _total_throughput("first_fit", gavel, seed, n_jobs)
    best_fit = _total_throughput("best_fit", gavel, seed, n_jobs)
    print(f"seed={seed} n={n_jobs}: gpuflow={gpuflow:.2f} first_fit={first_fit:.2f} "
          f"best_fit={best_fit:.2f}")  # fmt: skip
    assert gpuflow > first_fit
    assert gpuflow > best_fit
