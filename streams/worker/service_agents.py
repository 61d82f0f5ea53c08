"""The autoscaler in the worker: agents for service specs and load, its timer (every
`worker.autoscale_s`, 0: off), and its page `/services/` (`gpuflow services`).

The specs topic is compacted and read again from its start when the worker starts (its group's
offsets would skip the services declared before); a service is scaled by the worker that holds
its partition of `gpuflow.services.specs`, so several workers never scale one service twice.
On the event clock (a replay) the timer gives way to POST /tick/ {"ts": ms}: one look at that
time, answered with what it sent per topic."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from faust.types import TP

from infra.config import Config
from infra.kafka import read_to_end
from infra.signing import signer
from infra.topics import SERVICES_LOAD, SERVICES_SPECS
from schemas import DecodeError
from scorer.services import ServiceSpecError
from streams.history.sql import register_tick_page
from streams.services.autoscaler import Autoscaler
from streams.worker.guarded import guarded

if TYPE_CHECKING:
    import faust

    from streams.runtime.runtime import Runtime

__all__ = ["read_specs", "register_services"]

log = logging.getLogger(__name__)


def read_specs(config: Config, codec: Any, timeout_s: float = 15.0) -> list[tuple[int, dict]]:
    """Every decodable (partition, ServiceSpec record) of the specs topic, oldest first."""

    def decode(value: bytes) -> dict[str, Any] | None:
        try:
            return dict(codec.decode(value)[1])
        except DecodeError:
            return None  # the agent dead-letters it

    return [(p, r) for p, _, r in read_to_end(config.kafka, SERVICES_SPECS, decode, timeout_s)]


def register_services(app: faust.App, rt: Runtime, topics: dict[str, Any]) -> Autoscaler:
    def owned(partition: int) -> bool:
        with contextlib.suppress(Exception):  # before the first assignment: nothing
            return TP(SERVICES_SPECS, partition) in app.assignor.assigned_actives()
        return False

    book = rt.scheduler.forecasts.book if rt.scheduler.forecasts is not None else None
    scaler = Autoscaler(
        rt.scheduler,
        stale=lambda: rt.fleet.stale,
        signer=signer(rt.config.auth),
        owned=owned,
        # the forecast processor's forecasts of services, read with the worker's other forecasts
        forecasts=book.service_curve if book is not None else lambda _: None,
        forecast_max_age_ms=int(rt.config.forecast.service_max_age_s * 1000),
    )
    rt.autoscaler = scaler
    loaded = asyncio.Event()

    async def load_specs() -> None:
        loop = asyncio.get_running_loop()
        for partition, record in await loop.run_in_executor(None, read_specs, rt.config, rt.codec):
            with contextlib.suppress(ServiceSpecError):
                scaler.on_spec(record, partition=partition)
        loaded.set()

    async def on_spec(event: Any, record: dict[str, Any]) -> None:
        try:
            scaler.on_spec(record, partition=event.message.partition)
        except ServiceSpecError as exc:
            await rt.dead_letter(event.message, f"bad service: {exc}", "services")

    async def on_load(event: Any, record: dict[str, Any]) -> None:
        scaler.on_load(record)
        rt.handled["services.load"] = rt.handled.get("services.load", 0) + 1  # the lockstep

    app.agent(topics[SERVICES_SPECS], name="gpuflow.services")(
        guarded(rt, "services", "ServiceSpec", on_spec)
    )
    app.agent(topics[SERVICES_LOAD], name="gpuflow.services.load")(
        guarded(rt, "services.load", "ServiceLoad", on_load)
    )

    async def look(now_ms: int) -> dict[str, Any]:
        """One look of the autoscaler at `now_ms`; what it sent, per topic."""
        if not loaded.is_set():
            await load_specs()
        rt.scheduler.clock.observe(now_ms)
        before = dict(rt.sent)
        await rt.send_all(scaler.tick(now_ms))
        return {"sent": {t: n - before.get(t, 0) for t, n in rt.sent.items()}}

    _register_looks(app, rt, scaler, look)
    return scaler


def _register_looks(
    app: faust.App, rt: Runtime, scaler: Autoscaler, look: Callable[[int], Awaitable[Any]]
) -> None:
    """The looks: every `autoscale_s` on the wall clock; on the event clock (a replay) on
    POST /tick/, in lockstep. And the page `/services/`."""
    period = rt.config.worker.autoscale_s
    if period > 0 and rt.config.worker.clock == "wall":

        @app.timer(period)
        async def autoscale() -> None:
            if rt._ready.is_set():
                await look(int(time.time() * 1000))

    if rt.config.worker.clock == "event":
        register_tick_page(app, look)

    @app.page("/services/")
    async def services_page(web: Any, request: Any) -> Any:
        return web.json({**scaler.view(), "autoscale_s": period})
