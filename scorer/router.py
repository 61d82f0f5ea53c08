"""The router's region ranking: which regions should try a job first, from RegionViews.

Per region the best GPU model that can hold the job now (else ever) is valued; components, each
0..100: compute (speed / best speed anywhere), cost (cheapest cost / cost), availability (100
fits now, 30 fits when capacity frees, region listed last with 0 if it never can), headroom
(100 x free / total GPUs of that model: spreads load over regions as they fill), carbon, queue
(100 / (1 + depth / 10)), data (100 same region, else 100 x (1 - RTT / 200 ms), 50 unknown),
porting (a portable job: 100 - the model's stack penalty).

A job built for a stack only considers models of that stack's vendor (CUDA: NVIDIA, ROCm: AMD,
CANN: Huawei) and, for an old CUDA build, architectures its toolkit can target; node versions
are the placer's to check (a region refusing spills over). A low-priority job fits now only
beyond the GPUs the region keeps free for forecast demand (`RegionView.headroom_gpus`,
`scorer.headroom`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scorer.catalog import Catalog, GpuModelSpec
from scorer.memory import memory_need_mib
from scorer.scores.porting import DEFAULT_PENALTIES, porting_penalty
from scorer.stacks import VENDOR_STACK, parse_stack
from scorer.throughput import ThroughputModel
from scorer.types import JobSpec, RegionView

__all__ = ["RegionOption", "rank_regions"]

RTT_HORIZON_MS = 200.0
AVAILABLE_NOW, AVAILABLE_LATER = 100.0, 30.0


@dataclass(frozen=True)
class RegionOption:
    """The best model a region offers the job, with its raw figures."""

    region: str
    model: str
    speed: float
    cost: float  # price per hour / speed
    carbon: float  # g/kWh x W / speed
    available: float
    headroom: float = 100.0  # free share of the model's GPUs in the region, 0..100
    porting: float = 100.0  # 100 - porting penalty (portable jobs), else 100

    @property
    def value(self) -> float:
        """Speed per dollar, discounted by the porting it asks."""
        return self.speed / self.cost * self.porting / 100 if self.cost > 0 else self.speed


def _usable(job: JobSpec, spec: GpuModelSpec, need_mib: int) -> bool:
    """Precision, memory (a share gets its part of the GPU) and stack family allow the model."""
    if not spec.supports(job.precision):
        return False
    if spec.memory_mib * job.gpu_milli // 1000 < need_mib:
        return False
    wanted = parse_stack(job.software_stack)
    if wanted is None:
        return True
    if wanted.max_sm and spec.compute_capability > wanted.max_sm:
        return False  # an old CUDA build cannot target this architecture
    return VENDOR_STACK.get(spec.vendor, spec.vendor) == wanted.family


def _option(
    job: JobSpec,
    view: RegionView,
    catalog: Catalog,
    throughput: ThroughputModel,
    penalties: Mapping[str, float],
    keep_free: int = 0,
    need: int | None = None,
) -> RegionOption | None:
    """The region's best model for the job; `need`: its per-GPU memory need when known
    (`memory_need_mib`, the same in every region)."""
    need, best = memory_need_mib(job) if need is None else need, None
    best_key = (0.0, 0.0)  # (available, value) of `best`
    beyond_headroom = sum(view.free_gpus.values()) - keep_free >= job.gpu_count
    allowed = {catalog.canonical(m) for m in job.allowed_gpu_models}
    portable = parse_stack(job.software_stack) is None
    for model, total in view.total_gpus.items():
        spec = catalog.get(model)
        if spec is None or (allowed and spec.name not in allowed) or total < job.gpu_count:
            continue
        if not _usable(job, spec, need):
            continue
        speed = throughput.relative_speed(job, spec.name)
        if speed <= 0:
            continue
        free, block = view.free_gpus.get(model, 0), view.largest_free_block.get(model, 0)
        # a gang that may spread needs one TP group per node; one that may not, all of it
        tp = max(1, job.tensor_parallel)
        chunk = job.gpu_count if job.gpu_count <= tp else tp
        fits_now = free >= job.gpu_count and block >= chunk and beyond_headroom
        price = view.price_per_gpu_hour.get(model, spec.price_per_gpu_hour)
        cost, available = price / speed, AVAILABLE_NOW if fits_now else AVAILABLE_LATER
        family = VENDOR_STACK.get(spec.vendor, spec.vendor)
        porting = 100.0 - porting_penalty(family, penalties) if portable else 100.0
        value = speed / cost * porting / 100 if cost > 0 else speed  # RegionOption.value
        if best is not None and (available, value) <= best_key:
            continue  # not better: no option built
        carbon = (view.carbon_g_per_kwh or 400.0) * spec.power_w
        best, best_key = (
            RegionOption(
                view.region,
                spec.name,
                speed,
                cost,
                carbon / speed,
                available,
                100.0 * free / total if total else 0.0,
                porting,
            ),
            (available, value),
        )
    return best


def _data_score(job: JobSpec, region: str, rtt_ms: Mapping[tuple[str, str], float] | None):
    if not job.data_region or job.data_region == region:
        return 100.0
    rtt = (rtt_ms or {}).get(
        (region, job.data_region), (rtt_ms or {}).get((job.data_region, region))
    )
    if rtt is None:
        return 50.0
    return max(0.0, 100.0 * (1.0 - rtt / RTT_HORIZON_MS))


def _weights(job: JobSpec) -> dict[str, float]:
    p = min(1.0, max(0.0, job.cost_speed_preference))
    return {
        "compute": 10 + 40 * p,
        "cost": 5 + 35 * (1 - p),
        "available": 40.0,
        "headroom": 15.0,
        "carbon": 5.0,
        "queue": 10.0,
        "data": 15.0 if job.data_region else 0.0,
        "porting": 10.0 if parse_stack(job.software_stack) is None else 0.0,
    }


def rank_regions(
    job: JobSpec,
    views: Mapping[str, RegionView],
    *,
    rtt_ms: Mapping[tuple[str, str], float] | None = None,
    throughput: ThroughputModel | None = None,
    porting_penalties: Mapping[str, float] = DEFAULT_PENALTIES,
    keep_headroom: bool = False,
) -> list[tuple[str, float]]:
    """Regions the job may use (allowed_regions), best first, with 0..100 scores.

    `porting_penalties` override the default penalty of the families they name. With
    `keep_headroom` (a low-priority job) a region's `headroom_gpus` do not count as free.
    """
    throughput = throughput or ThroughputModel()
    porting_penalties = {**DEFAULT_PENALTIES, **porting_penalties}
    allowed = [r for r in views if not job.allowed_regions or r in job.allowed_regions]
    if job.cpu_only:  # no GPU to value: the shortest queue, then data locality
        ranked = [
            (r, round((100 / (1 + views[r].queue_depth / 10) + _data_score(job, r, rtt_ms)) / 2, 3))
            for r in allowed
        ]
        return sorted(ranked, key=lambda rs: (-rs[1], rs[0]))
    keep = {r: views[r].headroom_gpus if keep_headroom else 0 for r in allowed}
    need = memory_need_mib(job)
    options = {
        r: _option(job, views[r], throughput.catalog, throughput, porting_penalties, keep[r], need)
        for r in allowed
    }
    live = [o for o in options.values() if o is not None]
    if not live:
        return [(r, 0.0) for r in sorted(allowed)]
    best_speed = max(o.speed for o in live)
    cheapest, cleanest = min(o.cost for o in live), min(o.carbon for o in live)
    w = _weights(job)
    ranked = []
    for region in allowed:
        o = options[region]
        if o is None:
            ranked.append((region, 0.0))
            continue
        parts = {
            "compute": 100 * o.speed / best_speed,
            "cost": 100 * cheapest / o.cost if o.cost > 0 else 100.0,
            "available": o.available,
            "headroom": o.headroom,
            "carbon": 100 * cleanest / o.carbon if o.carbon > 0 else 100.0,
            "queue": 100 / (1 + views[region].queue_depth / 10),
            "data": _data_score(job, region, rtt_ms),
            "porting": o.porting,
        }
        score = sum(w[k] * parts[k] for k in w) / sum(w.values())
        ranked.append((region, round(score, 3)))
    return sorted(ranked, key=lambda rs: (-rs[1], rs[0]))
