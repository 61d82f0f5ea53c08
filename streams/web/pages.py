"""The worker's JSON pages: `/state/`, `/queue/`, `/jobs/`, `/consumer/`, `/health/`,
`/metrics/`, `/activity/` (what `streams.runtime.activity` keeps), and the plan page
(`streams.plan`).
Prometheus' `/metrics` and `/ready/` are in `streams.web.metrics_page`; `/ui/` in
`streams.web.ui`; `/sql/` in `streams.history.sql`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import faust

from scorer.holds import HOLD_PREFIX as HOLD
from streams.runtime.consumer_state import consumer_state
from streams.runtime.runtime import Runtime
from streams.scheduler.plan import register_plan_page
from streams.web.job_views import job_view, jobs_view
from streams.web.queue_view import queue_snapshot

__all__ = ["ACTIVITY_PATH", "register_pages"]

ACTIVITY_PATH = "/activity/"


def register_pages(app: faust.App, rt: Runtime) -> None:
    register_plan_page(app, rt.scheduler)  # POST /plan/: gpuflow submit --dry-run
    register_activity_page(app, rt)  # GET /activity/: gpuflow top

    @app.page("/state/")
    async def state(web: Any, request: Any) -> Any:
        """What this worker holds: free and total GPUs by region, held and queued jobs."""
        views = rt.scheduler.state.region_views()
        return web.json(
            {
                "ready": rt._ready.is_set(),
                "regions": {
                    r: {"free_gpus": dict(v.free_gpus), "total_gpus": dict(v.total_gpus)}
                    for r, v in views.items()
                },
                "held_jobs": sum(1 for j in rt.scheduler.state.jobs if not j.startswith(HOLD))
                - len(rt.scheduler.moves_in_flight()),
                "queued_jobs": len(rt.scheduler.queue),
                "moves_in_flight": len(rt.scheduler.moves_in_flight()),
                "sent": dict(rt.sent),
                "job_events": rt.job_events,
                "ticks": rt.ticks,
                "handled": dict(rt.handled),
                "clock_ms": rt.scheduler.clock.now(),
                "final_decisions": len(rt.scheduler.final),
                "stale_nodes": sorted(rt.fleet.stale),
            }
        )

    @app.page("/queue/")
    async def queue(web: Any, request: Any) -> Any:
        """Waiting jobs per region and tenant with the reason each waits; quota usage."""
        view = queue_snapshot(rt.scheduler)
        view["policy_file"] = str(rt.policy.path or "")
        view["policy_error"] = rt.policy.error
        return web.json(view)

    @app.page("/jobs/")
    async def jobs(web: Any, request: Any) -> Any:
        """Jobs held here (`gpuflow jobs`, `streams.web.job_views`): `?tenant=&state=`, or one
        job with `?job=ID` (404 when this worker holds nothing of it)."""
        query = request.query
        if query.get("job"):
            row = job_view(rt.scheduler, str(query["job"]))
            return web.json({"job": row}, status=200 if row is not None else 404)
        view = jobs_view(
            rt.scheduler, tenant=str(query.get("tenant", "")), state=str(query.get("state", ""))
        )
        return web.json(view)

    @app.page("/consumer/")
    async def consumer(web: Any, request: Any) -> Any:
        """Per assigned partition: Faust's and aiokafka's view of where the consumer is; the
        telemetry lane's own positions beside them."""
        body = consumer_state(app)
        if rt.telemetry_reader is not None:
            body["telemetry_lane"] = rt.telemetry_reader.positions()
        return web.json(body)

    @app.page("/health/")
    async def health(web: Any, request: Any) -> Any:
        """Liveness: 503 while a partition's fetched records stop reaching its stream.

        `dependencies` (the history store, the broker) and `degraded` say what around the
        worker is failing; that never makes the worker itself not live.
        """
        stalled = rt.stalled()
        body = {"live": not stalled, "ready": rt._ready.is_set(), "stalled": stalled}
        body.update(rt.dependency_report())
        return web.json(body, status=503 if stalled else 200)

    @app.page("/metrics/")
    async def metrics(web: Any, request: Any) -> Any:
        """Events processed per stream and recent telemetry lag."""
        return web.json({**rt.metrics.snapshot(), **rt.dependency_report()})


def register_activity_page(app: faust.App, rt: Runtime) -> None:
    @app.page(ACTIVITY_PATH)
    async def activity_page(web: Any, request: Any) -> Any:
        """Utilisation by region and model, queues, decision rates, last decisions."""
        queued = Counter(r["region"] for r in rt.scheduler.queue.values())
        return web.json(rt.activity.snapshot(rt.scheduler.state, queued))
