"""Seeded packing traces in the spirit of the FGD paper's workload (Weng et al., ATC '23: the
Alibaba GPU cluster trace, `openb`): many small and fractional tasks, a few whole-node gangs,
CPU-only tasks, on nodes of 0/1/2/4/8 GPUs of several models; by default production-like, as
a production trace of that kind is (a fifth of the nodes CPU-only, a third of the GPU tasks
pinned to a GPU model, two priority levels).

Cluster (`packing_cluster`): a share `cpu_nodes` (default 0.2) of CPU-only nodes, the rest of
1/2/4/8 GPUs with probabilities 0.10/0.15/0.20/0.45 (renormalised); small nodes (1-2 GPUs)
carry PCIe inference cards (T4, A10G, P100), 4-GPU nodes T4/V100/A10G, 8-GPU nodes V100/A100
with NVLink. Host CPU cores by node size 0/1/2/4/8 GPUs: 64/32/48/64/96, memory
256/128/192/384/768 GiB.

Jobs (`packing_jobs`): one in seven asks for no GPU (4-32 cores, 8-64 GiB); of the GPU jobs
45 % take a share of one GPU (50-950 milli, steps of 10; 2-8 cores, 4-16 GiB), 50 % one whole
GPU, 5 % a gang of 2, 4 or 8 GPUs on one node (2 %, 1.5 %, 1.5 %); whole GPUs ask 8-16 cores
(8-11 in a gang) and 16-64 GiB each. A share `pinned_share` (default 1/3) of the GPU jobs may
only use one GPU model (one with a node big enough for it; 0 is FGD's default openb pod list,
whose `gpu_spec` is empty; its `gpuspec33` variant pins a third). `high_priority` (default
0.3) of the jobs have priority 1, the rest 0 (two levels; 0 gives one level).
The host asks follow the openb sample rows (a 1-GPU pod ~12 cores, a share 4 cores, an 8-GPU
pod 88 of a node's 96 cores), so host CPU binds as it does there. Poisson arrivals (mean gap
`lam_s`) until the GPU demand that has arrived reaches `demand` x the cluster's GPUs. Shares
are INFERENCE, the rest TRAINING; durations 1-4 h (arrivals-only replays never finish them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agents.replay.trace import TraceJob, TraceNode
from scorer import default_catalog

__all__ = ["NODE_SIZES", "packing_cluster", "packing_jobs"]

NODE_SIZES = {1: 0.10, 2: 0.15, 4: 0.20, 8: 0.45}  # GPU nodes; CPU-only ones: `cpu_nodes`
MODELS_BY_SIZE: dict[int, dict[str, float]] = {
    1: {"T4": 0.5, "A10G": 0.3, "P100": 0.2},
    2: {"T4": 0.4, "A10G": 0.4, "P100": 0.2},
    4: {"T4": 0.4, "V100-16": 0.4, "A10G": 0.2},
    8: {"V100-32": 0.3, "V100-16": 0.3, "A100-40": 0.4},
}
NODE_CORES = {0: 64, 1: 32, 2: 48, 4: 64, 8: 96}
NODE_GIB = {0: 256, 1: 128, 2: 192, 4: 384, 8: 768}
SHARE_MILLI = (50, 950)
GANGS = {2: 0.02, 4: 0.015, 8: 0.015}
P_CPU_ONLY, P_SHARE = 1 / 7, 0.45
CPU_NODES, PINNED, HIGH_PRIORITY = 0.2, 1 / 3, 0.3  # the production-like defaults


def _pick(rng: np.random.Generator, table: dict[int, float] | dict[str, float]) -> object:
    keys = list(table)
    probs = np.array(list(table.values()), float)
    return keys[int(rng.choice(len(keys), p=probs / probs.sum()))]


def packing_cluster(
    n_nodes: int = 250, *, seed: int = 0, region: str = "packing", cpu_nodes: float = CPU_NODES
) -> tuple[TraceNode, ...]:
    """`n_nodes` nodes, a share `cpu_nodes` of them (0..1) without GPUs."""
    rng = np.random.default_rng(seed)
    catalog = default_catalog()
    total = sum(NODE_SIZES.values())
    sizes = {0: cpu_nodes, **{k: (1 - cpu_nodes) * v / total for k, v in NODE_SIZES.items()}}
    nodes = []
    for i in range(n_nodes):
        size = int(_pick(rng, sizes))  # type: ignore[call-overload]
        rack = f"rack-{i // 16:02d}"
        cpu, memory = NODE_CORES[size] * 1000, NODE_GIB[size] * 1024
        if size == 0:
            nodes.append(
                TraceNode(
                    f"cpu-{i:04d}", region, "", 0, zone=f"{region}-a", rack=rack,
                    cpu_milli=cpu, memory_mib=memory, interconnect="none", gpu_memory_mib=0,
                )
            )  # fmt: skip
            continue
        spec = catalog[str(_pick(rng, MODELS_BY_SIZE[size]))]
        nodes.append(
            TraceNode(
                f"{spec.name.lower()}x{size}-{i:04d}", region, spec.name, size,
                zone=f"{region}-a", rack=rack, cpu_milli=cpu, memory_mib=memory,
                price_per_gpu_hour=spec.price_per_gpu_hour,
                interconnect=spec.interconnect if size > 1 else "pcie",
                gpu_memory_mib=spec.memory_mib,
            )
        )  # fmt: skip
    return tuple(nodes)


def _gpu_ask(rng: np.random.Generator) -> tuple[int, int, int, int]:
    """(GPUs, milli per GPU, cores, GiB) of a GPU job."""
    u = float(rng.random())
    gang_p = sum(GANGS.values())
    if gang_p <= u < gang_p + P_SHARE:
        milli = 10 * int(rng.integers(SHARE_MILLI[0] // 10, SHARE_MILLI[1] // 10 + 1))
        return 1, milli, int(rng.integers(2, 9)), int(rng.integers(4, 17))
    gpus = int(_pick(rng, GANGS)) if u < gang_p else 1  # type: ignore[call-overload]
    # a gang asks at most 11 cores a GPU, so an 8-GPU one fits a 96-core node (openb's 88)
    cores = int(rng.integers(8, 17 if gpus == 1 else 12))
    return gpus, 1000, gpus * cores, gpus * int(rng.integers(16, 65))


def packing_jobs(
    nodes: Sequence[TraceNode],
    *,
    demand: float = 1.5,
    seed: int = 0,
    lam_s: float = 60.0,
    pinned_share: float = PINNED,
    high_priority: float = HIGH_PRIORITY,
) -> tuple[TraceJob, ...]:
    """Jobs until their GPU demand reaches `demand` x the GPUs of `nodes`; a share `pinned_share`
    of the GPU jobs may use only one GPU model, a share `high_priority` of all has priority 1."""
    rng = np.random.default_rng(seed + 7919)  # independent of the cluster drawn with `seed`
    capacity = sum(n.gpu_count for n in nodes)
    # a pinned job names a model with a node big enough for it (never an impossible job)
    models_for = {g: sorted({n.gpu_model for n in nodes if n.gpu_count >= g}) for g in (1, *GANGS)}
    jobs: list[TraceJob] = []
    arrived, t = 0.0, 0.0
    while arrived < demand * capacity:
        job_id = f"job-{len(jobs):05d}"
        hours = float(rng.uniform(1.0, 4.0))
        priority = int(rng.random() < high_priority)
        if rng.random() < P_CPU_ONLY:
            cores, gib = int(rng.integers(4, 33)), int(rng.integers(8, 65))
            jobs.append(
                TraceJob(
                    job_id, round(t), 0, round(hours * 3600, 1), cpu_milli=cores * 1000,
                    memory_mib=gib * 1024, kind="BATCH", priority=priority,
                )
            )  # fmt: skip
        else:
            gpus, milli, cores, gib = _gpu_ask(rng)
            pin, models = rng.random() < pinned_share, models_for[gpus]
            pinned = (str(models[int(rng.integers(len(models)))]),) if pin and models else ()
            jobs.append(
                TraceJob(
                    job_id, round(t), gpus, round(hours * 3600, 1), gpu_milli=milli,
                    gpu_models=pinned, cpu_milli=cores * 1000, memory_mib=gib * 1024,
                    kind="INFERENCE" if milli < 1000 else "TRAINING", tensor_parallel=gpus,
                    priority=priority,
                )
            )  # fmt: skip
            arrived += gpus * milli / 1000
        t += float(rng.exponential(lam_s))
    return tuple(jobs)
