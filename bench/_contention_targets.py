"""The issue's targets for `bench/contention.py`, judged from its runs' figures (a helper
module, not a bench of its own)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["targets"]


def targets(runs: dict[str, Any], suffix: str = "") -> dict[str, Any]:
    """The issue's targets against the measured figures (met or not, with the figure); {}
    when a partial run (`--only`) lacks a run they compare."""
    needed = ("all" + suffix, "no-preemption" + suffix, "no-quotas")
    if any(name not in runs for name in needed):
        return {}
    allp, nop = runs["all" + suffix], runs["no-preemption" + suffix]
    p99_all, p99_nop = allp["high_priority_wait_s"]["p99"], nop["high_priority_wait_s"]["p99"]
    ratio = p99_nop / p99_all if p99_all > 0 else math.inf
    shares = {t: s["ratio"] for t, s in allp["tenant_shares"].items()}
    alloc = allp["gpu_allocation_arrival_window"]
    alloc_nq = runs["no-quotas"]["gpu_allocation_arrival_window"]
    lost = allp["lost_fraction"]
    within = all(r is not None and abs(r - 1) <= 0.10 for r in shares.values())
    return {
        "p99_high_priority_wait_no_preemption_over_all": _target(
            round(ratio, 2), ">= 5", ratio >= 5
        ),
        "tenant_gpu_hours_over_drf_share": _target(shares, "each 0.90..1.10", within),
        "allocation_all_and_no_quotas": _target(
            [alloc, alloc_nq], "all >= no-quotas", alloc >= alloc_nq
        ),
        "lost_gpu_hours_fraction": _target(lost, "< 0.03", lost < 0.03),
        **_preemption_alone(runs),
    }


def _preemption_alone(runs: dict[str, Any]) -> dict[str, Any]:
    """The same wait ratio without quotas (`none` over `no-quotas`): what preemption alone does
    for high priority. With quotas, a tenant's jobs that may not borrow wait on its own quota
    whatever preemption does, so both ratios are reported."""
    if "none" not in runs:
        return {}
    p99_nq = runs["no-quotas"]["high_priority_wait_s"]["p99"]
    p99_none = runs["none"]["high_priority_wait_s"]["p99"]
    ratio = p99_none / p99_nq if p99_nq > 0 else math.inf
    lost = runs["no-quotas"]["lost_fraction"]
    return {
        "p99_high_priority_wait_none_over_no_quotas": _target(round(ratio, 2), ">= 5", ratio >= 5),
        "lost_gpu_hours_fraction_no_quotas": _target(lost, "< 0.03", lost < 0.03),
    }


def _target(measured: Any, target: str, met: bool) -> dict[str, Any]:
    return {"measured": measured, "target": target, "met": bool(met)}
