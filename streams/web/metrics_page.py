"""The worker's `/metrics` page: its Prometheus registry, its state gauges, and the history
child's metrics, in one scrape.

State gauges are read from the runtime at scrape time: free and total GPUs by region and model
(regions this worker owns), queue depth by region (and by the GPU model a queued job asks for),
consumer lag per assigned partition, readiness, liveness and ownership.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from faust.exceptions import ConsumerNotStarted
from prometheus_client.core import GaugeMetricFamily, Metric

from infra.topics import NODE_TELEMETRY
from streams.base.prometheus import (
    CONTENT_TYPE_LATEST,
    METRICS,
    gauge,
    queue_depths,
)
from streams.runtime.consumer_state import consumer_state

if TYPE_CHECKING:
    from streams.runtime.runtime import Runtime

__all__ = ["METRICS_PATH", "ChildPage", "register_metrics_page", "state_metrics"]

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"


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
    live = float(not rt.stalled())
    yield GaugeMetricFamily("gpuflow_live", "0 while a partition's records stop reaching its "
                            "stream (as /health/).", value=live)  # fmt: skip
    owned = rt.ownership.partitions() if rt.ownership is not None else frozenset()
    yield gauge("gpuflow_owned_partition", "1 for each region partition this worker owns.",
                ["partition"], {(str(p),): 1 for p in owned})  # fmt: skip
    yield _consumer_lag(app, rt)


def _consumer_lag(app: Any, rt: Runtime) -> Metric:
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
    if rt.telemetry_reader is not None:  # the telemetry lane reads beside Faust's consumer
        for number, behind in rt.telemetry_reader.lag().items():
            lag[(NODE_TELEMETRY, str(number))] = float(behind)
    return gauge(
        "gpuflow_consumer_lag_messages",
        "Messages not yet read by this worker, per assigned partition.",
        ["topic", "partition"],
        lag,
    )


def register_metrics_page(app: Any, rt: Runtime, history_metrics_url: str | None) -> None:
    """GET /metrics: Prometheus text format (worker metrics + the history child's); GET
    /ready/: 200 once the worker has rebuilt its state (a readiness probe)."""
    METRICS.add_collector(lambda: state_metrics(rt, app))

    @app.page("/ready/", name="readiness")
    async def readiness(web: Any, request: Any) -> Any:
        """Readiness for a load balancer or Kubernetes: 503 until state is rebuilt."""
        ready = rt._ready.is_set()
        return web.json({"ready": ready}, status=200 if ready else 503)

    child = None if history_metrics_url is None else ChildPage(history_metrics_url)

    @app.page(METRICS_PATH, name="prometheus_metrics")
    async def prometheus_metrics(web: Any, request: Any) -> Any:
        body = METRICS.exposition()
        if child is not None:
            body += await child.read()
        return web.bytes(body, headers={"Content-Type": CONTENT_TYPE_LATEST})


_HISTORY_DOWN = (
    b"# HELP gpuflow_history_up 1 while the sink's loop runs.\n"
    b"# TYPE gpuflow_history_up gauge\ngpuflow_history_up 0.0\n"
)


class ChildPage:
    """The history child's metrics page, re-served by the worker.

    The child runs at a lower CPU priority (`store.nice`), so on a full machine it can be slow
    to answer. A page that does not come within `timeout_s` is replaced by the last one that
    did, if it is younger than `stale_s`: its counters are still true, only late, and series
    that vanish for one scrape read as resets. A child that refuses the connection (restarting)
    or has not answered for `stale_s` is reported down (`gpuflow_history_up 0`).
    `gpuflow_history_page_age_seconds` says how old the re-served page is.
    """

    def __init__(self, url: str, timeout_s: float = 2.0, stale_s: float = 60.0) -> None:
        self.url, self.timeout_s, self.stale_s = url, timeout_s, stale_s
        self._last: tuple[float, bytes] | None = None

    async def read(self) -> bytes:
        import httpx

        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                answer = await client.get(self.url)
            answer.raise_for_status()
        except httpx.TimeoutException as exc:
            log.info("history metrics late (%s): serving the last page", exc.__class__.__name__)
        except httpx.HTTPError as exc:  # refused or an error page: the sink is restarting
            log.info("history metrics not reachable: %s", exc)
            self._last = None
        else:
            self._last = (time.monotonic(), answer.content)
        if self._last is None:
            return _HISTORY_DOWN
        age = time.monotonic() - self._last[0]
        if age > self.stale_s:
            return _HISTORY_DOWN
        return self._last[1] + (
            b"# HELP gpuflow_history_page_age_seconds Age of the history child's metrics "
            b"re-served here (> 0 when its last answer was late).\n"
            b"# TYPE gpuflow_history_page_age_seconds gauge\n"
            b"gpuflow_history_page_age_seconds %.3f\n" % age
        )
