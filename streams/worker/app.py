"""The Faust app: topics declared once, thin agents (decode -> scheduler -> emit); its timers
are in `streams.worker.timers`, its pages in `streams.web.pages` and `streams.web.metrics_page`.

Run it with `python -m streams` (or `gpuflow up`, which starts it for you).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import faust

from gpuflow_errors import GpuflowError
from infra.config import Config
from infra.errors import ConfigError
from infra.kafka import ssl_context
from infra.network import allocation_policy, hysteresis, network_view
from infra.policy import PolicyFile
from infra.topics import (
    GRID_SIGNALS,
    JOBS_EVENTS,
    JOBS_ROUTED,
    JOBS_SUBMITTED,
    NODE_INVENTORY,
    REPLAN_TICKS,
    TOPICS,
)
from schemas import make_codec, timestamp_ms
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
from scorer.errors import UnknownPluginError
from scorer.network import NetworkView
from streams.bandwidth.processor import BandwidthProcessor
from streams.base.clock import EventClock, WallClock
from streams.history.process import HistoryProcess
from streams.history.sql import register_sql_proxy
from streams.runtime.ownership import Ownership, region_table
from streams.runtime.runtime import Runtime
from streams.scheduler.cancel_agent import register_cancel
from streams.scheduler.core import Scheduler
from streams.scheduler.deferral import ForecastBook, ForecastUse
from streams.scheduler.regions import RemoteRegions
from streams.web.metrics_page import register_metrics_page
from streams.web.pages import register_pages
from streams.web.ui import register_ui
from streams.worker.bandwidth_agents import register_bandwidth
from streams.worker.batching import batches
from streams.worker.guarded import guarded
from streams.worker.service_agents import register_services
from streams.worker.telemetry_agent import register_telemetry
from streams.worker.timers import register_timers, watch_broker, watch_history
from streams.worker.transport import GpuflowApp

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


_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # what aiokafka speaks here


def _credentials(client: Any) -> Any:
    """SASL/SSL settings from the pass-through librdkafka keys (`[kafka.client]`), in Faust's
    terms, so the worker's aiokafka clients and every librdkafka client share one set of keys."""
    protocol = str(client.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ConfigError(f"kafka.client security.protocol: unknown {protocol!r}")
    if protocol.startswith("SASL"):
        mechanism = str(client.get("sasl.mechanism", "PLAIN")).upper()
        if mechanism not in _SASL_MECHANISMS:
            raise ConfigError(
                f"kafka.client sasl.mechanism: the worker supports {', '.join(_SASL_MECHANISMS)}"
            )
        return faust.SASLCredentials(
            username=client.get("sasl.username"),
            password=client.get("sasl.password"),
            mechanism=mechanism,
            ssl_context=ssl_context(client) if protocol == "SASL_SSL" else None,
        )
    if protocol == "SSL":
        return faust.SSLCredentials(ssl_context(client))
    return None


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
    partition_of = config.kafka.partitioner()
    tables = {
        name: region_table(app, name, config.kafka.partitions, partition_of)
        for name in ("reservations", "queue", "nodes", "moves")
    }
    state = ClusterState(_catalog(config))
    view = network_view(config.network)  # links: config, then LinkTelemetry
    policy = PolicyFile(config.worker.policy_file or None)  # a bad file stops the worker here
    traits = preset(config.worker.policy) if config.worker.policy in PRESETS else None
    scheduler = Scheduler(
        state,
        _placer(config, state, view),
        reservations=tables["reservations"],
        queue=tables["queue"],
        nodes=tables["nodes"],
        partitions=config.kafka.partitions,
        region_order=config.kafka.regions_pinned,
        view_ttl_s=config.worker.view_ttl_s,
        cross_region=config.network.cross_region_gangs,
        tenancy=policy.policy,
        moves=tables["moves"],
        replan=config.replan if traits is not None and traits.replan else None,
        try_once=config.worker.try_once,
        queue_order=traits.queue if traits is not None else "fifo",
        clock=EventClock() if config.worker.clock == "event" else WallClock(),
        porting_penalties=config.worker.porting_penalties,
        horizon_s=config.worker.horizon_s,
    )
    codec = make_codec(config.kafka.schema_registry_url or None)
    remote = RemoteRegions(config, codec, max_age_s=config.worker.remote_view_max_age_s)
    scheduler.remote_views = remote.views
    if config.forecast.enabled:  # headroom and green deferral from the forecast topic
        book = ForecastBook(config, codec)
        scheduler.forecasts = ForecastUse.from_config(config, book)
    rt = Runtime(config, codec, scheduler)
    rt.topics = topics
    rt.policy = policy
    rt.ownership = Ownership(partition_of, app.assignor.assigned_actives)
    rt.remote = remote

    def mark_dirty(*_: Any, **__: Any) -> None:
        rt.dirty = True

    for table in tables.values():
        table.on_recover(_async(mark_dirty))
    _register_agents(app, rt, topics)
    bandwidth = BandwidthProcessor(
        view,
        policy=allocation_policy(config.network),
        hysteresis=hysteresis(config.network),
        partition_of=config.kafka.partitioner(),
    )
    register_bandwidth(app, rt, topics, bandwidth)
    register_timers(app, rt)
    watch_broker(app, rt)
    register_pages(app, rt)
    _run_with_worker(app, remote.start, remote.stop)
    _run_with_worker(app, lambda: None, rt.ledger.stop_saving)  # a ledger save in flight
    if scheduler.forecasts is not None:
        _run_with_worker(app, scheduler.forecasts.book.start, scheduler.forecasts.book.stop)
    history_metrics = history_sql = None
    if config.store.enabled:  # the worker owns the ClickHouse store, through a child process
        history = HistoryProcess(config)
        _run_with_worker(app, history.start, history.stop)
        register_sql_proxy(app, history.url)
        watch_history(app, rt, history)
        history_metrics, history_sql = history.metrics_url, history.url
    register_metrics_page(app, rt, history_metrics)
    register_ui(app, rt, history_sql)
    return app, rt


def _async(fn: Any) -> Any:
    async def wrapper(*args: Any, **kwargs: Any) -> None:
        fn(*args, **kwargs)

    return wrapper


def _register_agents(app: faust.App, rt: Runtime, topics: dict[str, Any]) -> None:
    # Each event is processed inside `rt.guard`: a hostile record that trips our logic is
    # dead-lettered with the exception, and the agent goes on with the next one.
    def take(stream: Any, name: str) -> Any:
        def count(_: int) -> None:
            rt.metrics.batches[name] += 1

        return batches(stream, rt.config.worker.batch_max, count)

    def deciding(name: str, expected: str, step: str) -> Any:
        """An agent that decodes each event and hands it to `rt.scheduler.<step>`."""

        async def agent(stream: Any) -> None:
            async for batch in take(stream, name):
                for event in batch:
                    try:
                        async with rt.guard(event, name):
                            started = time.perf_counter_ns()
                            record = await rt.decode(event, expected, name)
                            if record is None:
                                continue
                            await rt.ensure_ready()
                            decide = getattr(rt.scheduler, step)
                            await rt.send_all(decide(record, started_ns=started))
                    finally:  # handled, dead-lettered or not: the replay's lockstep counts it
                        rt.handled[name] = rt.handled.get(name, 0) + 1

        return agent

    app.agent(topics[JOBS_SUBMITTED], name="gpuflow.router")(
        deciding("router", "JobSubmitted", "route")
    )
    app.agent(topics[JOBS_ROUTED], name="gpuflow.placer")(deciding("placer", "RoutedJob", "place"))

    @app.agent(topics[JOBS_EVENTS], name="gpuflow.lifecycle")
    async def lifecycle(stream: Any) -> None:
        async for batch in take(stream, "lifecycle"):
            released: dict[str, Any] = {}  # region -> the last event that freed capacity there
            for event in batch:
                async with rt.guard(event, "lifecycle"):
                    record = await rt.decode(event, "JobEvent", "lifecycle")
                    if record is None:
                        continue
                    await rt.ensure_ready()
                    produced_ms = int((event.message.timestamp or time.time()) * 1000)
                    regions: list[str] = []
                    out = rt.scheduler.on_job_event(
                        record, produced_ms=produced_ms, released=regions
                    )
                    await rt.send_all(out)
                    released.update(dict.fromkeys(regions, event))
            for region, event in released.items():  # one queue pass per region for the batch
                async with rt.guard(event, "lifecycle"):
                    await rt.send_all(rt.scheduler.after_release([region]))
            rt.job_events += len(batch)  # handled (or dead-lettered): the lockstep counts them

    @app.agent(topics[REPLAN_TICKS], name="gpuflow.replan")
    async def replan(stream: Any) -> None:
        async for event in stream.events():
            async with rt.guard(event, "replan"):
                record = await rt.decode(event, "ReplanTick", "replan")
                if record is None:
                    continue
                await rt.ensure_ready()
                ts, regions = timestamp_ms(record["ts"]), [record["region"]]
                stale = 3000 * rt.config.worker.replan_interval_s
                if rt.config.worker.clock == "wall" and time.time() * 1000 - ts > stale:
                    continue  # replayed after a restart: a fresh tick follows
                await rt.send_all(rt.scheduler.on_tick(ts, regions))
            rt.ticks += 1

    @app.agent(topics[NODE_INVENTORY], name="gpuflow.inventory")
    async def inventory(stream: Any) -> None:
        async for event in stream.events():
            async with rt.guard(event, "inventory"):
                record = await rt.decode(event, "NodeInventory", "inventory")
                if record is not None:
                    await rt.ensure_ready(fleet=False)
                    await rt.send_all(rt.fleet.on_inventory(record))
            rt.inventory_seen[event.message.partition] = event.message.offset

    register_telemetry(app, rt, topics)
    register_cancel(app, rt, topics)
    register_services(app, rt, topics)

    async def on_grid(event: Any, record: dict[str, Any]) -> None:
        rt.fleet.on_grid(record)

    app.agent(topics[GRID_SIGNALS], name="gpuflow.grid")(guarded(rt, "grid", "GridSignal", on_grid))


def _placer(config: Config, state: ClusterState, network: NetworkView) -> Placer:
    """The configured placer preset over this worker's state."""
    penalties = config.worker.porting_penalties
    score_args = {"porting": {"penalties": penalties}} if penalties else None
    try:
        return make_placer(
            config.worker.policy,
            state,
            throughput=_throughput(config, state.catalog),
            network=network,
            score_args=score_args,
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
