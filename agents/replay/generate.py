"""Seeded synthetic traces after Gavel's recipe (scorer/data/README.md), and CSV writers.

Jobs: Poisson arrivals (first at 0, exponential gaps of mean `lam_s`), job types uniform over
the throughput table's types, run time on the reference V100 uniform in 1..4 hours; the
distributed models (ResNet-18/50, Transformer, LM) use 1, 2 or 4 GPUs with probabilities
0.7 / 0.1 / 0.2, the others 1. Cluster: Gavel's 36 V100 + 36 P100 + 36 K80 as 9 servers of 4
GPUs per model, listed round-robin (V100, P100, K80, V100...) so inventory order says nothing
about speed.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.replay.trace import PASSTHROUGH, TraceJob, TraceNode
from scorer import ThroughputModel, default_catalog

__all__ = [
    "DISTRIBUTED",
    "gavel_cluster",
    "gavel_jobs",
    "runnable_types",
    "share_mix_jobs",
    "write_jobs",
    "write_nodes",
]

DISTRIBUTED = ("ResNet-18", "ResNet-50", "Transformer", "LM")
SCALES, SCALE_P = (1, 2, 4), (0.7, 0.1, 0.2)
REFERENCE = "V100-16"


def gavel_cluster(
    per_model: int = 36,
    gpus_per_node: int = 4,
    models: Sequence[str] = ("V100-16", "P100", "K80"),
    region: str = "gavel",
) -> tuple[TraceNode, ...]:
    catalog = default_catalog()
    servers = per_model // gpus_per_node
    nodes = []
    for i in range(servers):
        for m in models:
            spec = catalog[m]
            nodes.append(
                TraceNode(
                    node_id=f"{spec.name.lower()}-{i:02d}",
                    region=region,
                    gpu_model=spec.name,
                    gpu_count=gpus_per_node,
                    zone=f"{region}-a",
                    rack=f"rack-{i // 4}",
                    price_per_gpu_hour=spec.price_per_gpu_hour,
                    interconnect=spec.interconnect,
                    gpu_memory_mib=spec.memory_mib,
                )
            )
    return tuple(nodes)


def runnable_types(throughput: ThroughputModel) -> tuple[str, ...]:
    """Job types of the table with a non-zero single-GPU rate on the reference model."""
    ref = throughput.catalog.canonical(REFERENCE)
    return tuple(sorted({jt for jt, m, s, _ in throughput.measured if m == ref and s == 1}))


def gavel_jobs(
    throughput: ThroughputModel,
    n_jobs: int,
    lam_s: float,
    *,
    seed: int = 0,
    multi_gpu: bool = True,
    min_hours: float = 1.0,
    max_hours: float = 4.0,
) -> tuple[TraceJob, ...]:
    rng = np.random.default_rng(seed)
    types = runnable_types(throughput)
    gaps = rng.exponential(lam_s, n_jobs)
    gaps[0] = 0.0
    arrivals = np.cumsum(gaps)
    jobs = []
    for i in range(n_jobs):
        job_type = types[int(rng.integers(len(types)))]
        scale = 1
        if multi_gpu and job_type.split(" ")[0] in DISTRIBUTED:
            scale = int(rng.choice(SCALES, p=SCALE_P))
        hours = float(rng.uniform(min_hours, max_hours))
        jobs.append(
            TraceJob(
                job_id=f"job-{i:05d}",
                submit_s=float(round(arrivals[i])),
                num_gpus=scale,
                duration_s=round(hours * 3600.0, 1),
                job_type=job_type,
                reference_model=REFERENCE,
            )
        )
    return tuple(jobs)


# (GPUs, milli per GPU): probability; an FGD-style mix with GPU shares of several sizes
SHARE_MIX = {
    (1, 200): 0.10,
    (1, 300): 0.10,
    (1, 500): 0.15,
    (1, 700): 0.10,
    (1, 1000): 0.30,
    (2, 1000): 0.10,
    (4, 1000): 0.10,
    (8, 1000): 0.05,
}


def share_mix_jobs(
    throughput: ThroughputModel,
    demand_gpus: float,
    *,
    seed: int = 0,
    mix: dict[tuple[int, int], float] | None = None,
    lam_s: float = 60.0,
) -> tuple[TraceJob, ...]:
    """Jobs of a mix with GPU shares until their total demand reaches `demand_gpus` GPUs
    (for --arrivals-only packing runs); types and durations as in `gavel_jobs`, 1-GPU types
    only for gangs that are not distributed models."""
    mix = mix or SHARE_MIX
    rng = np.random.default_rng(seed)
    classes, probs = list(mix), np.array(list(mix.values()), float)
    types = runnable_types(throughput)
    jobs: list[TraceJob] = []
    total, t = 0.0, 0.0
    while total < demand_gpus:
        gpus, milli = classes[int(rng.choice(len(classes), p=probs / probs.sum()))]
        pool = [x for x in types if gpus == 1 or x.split(" ")[0] in DISTRIBUTED]
        jobs.append(
            TraceJob(
                job_id=f"job-{len(jobs):05d}",
                submit_s=float(round(t)),
                num_gpus=gpus,
                duration_s=round(float(rng.uniform(3600, 4 * 3600)), 1),
                gpu_milli=milli,
                job_type=pool[int(rng.integers(len(pool)))],
                reference_model=REFERENCE,
            )
        )
        total += gpus * milli / 1000
        t += float(rng.exponential(lam_s))
    return tuple(jobs)


NODE_HEADER = (
    "node_id",
    "region",
    "zone",
    "rack",
    "gpu_model",
    "gpu_count",
    "cpu_milli",
    "memory_mib",
    "price_per_gpu_hour",
    "interconnect",
)
JOB_HEADER = (
    "job_id",
    "submit_s",
    "num_gpus",
    "duration_s",
    "gpu_milli",
    "gpu_models",
    "job_type",
    "reference_model",
    "priority",
    "tenant",
    "cpu_milli",
    "memory_mib",
    "kind",
    "tensor_parallel",
    "checkpointable",
    "checkpoint_interval_s",
)
COMM_HEADER = (  # written when a job has a communication shape (docs/traces.md)
    "params_b",
    "precision",
    "pipeline_parallel",
    "grad_accum_steps",
    "micro_batch",
    "seq_len",
    "cross_region_ok",
)


def _write_csv(path: str | Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(header)
        out.writerows(rows)


def write_nodes(path: str | Path, nodes: Sequence[TraceNode]) -> None:
    _write_csv(
        path,
        NODE_HEADER,
        (
            (n.node_id, n.region, n.zone, n.rack, n.gpu_model, n.gpu_count, n.cpu_milli,
             n.memory_mib, n.price_per_gpu_hour, n.interconnect)
            for n in nodes
        ),
    )  # fmt: skip


def write_jobs(path: str | Path, jobs: Sequence[TraceJob]) -> None:
    """jobs.csv; the public traces' columns a job carries (`TraceJob.extra`) come last."""
    comm = any(j.params_b > 0 for j in jobs)
    extra = [c for c in PASSTHROUGH if any(c == k for j in jobs for k, _ in j.extra)]
    _write_csv(
        path,
        JOB_HEADER + (COMM_HEADER if comm else ()) + tuple(extra),
        (
            (j.job_id, f"{j.submit_s:.15g}", j.num_gpus, f"{j.duration_s:.15g}",
             j.gpu_milli if j.num_gpus else 0,  # a CPU-only job: 0, as the public traces
             "|".join(j.gpu_models), j.job_type, j.reference_model or "", j.priority, j.tenant,
             j.cpu_milli, j.memory_mib, j.kind, j.tensor_parallel, int(j.checkpointable),
             j.checkpoint_interval_s)
            + (tuple(getattr(j, c) for c in COMM_HEADER) if comm else ())
            + tuple(dict(j.extra).get(c, "") for c in extra)
            for j in jobs
        ),
    )  # fmt: skip
