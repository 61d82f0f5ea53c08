"""The autoscaler in the worker: agents for service specs and load, its timer (every
`worker.autoscale_s`, 0: off), and its page `/services/` (`gpuflow services`)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from infra.signing import signer
from infra.topics import SERVICES_LOAD, SERVICES_SPECS
from scorer.services import ServiceSpecError
from streams.services.autoscaler import Autoscaler
from streams.worker.guarded import guarded

if TYPE_CHECKING:
    import faust

    from streams.runtime.runtime import Runtime

__all__ = ["register_services"]

log = logging.getLogger(__name__)


def register_services(app: faust.App, rt: Runtime, topics: dict[str, Any]) -> Autoscaler:
    scaler = Autoscaler(rt.scheduler, stale=lambda: rt.fleet.stale, signer=signer(rt.config.auth))
    rt.autoscaler = scaler

    async def on_spec(event: Any, record: dict[str, Any]) -> None:
        try:
            scaler.on_spec(record)
        except ServiceSpecError as exc:
            await rt.dead_letter(event.message, f"bad service: {exc}", "services")

    async def on_load(event: Any, record: dict[str, Any]) -> None:
        scaler.on_load(record)

    app.agent(topics[SERVICES_SPECS], name="gpuflow.services")(
        guarded(rt, "services", "ServiceSpec", on_spec)
    )
    app.agent(topics[SERVICES_LOAD], name="gpuflow.services.load")(
        guarded(rt, "services.load", "ServiceLoad", on_load)
    )

    period = rt.config.worker.autoscale_s
    if period > 0:

        @app.timer(period)
        async def autoscale() -> None:
            if not rt._ready.is_set():
                return
            await rt.send_all(scaler.tick(int(time.time() * 1000)))

    @app.page("/services/")
    async def services_page(web: Any, request: Any) -> Any:
        return web.json({**scaler.view(), "autoscale_s": period})

    return scaler
