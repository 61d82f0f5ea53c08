"""The Faust app: topics declared once, thin agents (decode -> scheduler -> emit), timers.

Run it with `python -m streams` (or `gpuflow up`, which starts it for you).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import faust
from faust.exceptions import ConsumerNotStarted

from infra.config import Config
from infra.errors import ConfigError
from infra.topics import (
    GRID_SIGNALS,
    JOBS_EVENTS,
    REPLAN_TICKS,
    JOBS_ROUTED,
    JOBS_SUBMITTED,
    NODE_INVENTORY,
    NODE_TELEMETRY,
    TOPICS,
)
from schemas import make_codec
from scorer import (
    PRESETS,
    Catalog,
    ClusterState,
    Placer,
    ThroughputModel,
    load_catalog,
    load_gavel_csv,
    make_placer,
    preset,
)
from scorer.errors import GpuflowError, UnknownPluginError
from streams.clock import EventClock, WallClock
from streams.consumer_state import consumer_state
from streams.history_process import HistoryProcess
from streams.regions import RemoteRegions
from streams.runtime import Runtime
from streams.scheduling import Scheduler
from streams.transport import GpuflowApp
from streams.web import register_sql_proxy

__all__ = ["create_app"]

log = logging.getLogger(__name__)


def _faust_app(config: Config) -> faust.App:
    kafka, worker = config.kafka, config.worker
    return GpuflowApp(
        worker.app_id,
        broker=[f"kafka://{s}" for s in kafka.bootstrap_servers.split(",")],
        broker_credentials=_credentials(kafka.client),
        # The embedded broker cannot do exactly-once (aiokafka InitProducerId fails there):
        # processing is at-least-once and every decision is idempotent.
        processing_guarantee="at_least_once",
        broker_session_timeout=kafka.session_timeout_s,
        broker_heartbeat_interval=max(1.0, kafka.session_timeout_s / 3),
        topic_partitions=kafka.partitions,
        topic_replication_factor=kafka.replication_factor,
        store="memory://",
        datadir=str(config.data_dir / "faust"),
        web_enabled=True,
        web_host=worker.web_host,
        web_port=worker.web_port,
        web_in_thread=False,
        producer_linger_ms=1,
        broker_commit_interval=1.0,
        stream_wait_empty=False,
        kafka=kafka,
    )


def _credentials(client: Any) -> Any:
    """SASL/SSL settings from the pass-through librdkafka keys, in Faust's terms."""
    protocol = str(client.get("security.protocol", "")).upper()
    if protocol.startswith("SASL"):
        return faust.SASLCredentials(
            username=client.get("sasl.username"),
            password=client.get("sasl.password"),
            mechanism=client.get("sasl.mechanism", "PLAIN"),
            ssl_context=_ssl(client) if protocol == "SASL_SSL" else None,
        )
    if protocol == "SSL":
        return faust.SSLCredentials(_ssl(client))
    return None


def _ssl(client: Any) -> Any:
    import ssl

    return ssl.create_default_context(cafile=client.get("ssl.ca.location"))


def create_app(config: Config) -> tuple[faust.App, Runtime]:
    """A configured worker app and the runtime its agents share."""
    app = _faust_app(config)
    raw = {
        "key_type": bytes,
        "value_type": bytes,
        "key_serializer": "raw",
        "value_serializer": "raw",
    }
    topics = {
        spec.name: app.topic(spec.name, partitions=config.kafka.partitions, **raw)  # type: ignore[arg-type]
        for spec in TOPICS
    }
    tables = {
        name: app.Table(f"{name}", default=None, partitions=config.kafka.partitions)
        for name in ("reservations", "queue", "nodes", "moves")
    }
    state = ClusterState(_catalog(config))
    traits = preset(config.worker.policy) if config.worker.policy in PRESETS else None
    scheduler = Scheduler(
        state,
        _placer(config, state),
        reservations=tables["reservations"],
        queue=tables["queue"],
        nodes=tables["nodes"],
        partitions=config.kafka.partitions,
        region_order=config.kafka.regions_pinned,
        view_ttl_s=config.worker.view_ttl_s,
        moves=tables["moves"],
        replan=config.replan if traits is not None and traits.replan else None,
        queue_order=traits.queue if traits is not None else "fifo",
        clock=EventClock() if config.worker.clock == "event" else WallClock(),
    )
    codec = make_codec(config.kafka.schema_registry_url or None)
    remote = RemoteRegions(config, codec)
    scheduler.remote_views = remote.views
    rt = Runtime(config, codec, scheduler)
    rt.topics = topics

    def mark_dirty(*_: Any, **__: Any) -> None:
        rt.dirty = True

    for table in tables.values():
        table.on_recover(_async(mark_dirty))
    _register_agents(app, rt, topics)
    _register_timers(app, rt)
    _register_pages(app, rt)
    _run_with_worker(app, remote.start, remote.stop)
    if config.store.enabled:  # the worker owns the ClickHouse store, through a child process
        history = HistoryProcess(config)
        _run_with_worker(app, history.start, history.stop)
        register_sql_proxy(app, history.url)
    return app, rt


def _async(fn: Any) -> Any:
    async def wrapper(*args: Any, **kwargs: Any) -> None:
        fn(*args, **kwargs)

    return wrapper


def _register_agents(app: faust.App, rt: Runtime, topics: dict[str, Any]) -> None:
    @app.agent(topics[JOBS_SUBMITTED], name="gpuflow.router")
    async def router(stream: Any) -> None:
        async for event in stream.events():
            started = time.perf_counter_ns()
            record = await rt.decode(event, "JobSubmitted", "router")
            if record is None:
                continue
            await rt.ensure_ready()
            await rt.send_all(rt.scheduler.route(record, started_ns=started))

    @app.agent(topics[JOBS_ROUTED], name="gpuflow.placer")
    async def placer(stream: Any) -> None:
        async for event in stream.events():
            started = time.perf_counter_ns()
            record = await rt.decode(event, "RoutedJob", "placer")
            if record is None:
                continue
            await rt.ensure_ready()
            await rt.send_all(rt.scheduler.place(record, started_ns=started))

    @app.agent(topics[JOBS_EVENTS], name="gpuflow.lifecycle")
    async def lifecycle(stream: Any) -> None:
        async for event in stream.events():
            record = await rt.decode(event, "JobEvent", "lifecycle")
            if record is None:
                continue
            await rt.ensure_ready()
            await rt.send_all(rt.scheduler.on_job_event(record))
            rt.job_events += 1

    @app.agent(topics[REPLAN_TICKS], name="gpuflow.replan")
    async def replan(stream: Any) -> None:
        async for event in stream.events():
            record = await rt.decode(event, "ReplanTick", "replan")
            if record is None:
                continue
            await rt.ensure_ready()
            await rt.send_all(rt.scheduler.on_tick(_ms(record["ts"]), [record["region"]]))
            rt.ticks += 1

    @app.agent(topics[NODE_INVENTORY], name="gpuflow.inventory")
    async def inventory(stream: Any) -> None:
        async for event in stream.events():
            record = await rt.decode(event, "NodeInventory", "inventory")
            if record is not None:
                await rt.ensure_ready(fleet=False)
                await rt.send_all(rt.fleet.on_inventory(record))
            rt.inventory_seen[event.message.partition] = event.message.offset

    @app.agent(topics[NODE_TELEMETRY], name="gpuflow.telemetry")
    async def telemetry(stream: Any) -> None:
        async for event in stream.events():
            record = await rt.decode(event, "NodeTelemetry", "telemetry")
            if record is not None:
                rt.metrics.telemetry(record["ts"])
                await rt.ensure_ready(fleet=False)
                await rt.send_all(rt.fleet.on_telemetry(record))

    @app.agent(topics[GRID_SIGNALS], name="gpuflow.grid")
    async def grid(stream: Any) -> None:
        async for event in stream.events():
            record = await rt.decode(event, "GridSignal", "grid")
            if record is not None:
                rt.fleet.on_grid(record)


def _placer(config: Config, state: ClusterState) -> Placer:
    """The configured placer preset over this worker's state."""
    try:
        return make_placer(
            config.worker.policy, state, throughput=_throughput(config, state.catalog)
        )
    except UnknownPluginError as exc:
        raise ConfigError(f"worker.policy: {exc}") from exc


def _catalog(config: Config) -> Catalog | None:
    """The built-in catalogue, or it with a catalogue file's models added or overridden."""
    if not config.worker.catalog_file:
        return None
    try:
        return load_catalog(config.worker.catalog_file)
    except GpuflowError as exc:
        raise ConfigError(f"worker.catalog_file: {exc}") from exc


def _throughput(config: Config, catalog: Catalog | None = None) -> ThroughputModel | None:
    """Measured speeds when configured; the scorer falls back to its roofline estimate."""
    path = config.worker.throughput_csv
    if not path:
        return None
    try:
        return load_gavel_csv(path, catalog)
    except (OSError, GpuflowError) as exc:
        raise ConfigError(f"worker.throughput_csv: {exc}") from exc


def _run_with_worker(app: faust.App, start: Any, stop: Any) -> None:
    """Start and stop a blocking helper with the worker (as a mode Service)."""
    from mode import Service

    class Helper(Service):
        async def on_start(self) -> None:
            start()

        async def on_stop(self) -> None:
            await asyncio.get_running_loop().run_in_executor(None, stop)

    app.service(Helper)


def _register_pages(app: faust.App, rt: Runtime) -> None:
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
                "held_jobs": len(rt.scheduler.state.jobs) - len(rt.scheduler.moves_in_flight()),
                "queued_jobs": len(rt.scheduler.queue),
                "moves_in_flight": len(rt.scheduler.moves_in_flight()),
                "sent": dict(rt.sent),
                "job_events": rt.job_events,
                "ticks": rt.ticks,
                "clock_ms": rt.scheduler.clock.now(),
                "final_decisions": len(rt.scheduler.final),
                "stale_nodes": sorted(rt.fleet.stale),
            }
        )

    @app.page("/consumer/")
    async def consumer(web: Any, request: Any) -> Any:
        """Per assigned partition: Faust's and aiokafka's view of where the consumer is."""
        return web.json(consumer_state(app))

    @app.page("/health/")
    async def health(web: Any, request: Any) -> Any:
        """Liveness: 503 while a partition's fetched records stop reaching its stream."""
        stalled = rt.stalls.stalled
        body = {"live": not stalled, "ready": rt._ready.is_set(), "stalled": stalled}
        return web.json(body, status=503 if stalled else 200)

    @app.page("/metrics/")
    async def metrics(web: Any, request: Any) -> Any:
        """Events processed per stream and recent telemetry lag."""
        return web.json(rt.metrics.snapshot())


def _register_timers(app: faust.App, rt: Runtime) -> None:
    @app.timer(rt.config.worker.summary_interval_s)
    async def watch_partitions() -> None:
        with contextlib.suppress(ConsumerNotStarted):  # before the first assignment
            rt.stalls.observe(consumer_state(app)["partitions"])

    @app.timer(rt.config.worker.replan_interval_s)
    async def replan_timer() -> None:
        """The timer runs as a tick per region this worker holds, through the region's
        partition, so its table writes land where the region's events do."""
        if rt._ready.is_set() and rt.config.worker.clock == "wall":
            await rt.send_all(rt.scheduler.ticks(int(time.time() * 1000)))

    @app.timer(rt.config.worker.summary_interval_s)
    async def summarise() -> None:
        if rt._ready.is_set():
            await rt.send_all(rt.fleet.mark_stale())
            await rt.send_all(rt.fleet.summaries())


def _ms(value: Any) -> int:
    """Avro timestamp-millis may arrive decoded as a datetime."""
    return int(value.timestamp() * 1000) if hasattr(value, "timestamp") else int(value)
