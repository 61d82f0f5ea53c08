"""What the worker's Kafka consumer is doing, per assigned partition (the `/consumer/` page).

Faust keeps its own view (active/paused partitions, the last offset it handed to a stream, the
last offset it committed) on top of aiokafka's (position, highwater, paused). When a partition
stops making progress these two views are what tell why, so the page shows both side by side.
"""

from __future__ import annotations

from typing import Any

__all__ = ["consumer_state"]


def consumer_state(app: Any) -> dict[str, Any]:
    """{"flow_active", "partitions": {"topic/p": {...}}} for the worker's consumer."""
    consumer = app.consumer
    faust_active = consumer._active_partitions or set()
    inner = getattr(getattr(consumer, "_thread", None), "_consumer", None)
    assignment = None
    if inner is not None and inner._subscription.subscription is not None:
        assignment = inner._subscription.subscription.assignment
    out: dict[str, Any] = {}
    for tp in sorted(consumer.assignment()):
        row: dict[str, Any] = {
            "active": tp in faust_active,
            "paused": tp in consumer._paused_partitions,
            "read_offset": consumer._read_offset.get(tp),
            "committed": consumer._committed_offset.get(tp),
        }
        if assignment is not None and tp in assignment.tps:
            state = assignment.state_value(tp)
            row.update(
                kafka_paused=state.paused,
                position=state.position if state.has_valid_position else None,
                highwater=state.highwater,
            )
        out[f"{tp.topic}/{tp.partition}"] = row
    return {"flow_active": consumer.flow_active, "partitions": out}
