"""The worker's per-event path without Faust: decode -> type -> validate -> processor.

It runs the same functions the worker's agents run (`streams/worker/app.py`: the codec,
`streams.validation.problems`, then `Scheduler.route/place/on_job_event` and
`FleetTracker.on_inventory/on_telemetry/on_grid`), so hypothesis can drive thousands of
hostile records through them in seconds; `test_worker.py` sends them to the real worker.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from schemas import CodecError, SingleObjectCodec
from scorer import ClusterState, Placer
from streams.base.outbox import Outgoing
from streams.runtime.fleet import FleetTracker
from streams.scheduler.core import Scheduler
from streams.scheduler.validation import Rules, problems

CODEC = SingleObjectCodec()

Handler = Callable[[Scheduler, FleetTracker, dict[str, Any]], list[Outgoing]]
HANDLERS: dict[str, Handler] = {  # as the agents in streams/worker/app.py call them
    "JobSubmitted": lambda s, f, r: s.route(r, started_ns=0),
    "RoutedJob": lambda s, f, r: s.place(r, started_ns=0),
    "JobEvent": lambda s, f, r: s.on_job_event(r),
    "NodeInventory": lambda s, f, r: f.on_inventory(r),
    "NodeTelemetry": lambda s, f, r: f.on_telemetry(r),
    "GridSignal": lambda s, f, r: _grid(f, r),
}


def _grid(fleet: FleetTracker, record: dict[str, Any]) -> list[Outgoing]:
    fleet.on_grid(record)
    return []


class WorkerTwin:
    """One worker's scheduler and fleet tracker, fed raw bytes; counts what became of each."""

    def __init__(self, rules: Rules | None = None) -> None:
        self.state = ClusterState()
        self.scheduler = Scheduler(
            self.state, Placer(self.state), reservations={}, queue={}, nodes={}, partitions=4
        )
        self.fleet = FleetTracker(self.scheduler, stale_after_s=10.0)
        self.rules = rules or Rules()
        self.outcomes: Counter[str] = Counter()
        self.sent: list[Outgoing] = []

    def feed(self, expected: str, value: bytes) -> str:
        """Process one message as the agent consuming `expected` events would."""
        try:
            name, record = CODEC.decode(value)
        except CodecError:
            return self._count("dead_letter:undecodable")
        if name != expected:
            return self._count("dead_letter:wrong_type")
        if problems(name, record, self.rules):
            if name == "JobSubmitted":
                self._send(self.scheduler.reject_invalid(record, ["invalid"]))
            return self._count("dead_letter:invalid")
        self._send(HANDLERS[name](self.scheduler, self.fleet, record))
        return self._count("processed")

    def _send(self, out: list[Outgoing]) -> None:
        for msg in out:  # what the worker would produce must encode, or its send would fail
            CODEC.encode(msg.event, msg.record, topic=msg.topic)
        self.sent.extend(out)

    def _count(self, outcome: str) -> str:
        self.outcomes[outcome] += 1
        return outcome

    def assert_no_gpu_promised_twice(self) -> None:
        held: Counter[tuple[str, int]] = Counter()
        for assignments in self.state.jobs.values():
            for a in assignments:
                for gpu in a.gpu_indices:
                    held[(a.node_id, gpu)] += a.gpu_milli
        over = {gpu: milli for gpu, milli in held.items() if milli > 1000}
        assert not over, f"GPUs promised more than once: {over}"
        assert (np.asarray(self.state.free_milli) >= 0).all()
