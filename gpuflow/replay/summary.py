"""The replay's figures: JCT, waiting, allocation, GPU-hours, cost, carbon (summary.json)."""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.replay.twin import Twin
from gpuflow.replay.engine import ReplayResult

__all__ = [
    "CARBON_G_PER_KWH",
    "allocation_series",
    "packing_figures",
    "refusal_figures",
    "summarize",
]

CARBON_G_PER_KWH = 400.0  # world-average grid intensity; traces carry no grid signal


def _pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def allocation_series(twin: Twin, until: float) -> tuple[np.ndarray, np.ndarray]:
    """Step function of the allocated GPU share: (times, share from that time on)."""
    t = np.array([p[0] for p in twin.timeline] + [until], float)
    a = np.array([p[1] for p in twin.timeline] + [twin.alloc_rate], float)
    return t, a


def time_weighted_alloc(twin: Twin, start: float, end: float) -> float:
    if end <= start:
        return twin.alloc_rate
    t, a = allocation_series(twin, end)
    t = np.clip(t, start, end)
    return float(np.sum(np.diff(t) * a[:-1]) / (end - start))


def summarize(result: ReplayResult, *, policy: str, engine: str) -> dict[str, Any]:
    twin = result.twin
    twin.settle(twin.now)  # jobs still running count their GPU time so far
    runs = list(twin.runs.values())
    completed = [r for r in runs if r.end_s is not None]
    started = [r for r in runs if r.first_start_s is not None]
    jct = [r.end_s - r.submit_s for r in completed if r.end_s is not None]
    wait = [r.first_start_s - r.submit_s for r in started if r.first_start_s is not None]
    first = min((r.submit_s for r in runs), default=0.0)
    end = max([twin.now, *(r.end_s or 0.0 for r in runs)])
    gpu_s = sum(r.gpu_seconds for r in runs)
    by_model: dict[str, float] = {}
    for r in runs:
        for model, seconds in r.model_seconds.items():
            by_model[model] = by_model.get(model, 0.0) + seconds / 3600
    out: dict[str, Any] = {
        "policy": policy,
        "engine": engine,
        "arrivals_only": result.arrivals_only,
        "jobs": len(runs),
        "completed": len(completed),
        "rejected": sum(r.rejected for r in runs),
        "running": sum(r.running for r in runs),
        "waiting": sum(1 for r in runs if not r.running and not r.rejected and r.end_s is None),
        "placed": len(started),
        "avg_jct_s": _mean(jct),
        "p50_jct_s": _pct(jct, 50),
        "p99_jct_s": _pct(jct, 99),
        "avg_wait_s": _mean(wait),
        "p99_wait_s": _pct(wait, 99),
        "makespan_s": end - first,
        "gpu_alloc_rate": time_weighted_alloc(twin, first, end),
        "gpu_hours": gpu_s / 3600,
        "gpu_hours_by_model": {k: round(v, 3) for k, v in sorted(by_model.items())},
        "preemptions": sum(r.preemptions for r in runs),
        "host_waits": sum(r.host_waits for r in runs),
        "migrations": sum(r.migrations for r in runs),
        "cost": sum(r.cost for r in runs),
        "carbon_kg": sum(r.energy_kwh for r in runs) * CARBON_G_PER_KWH / 1000,
        "total_gpus": twin.total_milli // 1000,
    }
    if result.arrivals_only:
        out.update(packing_figures(result))
    return out


def packing_figures(result: ReplayResult) -> dict[str, Any]:
    """The FGD paper's packing figures of an arrivals-only replay.

    `alloc_at_100_pct` / `alloc_at_130_pct`: allocated share of GPU capacity (in %) when the GPU
    demand that has arrived first reaches 100 % / 130 % of capacity (None if it never does);
    `first_whole_node_refusal_alloc_rate`: allocated share when a job asking for a whole node
    (as many GPUs as the largest node) was first refused for want of room (a job that could
    never fit is not a packing failure).
    """
    twin = result.twin
    capacity = twin.total_milli / 1000
    out: dict[str, Any] = {
        "first_refusal_alloc_rate": (
            result.first_refusal_alloc_rate
            if result.first_refusal_alloc_rate is not None
            else twin.alloc_rate
        ),
        "first_refusal_s": result.first_refusal_s,
        "final_alloc_rate": twin.alloc_rate,
        "arrived_demand_pct": 100 * result.arrivals[-1][0] / capacity if result.arrivals else 0.0,
    }
    for pct in (100, 130):
        out[f"alloc_at_{pct}_pct"] = next(
            (100 * alloc for arrived, alloc in result.arrivals if arrived >= pct / 100 * capacity),
            None,
        )
    whole = max((n.gpu_count for n in twin.nodes.values()), default=0)
    first = next(
        (r for r in result.refusals if whole > 1 and r["gpus"] >= whole and r["no_room"]),
        None,
    )
    out["whole_node_gpus"] = whole
    out.update(refusal_figures(result))
    out["first_whole_node_refusal_alloc_rate"] = first["alloc_rate"] if first else None
    return out


def refusal_figures(result: ReplayResult) -> dict[str, Any]:
    """How many arrivals were refused and why: `refused` (jobs), of them `refused_no_room`
    (would fit an emptier cluster) and `refused_never_fits`; `refused_by_filter`: refused jobs
    by their decisive filter (the first of the placer's reasons: `capacity`, `gang`,
    `host_resources`, `gpu_model`, ...)."""
    by_filter: dict[str, int] = {}
    for r in result.refusals:
        by_filter[r["why"]] = by_filter.get(r["why"], 0) + 1
    no_room = sum(1 for r in result.refusals if r["no_room"])
    return {
        "refused": len(result.refusals),
        "refused_no_room": no_room,
        "refused_never_fits": len(result.refusals) - no_room,
        "refused_by_filter": dict(sorted(by_filter.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
