"""The decision core places a seeded job stream on a seeded fleet exactly as recorded.

`data/placements_golden.json` was recorded before the incremental-state speed work (issue 36), at
the packing branch's tip (ba9596d: the default preset packs first, issue 35), which has none of
that work, so a faster core that decides differently fails here. Recorded again for issue 34
(scoring never learns): the learned mixes count committed placements only (`Placer.observe`),
no longer every job scored, which was the only intended change. The stream exercises what the
speed work caches: reservations and releases (whole GPUs, shares, host CPU/memory), GPU and node
health, speed factors, and a learned fragmentation mix; gangs spread over nodes and, with the
link graph, over regions.

Record again (only when a placement change is intended, and say why in the commit):

    PYTHONPATH=$PWD .venv/bin/python tests/scorer/test_placements_golden.py --record
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scorer import (
    Assignment,
    ClusterState,
    JobSpec,
    NodeSpec,
    Placer,
    default_catalog,
    gavel_throughputs,
    make_placer,
)
from scorer.network import Link, LinkGraph, NetworkView

GOLDEN = Path(__file__).with_name("data") / "placements_golden.json"
MODELS = ("A100-80", "H100", "V100-32", "L40S", "A10G", "T4", "MI300X", "L4")
NVLINK = {"A100-80", "H100", "V100-32", "MI300X"}
REGIONS = ("r0", "r1", "r2")
NODES, DECISIONS = 300, 400


def _fleet(rng: np.random.Generator) -> ClusterState:
    state = ClusterState(capacity=16)
    catalog = default_catalog()
    for i in range(NODES):
        model = MODELS[int(rng.integers(len(MODELS)))]
        host = i % 4 == 0  # a quarter declare host CPU and memory (the mix's host check)
        state.upsert_node(
            NodeSpec(
                node_id=f"n{i:03d}",
                region=REGIONS[i % len(REGIONS)],
                zone=f"z{(i // 3) % 2}",
                rack=f"k{(i // 3) // 8}",
                gpu_model=model,
                gpu_count=8 if i % 10 else 4,
                gpu_memory_mib=catalog[model].memory_mib,
                interconnect="nvlink" if model in NVLINK else "pcie",
                nvlink_islands=((0, 1, 2, 3), (4, 5, 6, 7)) if model in NVLINK and i % 2 else (),
                cpu_milli=64_000 if host else 0,
                memory_mib=512_000 if host else 0,
            )
        )
    for r, region in enumerate(REGIONS):
        state.set_region_signal(region, carbon_g_per_kwh=100 + 150 * r, price_per_kwh=0.1 * r)
    for i in range(0, NODES, 2):  # half the nodes start part-full, some with shares
        gpus = int(state.gpu_count[state.slot_of(f"n{i:03d}")])
        used = tuple(sorted(rng.choice(gpus, size=int(rng.integers(1, gpus)), replace=False)))
        state.reserve(f"bg{i}", [Assignment(f"n{i:03d}", tuple(int(g) for g in used))])
        free = [g for g in range(gpus) if g not in used]
        if free and rng.random() < 0.4:
            state.reserve(f"bs{i}", [Assignment(f"n{i:03d}", (free[0],), 300)])
    return state


def _job(i: int, rng: np.random.Generator, job_types: list[str]) -> JobSpec:
    p = round(float(rng.random()), 3)
    kind = i % 8
    if kind in (0, 1):
        return JobSpec(f"j{i}", job_type=job_types[int(rng.integers(len(job_types)))],
                       cost_speed_preference=p)  # fmt: skip
    if kind == 2:
        return JobSpec(f"j{i}", kind="INFERENCE", params_b=7, precision="BF16",
                       cost_speed_preference=p, data_region="r0")  # fmt: skip
    if kind == 3:
        milli = (250, 500, 700)[int(rng.integers(3))]
        return JobSpec(f"j{i}", kind="INFERENCE", params_b=1, precision="BF16", gpu_milli=milli,
                       cpu_milli=4000, memory_mib=16_000, cost_speed_preference=p)  # fmt: skip
    if kind in (4, 5):
        gpus = (2, 4, 8)[int(rng.integers(3))]
        return JobSpec(f"j{i}", kind="TRAINING", params_b=7, precision="BF16", gpu_count=gpus,
                       tensor_parallel=gpus, cpu_milli=8000 * (kind == 5),
                       memory_mib=64_000 * (kind == 5), cost_speed_preference=p)  # fmt: skip
    if kind == 6:
        return JobSpec(f"j{i}", kind="TRAINING", params_b=13, precision="BF16", gpu_count=16,
                       tensor_parallel=8, data_parallel=2, cost_speed_preference=p)  # fmt: skip
    dp = 8 if i % 16 != 15 else 24  # now and then more than a region has free of a model
    return JobSpec(f"j{i}", kind="TRAINING", params_b=7, precision="BF16", gpu_count=4 * dp,
                   tensor_parallel=4, data_parallel=dp, cross_region_ok=True, grad_accum_steps=16,
                   cost_speed_preference=p)  # fmt: skip


def _network() -> NetworkView:
    links = []
    for a, b, rtt, gbps in (("r0", "r1", 20, 100), ("r1", "r2", 40, 40), ("r0", "r2", 60, 10)):
        links += [Link(a, b, rtt, gbps, 0.02), Link(b, a, rtt, gbps, 0.02)]
    return NetworkView(LinkGraph(links))


def _churn(state: ClusterState, i: int, rng: np.random.Generator, held: list[str]) -> None:
    """Between decisions: releases, GPU and node health, speed factors."""
    if held and rng.random() < 0.3:
        state.release(held.pop(int(rng.integers(len(held)))))
    node = f"n{int(rng.integers(NODES)):03d}"
    gpus = int(state.gpu_count[state.slot_of(node)])
    if i % 17 == 0:
        state.set_gpu_health(node, [bool(rng.random() > 0.2) for _ in range(gpus)])
    if i % 29 == 0:
        state.set_node_healthy(node, bool(i % 58))
    if i % 13 == 0:
        state.set_perf_factor(node, [round(0.6 + 0.4 * float(rng.random()), 3)] * gpus)


def decisions(networked: bool) -> list[dict[str, Any]]:
    """Place the seeded stream (reserving each placement) and record every decision."""
    rng = np.random.default_rng(36 + networked)
    state = _fleet(rng)
    throughput = gavel_throughputs()
    job_types = sorted({k[0] for k in throughput.measured})
    placer = (
        make_placer("gpuflow", state, throughput=throughput, network=_network())
        if networked
        else Placer(state, throughput=throughput)
    )
    out, held = [], []
    for i in range(DECISIONS):
        job = _job(i, rng, job_types)
        region = None if networked or i % 5 == 0 else REGIONS[i % len(REGIONS)]
        result = placer.place(job, region)
        row: dict[str, Any] = {"job": job.job_id, "placed": result.placed}
        if result.placed:
            state.reserve(job.job_id, result.assignments)
            placer.observe(job)  # committed: the learned mixes count it
            held.append(job.job_id)
            row["assignments"] = [
                [a.node_id, list(a.gpu_indices), a.gpu_milli] for a in result.assignments
            ]
            row["score"] = round(result.score, 9)
        out.append(row)
        _churn(state, i, rng, held)
    return out


def _record() -> None:
    data = {"plain": decisions(False), "networked": decisions(True)}
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(data, separators=(",", ":")) + "\n")


@pytest.mark.parametrize("stream", ["plain", "networked"])
def test_placements_match_the_recorded_decisions(stream: str) -> None:
    golden = json.loads(GOLDEN.read_text())[stream]
    now = decisions(stream == "networked")
    assert len(now) == len(golden) == DECISIONS
    assert sum(r["placed"] for r in golden) > DECISIONS // 2  # the stream does place
    for got, want in zip(now, golden, strict=True):
        assert got.get("assignments") == want.get("assignments"), got["job"]
        assert got.get("score", 0.0) == pytest.approx(want.get("score", 0.0), abs=1e-6), got["job"]


if __name__ == "__main__":
    if sys.argv[1:] == ["--record"]:
        _record()
