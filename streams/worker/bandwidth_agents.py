"""The bandwidth processor's Faust wiring: two thin agents, a round timer and a page.

Link telemetry and job events are decoded and handed to `BandwidthProcessor`; every
`network.round_s` the timer sends whatever quota decisions it returns. The lifecycle agent
also reads job events and dead-letters the bad ones, so this one only skips them.
"""

from __future__ import annotations

import logging
from typing import Any

import faust

from infra.topics import JOBS_EVENTS, LINK_TELEMETRY
from schemas import CodecError
from streams.bandwidth.processor import BandwidthProcessor
from streams.base.outbox import now_ms
from streams.runtime.runtime import Runtime

__all__ = ["register_bandwidth"]

log = logging.getLogger(__name__)


def register_bandwidth(
    app: faust.App, rt: Runtime, topics: dict[str, Any], processor: BandwidthProcessor
) -> None:
    @app.agent(topics[LINK_TELEMETRY], name="gpuflow.bandwidth.links")
    async def links(stream: Any) -> None:
        async for event in stream.events():
            record = await rt.decode(event, "LinkTelemetry", "bandwidth")
            if record is not None:
                processor.on_link(record)

    @app.agent(topics[JOBS_EVENTS], name="gpuflow.bandwidth.jobs")
    async def jobs(stream: Any) -> None:
        async for event in stream.events():
            try:
                name, record = rt.codec.decode(event.message.value, topic=JOBS_EVENTS)
            except CodecError:
                continue  # the lifecycle agent dead-letters it
            if name == "JobEvent":
                await rt.ensure_ready()
                processor.on_job_event(record)

    restored: dict[str, Any] = {"after": None}

    @app.timer(rt.config.network.round_s)
    async def bandwidth_round() -> None:
        if not rt._ready.is_set():
            return
        if restored["after"] is not rt._preparing:  # a rebuild: jobs the tables say still run
            processor.restore(rt.scheduler.running_flows())
            restored["after"] = rt._preparing
        await rt.send_all(processor.round(now_ms()))

    @app.page("/bandwidth/")
    async def page(web: Any, request: Any) -> Any:
        """Links (capacity, cross traffic, allocatable, granted) and jobs with their phase."""
        return web.json(processor.snapshot(now_ms()))
