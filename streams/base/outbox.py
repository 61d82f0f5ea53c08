"""Messages a processor decided to send, returned by the scheduling logic and sent by the agent.

Keeping the logic free of Faust lets unit tests run it against plain dicts, and lets the agent
send everything one event produced in one place.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from infra.topics import TOPICS

__all__ = ["Outgoing", "new_event_id", "now_ms", "outgoing"]

_EVENT_OF = {t.name: t.event for t in TOPICS}
_REGION_KEYED = {t.name for t in TOPICS if t.region_keyed}
_URL_NAMESPACE = uuid.NAMESPACE_URL.bytes


@dataclass(frozen=True)
class Outgoing:
    topic: str
    event: str  # Avro event name
    key: str
    record: Mapping[str, Any]
    partition: int | None = None


def now_ms() -> int:
    return int(time.time() * 1000)


def new_event_id(*parts: str) -> str:
    """A fresh id, or a deterministic one when `parts` name the event (replays reuse it)."""
    if parts:
        return _uuid5("gpuflow:" + ":".join(parts))
    return str(uuid.uuid4())


def _uuid5(name: str) -> str:
    """`str(uuid.uuid5(uuid.NAMESPACE_URL, name))` without building a UUID object (a third of
    the cost; every decision names one)."""
    digest = bytearray(hashlib.sha1(_URL_NAMESPACE + name.encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def outgoing(
    topic: str,
    key: str,
    record: Mapping[str, Any],
    *,
    region: str | None,
    partition_of: Callable[[str], int],
) -> Outgoing:
    """An outgoing message, placed on its region's partition when the topic is region-keyed."""
    partition = None
    if topic in _REGION_KEYED:
        partition = partition_of(region or "")
    return Outgoing(topic, _EVENT_OF[topic], key, record, partition)
