"""What the worker notes of each message it sends: decisions counted on the Prometheus registry
(`/metrics`) and the latest placement decisions kept for the web view (`/ui/`).

The runtime's send path calls these; the pages only read what they kept, so the runtime needs
no page.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from infra.topics import TOPICS
from streams.base.outbox import Outgoing
from streams.base.prometheus import record_decision

__all__ = ["RecentDecisions", "note_sent"]

_DECISION_TOPICS = {t.name: t.name.rsplit(".", 1)[-1] for t in TOPICS if ".decisions." in t.name}


def note_sent(msg: Outgoing) -> None:
    """Count a message the worker sends if it is a decision (any decision topic)."""
    decision = _DECISION_TOPICS.get(msg.topic)
    if decision is None:
        return
    record = msg.record
    outcome = record.get("outcome") or record.get("reason") or "EMITTED"
    worker_us = record.get("worker_us")
    record_decision(decision, str(outcome), None if worker_us is None else worker_us / 1e6)


class RecentDecisions:
    """The last placement decisions this worker sent, newest first."""

    def __init__(self, keep: int = 50) -> None:
        self._items: deque[dict[str, Any]] = deque(maxlen=keep)

    def add(self, msg: Outgoing) -> None:
        if msg.event != "PlacementDecision":
            return
        r = msg.record
        self._items.appendleft(
            {
                "ts": r.get("ts"),
                "job_id": r.get("job_id"),
                "outcome": r.get("outcome"),
                "region": r.get("region"),
                "gpu_model": r.get("gpu_model"),
                "gpu_count": r.get("gpu_count"),
                "nodes": [a.get("node_id") for a in r.get("assignments") or []],
                "score": r.get("score"),
                "reasons": list(r.get("reasons") or []),
                "worker_ms": (r.get("worker_us") or 0) / 1000,
            }
        )

    def latest(self) -> list[dict[str, Any]]:
        return list(self._items)
