"""The worker's `/metrics` page: its Prometheus registry, its state gauges, and the history
child's metrics, in one scrape.

State gauges are read from the runtime at scrape time: free and total GPUs by region and model
(regions this worker owns), queue depth by region (and by the GPU model a queued job asks for),
consumer lag per assigned partition, readiness, liveness and ownership.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from faust.exceptions import ConsumerNotStarted
from prometheus_client.core import GaugeMetricFamily, Metric

from infra.topics import TOPICS
from streams.consumer_state import consumer_state
from streams.outbox import Outgoing
from streams.prometheus import CONTENT_TYPE_LATEST, METRICS, gauge, queue_depths, record_decision

if TYPE_CHECKING:
    from streams.runtime import Runtime

__all__ = ["METRICS_PATH", "note_sent", "register_metrics_page", "state_metrics"]

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
_DECISION_TOPICS = {t.name: t.name.rsplit(".", 1)[-1] for t in TOPICS if ".decisions." in t.name}


def note_sent(msg: Outgoing) -> None:
    """Count a message the worker sends if it is a decision (any decision topic)."""
    decision = _DECISION_TOPICS.get(msg.topic)
    if decision is None:
        return
    record = msg.record
    outcome = record.get("outcome") or record.get("reason") or "EMITTED"
    worker_us = record.get("worker_us")
    record_decision(decision, str(outcome), None if worker_us is None else worker_us / 1e6)


def state_metrics(rt: Runtime, app: Any) -> Iterable[Metric]:
    """Gauges describing the worker's state now."""
    state = rt.scheduler.state
    views = state.region_views()
    free = {(r, m): n for r, v in views.items() for m, n in v.free_gpus.items()}
    total = {(r, m): n for r, v in views.items() for m, n in v.total_gpus.items()}
    yield gauge("gpuflow_free_gpus", "Free healthy whole GPUs, by region and GPU model "
                "(regions this worker owns).", ["region", "gpu_model"], free)  # fmt: skip
    yield gauge("gpuflow_gpus", "GPUs on healthy nodes, by region and GPU model "
                "(regions this worker owns).", ["region", "gpu_model"], total)  # fmt: skip
    queued = list(rt.scheduler.queue.values())
    by_region: dict[tuple[str, ...], float] = {(r,): 0 for r in views}
    for routed in queued:
        by_region[(str(routed["region"]),)] = by_region.get((str(routed["region"]),), 0) + 1
    yield gauge("gpuflow_queue_depth", "Jobs waiting in a region's queue.", ["region"], by_region)
    yield gauge(
        "gpuflow_queue_depth_by_model",
        "Queued jobs by region and the GPU model they ask for (`any`: no preference; a job "
        "allowing several models counts under each).",
        ["region", "gpu_model"],
        {  # zeros for every model present (and `any`), so an empty queue is a 0, not a gap
            **{(r, m): 0 for r, v in views.items() for m in [*v.total_gpus, "any"]},
            **queue_depths(queued),
        },
    )
    yield GaugeMetricFamily("gpuflow_held_jobs", "Jobs holding GPUs.", value=len(state.jobs))
    yield GaugeMetricFamily("gpuflow_stale_nodes", "Nodes without a recent heartbeat.",
                            value=len(rt.fleet.stale))  # fmt: skip
    yield GaugeMetricFamily("gpuflow_ready", "1 once state is rebuilt after the last rebalance.",
                            value=float(rt._ready.is_set()))  # fmt: skip
    live = float(not rt.stalls.stalled)
    yield GaugeMetricFamily("gpuflow_live", "0 while a partition's records stop reaching its "
                            "stream (as /health/).", value=live)  # fmt: skip
    owned = rt.ownership.partitions() if rt.ownership is not None else frozenset()
    yield gauge("gpuflow_owned_partition", "1 for each region partition this worker owns.",
                ["partition"], {(str(p),): 1 for p in owned})  # fmt: skip
    yield _consumer_lag(app)


def _consumer_lag(app: Any) -> Metric:
    """Records on the broker past what this worker's streams have read, per partition.

    From the high watermark the consumer last saw (the embedded broker's undercounts by up
    to one batch, so lag there reads low by as much).
    """
    lag: dict[tuple[str, ...], float] = {}
    try:
        rows: Mapping[str, Mapping[str, Any]] = consumer_state(app)["partitions"]
    except (ConsumerNotStarted, AttributeError):
        rows = {}
    for name, row in rows.items():
        topic, partition = name.rsplit("/", 1)
        high = row.get("highwater")
        if high is None:
            continue
        read = row.get("read_offset")
        done = read + 1 if read is not None else (row.get("committed") or 0)
        lag[(topic, partition)] = max(0, int(high) - int(done))
    return gauge(
        "gpuflow_consumer_lag_messages",
        "Messages not yet read by this worker, per assigned partition.",
        ["topic", "partition"],
        lag,
    )


def register_metrics_page(app: Any, rt: Runtime, history_metrics_url: str | None) -> None:
    """GET /metrics: Prometheus text format (worker metrics + the history child's); GET
    /ready/: 200 once the worker has rebuilt its state (a readiness probe)."""
    import httpx

    METRICS.add_collector(lambda: state_metrics(rt, app))

    @app.page("/ready/", name="readiness")
    async def readiness(web: Any, request: Any) -> Any:
        """Readiness for a load balancer or Kubernetes: 503 until state is rebuilt."""
        ready = rt._ready.is_set()
        return web.json({"ready": ready}, status=200 if ready else 503)

    @app.page(METRICS_PATH, name="prometheus_metrics")
    async def prometheus_metrics(web: Any, request: Any) -> Any:
        body = METRICS.exposition()
        if history_metrics_url is not None:
            try:
                async with httpx.AsyncClient(timeout=2.0) as client:
                    answer = await client.get(history_metrics_url)
                if answer.status_code == 200:
                    body += answer.content
            except httpx.HTTPError as exc:  # the sink is restarting: say so, serve the rest
                log.info("history metrics not reachable: %s", exc)
                body += b"# HELP gpuflow_history_up 1 while the sink's loop runs.\n"
                body += b"# TYPE gpuflow_history_up gauge\ngpuflow_history_up 0.0\n"
        return web.bytes(body, headers={"Content-Type": CONTENT_TYPE_LATEST})
