"""`gpuflow services` from the worker's `/services/` page: replicas by zone and role, the load
now and forecast, SLO attainment and the last decision (docs/services.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
from rich.table import Table

__all__ = ["fetch_services", "render_services"]


def fetch_services(base: str) -> dict[str, Any] | None:
    """The worker's view, None when no worker answers there."""
    try:
        resp = httpx.get(f"{base.rstrip('/')}/services/", timeout=10)
        if resp.status_code != 200:
            return None
        view = resp.json()
    except (httpx.HTTPError, ValueError):
        return None
    return view if isinstance(view, dict) and "services" in view else None


def _zones(replicas: list[Mapping[str, Any]]) -> str:
    counts: dict[tuple[str, str], int] = {}
    for r in replicas:
        if r.get("status") in ("RUNNING", "WAITING", "PENDING"):
            where = str(r.get("zone") or r.get("region") or "?")
            if r.get("status") != "RUNNING":
                where += " (starting)"
            key = (where, str(r.get("role") or ""))
            counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{z}: {n} {role}" for (z, role), n in sorted(counts.items())) or "-"


def _source(last: Mapping[str, Any]) -> str:
    """Where the forecast came from, short: the processor's model, or the in-worker one."""
    source = str(last.get("forecast_source") or "")
    return source.replace("forecast processor, model ", "processor ") or "?"


def render_services(view: Mapping[str, Any]) -> Table:
    table = Table(
        "service", "serving", "replicas by zone", "load rps", "forecast rps", "SLO met",
        "last decision", title=f"services (autoscaler every {view.get('autoscale_s', '?')} s)",
    )  # fmt: skip
    for name, s in sorted(view["services"].items()):
        last = s.get("last") or {}
        met = s.get("slo_attainment")
        grants = ", ".join(f"{g['replicas']} {g['tier']}" for g in last.get("grants") or ())
        table.add_row(
            name,
            f"{s['serving_target']} ({s['min_replicas']}..{s['max_replicas']})",
            _zones(list(last.get("replicas") or ())),
            f"{last['observed_rps']:.1f}" if last else "-",
            f"{last['forecast_rps']:.1f} ({_source(last)})" if last else "-",
            f"{100 * met:.1f} % of {s['looks']} looks" if met is not None else "-",
            f"{last['action']}{' (' + grants + ')' if grants else ''}: {last['reason']}"
            if last
            else "-",
        )
    return table
