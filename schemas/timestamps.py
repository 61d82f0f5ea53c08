"""Avro `timestamp-millis` fields as they come out of a decoder: an int, or a datetime."""

from __future__ import annotations

from datetime import datetime
from typing import Any, overload

__all__ = ["timestamp_ms"]


@overload
def timestamp_ms(value: None) -> None: ...
@overload
def timestamp_ms(value: int | float | datetime) -> int: ...
def timestamp_ms(value: Any) -> int | None:
    """Milliseconds since the epoch (None stays None: an optional field left out)."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value)
