"""The broker's network side: one asyncio server, requests of a connection answered in order.

Like Kafka, a connection's requests are handled one at a time, so its responses leave in the
order the requests came (clients rely on that to match correlation ids); different connections
proceed independently. Retention, compaction and session expiry run on timers in the same loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Callable
from io import BytesIO

from infra.heap import trim_heap
from infra.logbroker import group_handlers  # noqa: F401  (registers the group APIs)
from infra.logbroker.handlers import VERSIONS, Context, dispatch, request_class
from infra.logbroker.state import BrokerSettings, BrokerState

__all__ = ["serve"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhih")
_MAX_REQUEST = 100 * 1024 * 1024
UNSUPPORTED_VERSION = 35


def _unsupported_api_versions(correlation_id: int) -> bytes:
    """ApiVersions at a version we do not serve: error 35 with our ranges, in the v0 layout
    (KIP-511), so the client asks again at a version we list."""
    ranges = sorted(VERSIONS.items())
    body = struct.pack(">ihi", correlation_id, UNSUPPORTED_VERSION, len(ranges))
    body += b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in ranges)
    return _SIZE.pack(len(body)) + body


async def _connection(
    state: BrokerState, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    peer = writer.get_extra_info("peername")
    host = peer[0] if peer else ""
    try:
        while True:
            size = _SIZE.unpack(await reader.readexactly(4))[0]
            if not 0 < size <= _MAX_REQUEST:
                log.warning("request of %d bytes from %s: closing", size, peer)
                return
            payload = await reader.readexactly(size)
            api_key, version, correlation_id, id_len = _HEAD.unpack_from(payload)
            client_id = payload[10 : 10 + id_len].decode() if id_len > 0 else ""
            body_at = 10 + max(id_len, 0)
            if api_key == 18 and version > VERSIONS[18][1]:
                writer.write(_unsupported_api_versions(correlation_id))
                await writer.drain()
                continue
            cls = request_class(api_key, version)
            if cls is None:
                log.warning(
                    "api %d v%d from %s is not served: closing", api_key, version, client_id
                )
                return
            request = cls.decode(BytesIO(payload[body_at:]))
            response = await dispatch(Context(state, client_id, host), api_key, version, request)
            if response is None:  # acks=0 produce
                continue
            body = struct.pack(">i", correlation_id) + response.encode()
            writer.write(_SIZE.pack(len(body)) + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        pass  # the client left, or the broker is stopping
    except Exception:
        log.exception("request from %s failed: closing the connection", peer)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


REPORT_S = 60.0  # how often what is stored is logged


async def _every(seconds: float, fn: Callable[[], object]) -> None:
    while True:
        await asyncio.sleep(seconds)
        try:
            fn()
        except Exception:
            log.exception("housekeeping failed")


async def serve(settings: BrokerSettings, ready: asyncio.Event | None = None) -> None:
    """Serve until cancelled."""
    state = BrokerState(settings)
    server = await asyncio.start_server(
        lambda r, w: _connection(state, r, w), settings.host, settings.port, reuse_address=True
    )
    tasks = [
        asyncio.create_task(_every(settings.cleanup_interval_ms / 1000, state.clean)),
        asyncio.create_task(_every(0.25, state.groups.expire)),
        asyncio.create_task(_every(REPORT_S, state.report)),
        # retention and compaction free batches of every size; glibc keeps the pages unless
        # asked (a 20-minute soak: RSS 2.79 -> 0.04 MB/min over minutes 16-20, infra.heap)
        asyncio.create_task(_every(REPORT_S, trim_heap)),
    ]
    log.info("logbroker listening on %s:%d", settings.host, settings.port)
    if ready is not None:
        ready.set()
    try:
        async with server:
            await server.serve_forever()
    finally:
        for t in tasks:
            t.cancel()
