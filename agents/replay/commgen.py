"""A seeded trace of communication-heavy training gangs over regions joined by narrow links.

What it models (fixed before any comparison was run; docs/network.md):

- **Cluster**: `regions` regions (default 4, named like the demo fleet's), each `nodes` servers
  of 8 A100-80 on NVLink (48 GPUs a region), two servers a rack.
- **Backbone**: narrow inter-region links, both ways: 25 Gbit/s inside North America and across
  the Atlantic, 10 Gbit/s to and from Asia and between the US west coast and Europe; RTTs of
  the public clouds' inter-region pings (62-215 ms); $0.02/GB inside a continent, $0.05 across.
- **Jobs**: training gangs of 16-40 GPUs (more than a server, at most a region), BF16, each one
  of four shapes (weights 0.3 / 0.4 / 0.2 / 0.1): 1.3B data-parallel (micro-batch 8 x 2048
  tokens), 7B TP 2 (2 x 4096), 13B TP 4 (1 x 4096), 13B TP 2 x PP 2 (1 x 4096). Half of them
  accumulate gradients (8, 16, 32 or 64 micro-batches per step), half do not. Run time on their
  GPUs consolidated: lognormal, median 3 h, sigma 0.8, within 0.5-24 h. Every job allows
  crossing regions (`cross_region_ok`): placement decides whether it should.
- **Arrivals**: Poisson, mean gap sized so the offered GPU-hours are `load` (0.9) of the fleet.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agents.replay.trace import Trace, TraceJob, TraceNode
from scorer import ThroughputModel, default_catalog
from scorer.network import Link

__all__ = ["SHAPES", "comm_heavy_trace", "narrow_backbone"]

REGIONS = ("us-east", "us-west", "eu-west", "ap-southeast")
# (name, params B, TP, PP, micro-batch, sequence length, weight)
SHAPES = (
    ("gpt-1.3b", 1.3, 1, 1, 8, 2048, 0.3),
    ("llama-7b", 7.0, 2, 1, 2, 4096, 0.4),
    ("llama-13b", 13.0, 4, 1, 1, 4096, 0.2),
    ("llama-13b-pp", 13.0, 2, 2, 1, 4096, 0.1),
)
ACCUMULATE = (8, 16, 32, 64)
GANG_GPUS = (16, 24, 32, 40)
# (a, b, RTT ms, Gbit/s, $/GB): public-cloud-like RTTs, narrow provisioned capacity
_LINKS = (
    ("us-east", "us-west", 62, 25.0, 0.02),
    ("us-east", "eu-west", 76, 25.0, 0.05),
    ("us-west", "eu-west", 140, 10.0, 0.05),
    ("us-east", "ap-southeast", 215, 10.0, 0.05),
    ("us-west", "ap-southeast", 170, 10.0, 0.05),
    ("eu-west", "ap-southeast", 160, 10.0, 0.05),
)


def narrow_backbone(regions: Sequence[str] = REGIONS, scale: float = 1.0) -> tuple[Link, ...]:
    """Both directions of every link between `regions`, capacities x `scale`."""
    keep = set(regions)
    out = []
    for a, b, rtt, gbps, cost in _LINKS:
        if a in keep and b in keep:
            out += [Link(a, b, rtt, gbps * scale, cost), Link(b, a, rtt, gbps * scale, cost)]
    return tuple(out)


def _cluster(regions: Sequence[str], nodes: int) -> tuple[TraceNode, ...]:
    spec = default_catalog()["A100-80"]

    def node(r: str, i: int) -> TraceNode:
        return TraceNode(
            node_id=f"{r}-{i:02d}", region=r, gpu_model=spec.name, gpu_count=8, zone=f"{r}-a",
            rack=f"{r}-rack{i // 2}", price_per_gpu_hour=2.5, interconnect="nvlink",
            gpu_memory_mib=spec.memory_mib,
        )  # fmt: skip

    return tuple(node(r, i) for r in regions for i in range(nodes))


def _job(i: int, at: float, rng: np.random.Generator) -> TraceJob:
    weights = np.array([s[-1] for s in SHAPES])
    name, params, tp, pp, mb, seq, _ = SHAPES[int(rng.choice(len(SHAPES), p=weights))]
    replica = tp * pp
    gpus = int(rng.choice(GANG_GPUS)) // replica * replica
    accumulate = 1 if rng.random() < 0.5 else int(rng.choice(ACCUMULATE))
    hours = float(np.clip(rng.lognormal(np.log(3.0), 0.8), 0.5, 24.0))
    return TraceJob(
        job_id=f"{name}-{i:04d}", submit_s=round(at, 1), num_gpus=gpus, duration_s=hours * 3600,
        reference_model="A100-80", kind="TRAINING", params_b=params, precision="BF16",
        tensor_parallel=tp, pipeline_parallel=pp, grad_accum_steps=accumulate,
        micro_batch=mb, seq_len=seq, cross_region_ok=True, checkpoint_interval_s=1800,
    )  # fmt: skip


def comm_heavy_trace(
    n_jobs: int = 160,
    *,
    seed: int = 0,
    regions: Sequence[str] = REGIONS,
    nodes_per_region: int = 6,
    load: float = 0.9,
    link_scale: float = 1.0,
) -> Trace:
    """The trace described in the module docstring."""
    rng = np.random.default_rng(seed)
    nodes = _cluster(regions, nodes_per_region)
    drafts = [_job(i, 0.0, rng) for i in range(n_jobs)]
    gpu_hours = np.mean([j.num_gpus * j.duration_s / 3600 for j in drafts])
    gap_s = 3600.0 * gpu_hours / (load * 8 * len(nodes))
    at, jobs = 0.0, []
    for draft in drafts:
        jobs.append(TraceJob(**{**vars(draft), "submit_s": round(at, 1)}))
        at += float(rng.exponential(gap_s))
    return Trace(nodes, tuple(jobs), ThroughputModel(), narrow_backbone(regions, link_scale))
