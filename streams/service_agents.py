"""The autoscaler in the worker: agents for service specs and load, its timer (every
`worker.autoscale_s`, 0: off), and its page `/services/` (`gpuflow services`).

The specs topic is compacted and read again from its start when the worker starts (its group's
offsets would skip the services declared before); a service is scaled by the worker that holds
its partition of `gpuflow.services.specs`, so several workers never scale one service twice."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
from faust.types import TP

from infra.config import Config
from infra.kafka import consumer
from infra.signing import signer
from infra.topics import SERVICES_LOAD, SERVICES_SPECS
from schemas import DecodeError
from scorer.services import ServiceSpecError
from streams.services import Autoscaler

if TYPE_CHECKING:
    import faust

    from streams.runtime import Runtime

__all__ = ["read_specs", "register_services"]

log = logging.getLogger(__name__)


def read_specs(config: Config, codec: Any, timeout_s: float = 15.0) -> list[tuple[int, dict]]:
    """Every decodable (partition, ServiceSpec record) of the specs topic, oldest first."""
    c = consumer(
        config.kafka,
        group_id=f"gpuflow-specs-{time.monotonic_ns()}",
        **{"enable.partition.eof": True},
    )
    out: list[tuple[int, dict]] = []
    try:
        meta = c.list_topics(SERVICES_SPECS, timeout=timeout_s).topics.get(SERVICES_SPECS)
        if meta is None or meta.error is not None:
            return out
        c.assign([TopicPartition(SERVICES_SPECS, p, OFFSET_BEGINNING) for p in meta.partitions])
        pending, deadline = set(meta.partitions), time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for msg in c.consume(500, timeout=0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                    continue
                try:
                    out.append((int(msg.partition() or 0), codec.decode(msg.value())[1]))
                except DecodeError:
                    continue  # the agent dead-letters it
    finally:
        c.close()
    return out


def register_services(app: faust.App, rt: Runtime, topics: dict[str, Any]) -> Autoscaler:
    def owned(partition: int) -> bool:
        with contextlib.suppress(Exception):  # before the first assignment: nothing
            return TP(SERVICES_SPECS, partition) in app.assignor.assigned_actives()
        return False

    scaler = Autoscaler(
        rt.scheduler, stale=lambda: rt.fleet.stale, signer=signer(rt.config.auth), owned=owned
    )
    rt.autoscaler = scaler
    loaded = asyncio.Event()

    async def load_specs() -> None:
        loop = asyncio.get_running_loop()
        for partition, record in await loop.run_in_executor(None, read_specs, rt.config, rt.codec):
            with contextlib.suppress(ServiceSpecError):
                scaler.on_spec(record, partition=partition)
        loaded.set()

    @app.agent(topics[SERVICES_SPECS], name="gpuflow.services")
    async def specs(stream: Any) -> None:
        async for event in stream.events():
            async with rt.guard(event, "services"):
                record = await rt.decode(event, "ServiceSpec", "services")
                if record is None:
                    continue
                try:
                    scaler.on_spec(record, partition=event.message.partition)
                except ServiceSpecError as exc:
                    await rt.dead_letter(event.message, f"bad service: {exc}", "services")

    @app.agent(topics[SERVICES_LOAD], name="gpuflow.services.load")
    async def load(stream: Any) -> None:
        async for event in stream.events():
            async with rt.guard(event, "services.load"):
                record = await rt.decode(event, "ServiceLoad", "services.load")
                if record is not None:
                    scaler.on_load(record)

    period = rt.config.worker.autoscale_s
    if period > 0:

        @app.timer(period)
        async def autoscale() -> None:
            if not rt._ready.is_set():
                return
            if not loaded.is_set():
                await load_specs()
            await rt.send_all(scaler.tick(int(time.time() * 1000)))

    @app.page("/services/")
    async def services_page(web: Any, request: Any) -> Any:
        return web.json({**scaler.view(), "autoscale_s": period})

    return scaler
