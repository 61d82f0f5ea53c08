"""Dead letters: bytes a consumer could not use, parked with why and where they came from."""

from __future__ import annotations

import time
import uuid
from typing import Any

__all__ = ["dead_letter_record", "message_dead_letter"]


def dead_letter_record(
    *,
    topic: str,
    partition: int,
    offset: int,
    key: Any,
    value: Any,
    error: Exception | str,
    consumer: str,
) -> dict[str, Any]:
    """A DeadLetter record; non-bytes keys or values (e.g. a null tombstone) are kept as null."""
    return {
        "event_id": str(uuid.uuid4()),
        "ts": int(time.time() * 1000),
        "source_topic": topic,
        "partition": int(partition),
        "offset": int(offset),
        "key": bytes(key) if isinstance(key, bytes | bytearray) else None,
        "value": bytes(value) if isinstance(value, bytes | bytearray) else None,
        "error": str(error)[:2000],
        "consumer": consumer,
    }


def message_dead_letter(msg: Any, error: Exception | str, *, consumer: str) -> dict[str, Any]:
    """The dead letter of a consumed Kafka message (confluent_kafka.Message)."""
    return dead_letter_record(
        topic=str(msg.topic()),
        partition=msg.partition() or 0,
        offset=msg.offset() or 0,
        key=msg.key(),
        value=msg.value(),
        error=error,
        consumer=consumer,
    )
