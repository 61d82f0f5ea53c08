"""The service replay's line to the embedded broker and a real worker on the event clock.

What it sends, the worker handles before the replay goes on (lockstep, as the job replay's
stream engine): load reports until /state/ counts them handled, a look (POST /tick/) answered
with what the autoscaler sent, the replica and training submissions until the router (and the
placer, for the hops it sent on) handled them, cancels until the cancel agent did, and the
executor's reports until the lifecycle did. Then exactly the decisions sent meanwhile are read
back, per topic in partition order: placements, then preemptions, then scaling decisions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuflow.replay.lockstep import Decisions, LockstepWorker, delta
from infra.errors import InfraError
from infra.topics import (
    DECISIONS_PLACEMENT,
    DECISIONS_PREEMPTION,
    JOBS_CANCEL,
    JOBS_EVENTS,
    JOBS_ROUTED,
    JOBS_SUBMITTED,
    SERVICES_LOAD,
    SERVICES_SCALING,
    SERVICES_SPECS,
)

__all__ = ["READ_TOPICS", "ServiceWorker"]

READ_TOPICS = (DECISIONS_PLACEMENT, DECISIONS_PREEMPTION, SERVICES_SCALING)


class ServiceWorker(LockstepWorker):
    """The broker and worker of one service stream replay; `close` stops both."""

    def __init__(self, data_dir: Path | None = None) -> None:
        super().__init__(
            lambda _: {"autoscale_s": 0},  # the looks come as POST /tick/
            READ_TOPICS,
            name="service-replay-worker",
            group_id="service-replay",
            data_dir=data_dir,
        )
        self.tick_url = f"{self.base_url}/tick/"

    def start(self, nodes: Sequence[Mapping[str, Any]], specs: Sequence[Mapping[str, Any]]) -> None:
        """Service declarations and inventory first, then the worker, until it knows them."""
        for record in specs:
            self.produce(SERVICES_SPECS, "ServiceSpec", record["name"], record, None)
        self.start_worker(nodes)

    def loads(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Load reports, once the worker's autoscaler has heard them."""
        before = self.state()
        for record in records:
            self.produce(SERVICES_LOAD, "ServiceLoad", record["service"], record, None)
        self.producer.flush(10)
        self.handled(before, {"services.load": len(records)}, "load reports")

    def look(self, now_ms: int) -> Decisions:
        """One look of the autoscaler at `now_ms`, carried through to its decisions."""
        before = self.state()
        answer = self.http.post(self.tick_url, json={"ts": now_ms})
        if answer.status_code != 200:
            raise InfraError(f"worker refused the look at {now_ms}: {answer.text}")
        sent = answer.json().get("sent") or {}
        waits = {
            "router": int(sent.get(JOBS_SUBMITTED, 0)),
            "cancel": int(sent.get(JOBS_CANCEL, 0)),
        }
        return self._settle(before, waits, f"look at {now_ms}")

    def submit(self, records: Sequence[Mapping[str, Any]]) -> Decisions:
        before = self.state()
        for record in records:
            self.produce(JOBS_SUBMITTED, "JobSubmitted", record["job_id"], record, None)
        self.producer.flush(10)
        return self._settle(before, {"router": len(records)}, "submissions")

    def report(self, records: Sequence[Mapping[str, Any]]) -> Decisions:
        """JobEvents from the executor (EVICTED, CANCELLED, FINISHED)."""
        before = self.state()
        for record in records:
            part = self.partition_of(record["region"])
            self.produce(JOBS_EVENTS, "JobEvent", record["job_id"], record, part)
        self.producer.flush(10)
        return self._settle(before, {"job_events": len(records)}, "job events")

    def _settle(self, before: Mapping[str, Any], waits: Mapping[str, int], what: str) -> Decisions:
        after = self.handled(before, waits, what)
        hops = delta(before, after, (JOBS_ROUTED,))[JOBS_ROUTED]
        if hops:
            after = self.handled(before, {"placer": hops}, what)
        return self.read(delta(before, after, READ_TOPICS))
