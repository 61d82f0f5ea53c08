"""The worker's web view at `/ui/`: regions x GPU models, queues, latest decisions, history.

Static HTML/JS/CSS shipped as package data (`streams/web/static/ui/`), no build step; the page
polls two JSON endpoints (a third for the job a user clicks) and keeps polling through a
worker restart:

  GET /ui/api/live     regions x models (free, used, total, allocation), queues, the latest
                       decisions this worker made with their reasons; regions other workers
                       own come from their RegionSummary events; the jobs (`gpuflow jobs`);
                       the services (`gpuflow services`)
  GET /ui/api/job?job=ID  one job: its row (`streams.web.job_views`) and its epochs (ClickHouse)
  GET /ui/api/history  10-second series over the last 15 minutes from ClickHouse (decisions by
                       outcome, GPU utilisation by region, queue wait p99), when this worker
                       runs the history sink
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

from infra.store.queries import JOB_EPOCHS
from streams.web.job_views import job_view, jobs_view

if TYPE_CHECKING:
    from streams.runtime.runtime import Runtime

__all__ = ["HISTORY_QUERIES", "live_view", "register_ui", "services_view"]

log = logging.getLogger(__name__)

_STATIC = {  # file -> content type
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}

# Each returns (t, series, value) rows; t is a 10 s bucket in epoch seconds.
HISTORY_QUERIES: dict[str, str] = {
    "decisions": """
        SELECT toUnixTimestamp(toStartOfInterval(ts, INTERVAL 10 SECOND)) AS t,
               toString(outcome) AS series, toFloat64(count()) AS value
        FROM placement_decisions
        WHERE ts >= now64(3) - INTERVAL 15 MINUTE
        GROUP BY t, series ORDER BY t, series""",
    "utilisation": """
        SELECT toUnixTimestamp(toStartOfInterval(ts, INTERVAL 10 SECOND)) AS t,
               toString(region) AS series, toFloat64(avg(util_pct)) AS value
        FROM node_telemetry
        WHERE ts >= now64(3) - INTERVAL 15 MINUTE
        GROUP BY t, series ORDER BY t, series""",
    "queue_wait": """
        SELECT toUnixTimestamp(toStartOfInterval(ts, INTERVAL 10 SECOND)) AS t,
               'p99 queue wait (s)' AS series,
               toFloat64(quantile(0.99)(queue_wait_ms)) / 1000 AS value
        FROM placement_decisions
        WHERE ts >= now64(3) - INTERVAL 15 MINUTE AND outcome = 'PLACED'
        GROUP BY t ORDER BY t""",
}


def _models(free: Mapping[str, int], total: Mapping[str, int]) -> list[dict[str, Any]]:
    out = []
    for model in sorted(total):
        t, f = int(total[model]), int(free.get(model, 0))
        used = t - f
        out.append({"gpu_model": model, "free": f, "used": used, "total": t,
                    "allocated": round(used / t, 3) if t else 0.0})  # fmt: skip
    return out


def live_view(rt: Runtime) -> dict[str, Any]:
    """What the page shows now: every region (ours exact, others' from their summaries)."""
    local = rt.scheduler.state.region_views()
    remote = rt.remote.views() if rt.remote is not None else {}
    regions = []
    for name in sorted(set(local) | set(remote)):
        view, owner = (local[name], "this worker") if name in local else (remote[name], "other")
        queued = rt.scheduler.queued_in(name) if name in local else view.queue_depth
        regions.append({"region": name, "owner": owner, "queue_depth": int(queued or 0),
                        "models": _models(view.free_gpus, view.total_gpus)})  # fmt: skip
    now_ms = time.time() * 1000
    queues = sorted(
        (
            {
                "region": r["region"],
                "job_id": r["job"]["job_id"],
                "gpus": r["job"].get("gpu_count", 1),
                "models": list(r["job"].get("allowed_gpu_models") or []),
                "priority": r["job"].get("priority", 0),
                "waiting_s": round((now_ms - int(r.get("queued_ts") or now_ms)) / 1000, 1),
            }
            for r in rt.scheduler.queue.values()
        ),
        key=lambda q: (-q["priority"], -q["waiting_s"]),
    )
    owned = sorted(rt.ownership.partitions()) if rt.ownership is not None else []
    return {
        "worker": {
            "app_id": rt.config.worker.app_id,
            "ready": rt._ready.is_set(),
            "partitions": owned,
            "history": rt.config.store.enabled,
        },
        "regions": regions,
        "queues": queues[:200],
        "queued_total": len(queues),
        "decisions": rt.recent.latest(),
        "jobs": jobs_view(rt.scheduler, limit=100)["jobs"],  # as `gpuflow jobs` shows them
        "services": services_view(rt),
    }


def services_view(rt: Runtime) -> list[dict[str, Any]]:
    """Each service the autoscaler scales, as `gpuflow services` shows it: serving target,
    replicas by zone and role, load now and forecast, SLO attainment, the last decision."""
    if rt.autoscaler is None:
        return []
    out = []
    for name, svc in rt.autoscaler.view()["services"].items():
        last = svc.get("last") or {}
        zones: dict[str, dict[str, int]] = {}
        for r in last.get("replicas", ()):
            if r.get("status") == "ENDED":
                continue
            by_role = zones.setdefault(str(r.get("zone") or "-"), {})
            key = str(r.get("role") or "") if r.get("status") == "RUNNING" else str(r["status"])
            by_role[key.lower()] = by_role.get(key.lower(), 0) + 1
        out.append({"service": name, "serving_target": svc["serving_target"],
                    "min_replicas": svc["min_replicas"], "max_replicas": svc["max_replicas"],
                    "zones": zones, "observed_rps": last.get("observed_rps"),
                    "forecast_rps": last.get("forecast_rps"), "slo_p99_ms": svc["slo_p99_ms"],
                    "slo_attainment": svc["slo_attainment"], "action": last.get("action", ""),
                    "reason": last.get("reason", "")})  # fmt: skip
    return out


def _series(answer: Mapping[str, Any]) -> dict[str, list[list[float]]]:
    out: dict[str, list[list[float]]] = {}
    for t, series, value in answer.get("rows", []):
        out.setdefault(str(series), []).append([float(t), float(value)])
    return out


def register_ui(app: Any, rt: Runtime, sql_url: str | None) -> None:
    """Serve the page, its assets and its two JSON endpoints on the worker's web port."""
    import httpx

    files = resources.files("streams.web") / "static" / "ui"

    @app.page("/ui/", name="ui_index")
    async def ui_index(web: Any, request: Any) -> Any:
        return _asset(web, files, "index.html")

    @app.page("/ui/{name}", name="ui_asset")
    async def ui_asset(web: Any, request: Any, name: str) -> Any:
        if name not in _STATIC:
            return web.json({"error": f"no such file: {name}"}, status=404)
        return _asset(web, files, name)

    @app.page("/ui/api/live", name="ui_live")
    async def ui_live(web: Any, request: Any) -> Any:
        return web.json(live_view(rt))

    @app.page("/ui/api/history", name="ui_history")
    async def ui_history(web: Any, request: Any) -> Any:
        if sql_url is None:
            return web.json({"available": False, "why": "this worker runs no history sink"})
        charts: dict[str, Any] = {}
        async with httpx.AsyncClient(timeout=10) as client:
            for name, query in HISTORY_QUERIES.items():
                try:
                    answer = await client.post(sql_url, json={"query": query})
                    charts[name] = _series(answer.json()) if answer.status_code == 200 else {}
                except (httpx.HTTPError, ValueError) as exc:
                    log.info("ui history query %s failed: %s", name, exc)
                    return web.json({"available": False, "why": f"history store: {exc}"})
        return web.json({"available": True, "charts": charts})

    @app.page("/ui/api/job", name="ui_job")
    async def ui_job(web: Any, request: Any) -> Any:
        """One job as `gpuflow status` shows it: its row here and its epochs in ClickHouse."""
        job_id = str(request.query.get("job", ""))
        body: dict[str, Any] = {"job": job_view(rt.scheduler, job_id), "epochs": [],
                                "why": ""}  # fmt: skip
        if sql_url is None:
            body["why"] = "this worker runs no history sink"
            return web.json(body)
        query = {"query": JOB_EPOCHS, "params": {"job": job_id}}
        try:
            async with httpx.AsyncClient(timeout=10) as client:
                answer = (await client.post(sql_url, json=query)).json()
        except (httpx.HTTPError, ValueError) as exc:
            body["why"] = f"history store: {exc}"
            return web.json(body)
        cols = answer.get("columns") or []
        body["epochs"] = [dict(zip(cols, row, strict=True)) for row in answer.get("rows", [])]
        body["why"] = str(answer.get("error") or "")
        return web.json(body)


def _asset(web: Any, files: Any, name: str) -> Any:
    body = (files / name).read_bytes()
    return web.bytes(body, headers={"Content-Type": _STATIC[name], "Cache-Control": "no-cache"})
