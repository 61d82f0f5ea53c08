"""The stream engine: the same trace through the real embedded broker and a real Faust worker.

Virtual time advances in lockstep on the worker's event clock (`worker.clock = "event"`: its
time is the events' timestamps, and its timer runs only when asked): inventory first (one
partition, so the worker learns the nodes in trace order, as the in-process engine does), then
each event in order, and the replay waits until the worker has answered before the next:
- a JobSubmitted, once the worker's /state/ counts it handled by the router (and the placer the
  hops it sent on), by the decisions it sent meanwhile (its placement, a preemption it caused);
- a JobEvent (FINISHED, MIGRATED, EVICTED ...) on its region's partition, once the worker's
  /state/ counts it handled, by the decisions it sent meanwhile (its `sent` counters per topic);
- a timer tick is a ReplanTick for each region on its partition, once /state/ counts them
  (`ticks`), by what the passes sent.
Decisions come back placements first, then migrations, then preemptions, each in partition
order; the twin carries them all out (a preemption evicts its victim, as in-process).
"""

from __future__ import annotations

import csv
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from agents.replay.trace import Trace
from gpuflow.replay.engine import Decided
from gpuflow.replay.lockstep import LockstepWorker, delta
from infra.topics import (
    DECISIONS_MIGRATION,
    DECISIONS_PLACEMENT,
    DECISIONS_PREEMPTION,
    JOBS_EVENTS,
    JOBS_ROUTED,
    JOBS_SUBMITTED,
    REPLAN_TICKS,
)
from scorer import default_catalog

__all__ = ["StreamDecider"]

# in the order answers are given: a preemption is carried out after the placements beside it
DECISION_TOPICS = (DECISIONS_PLACEMENT, DECISIONS_MIGRATION, DECISIONS_PREEMPTION)


def _write_table(trace: Trace, path: Path) -> str:
    """The trace's measured table in Gavel's format, for the worker's `throughput_csv`."""
    if trace.throughput is None:
        return ""
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["job_type", "gpu_type", "scale_factor", "consolidated", "steps_per_sec"])
        for (jt, model, scale, together), rate in trace.throughput.measured.items():
            out.writerow([jt, model, scale, int(together), repr(rate)])
    return str(path)


class StreamDecider(LockstepWorker):
    def __init__(
        self, policy: str, trace: Trace, *, data_dir: Path | None = None, try_once: bool = False
    ) -> None:
        def settings(root: Path) -> dict[str, Any]:
            return {
                "throughput_csv": _write_table(trace, root / "throughputs.csv"),
                "catalog_file": _write_catalog(trace, root / "catalog.json"),
                "policy": policy,
                "try_once": try_once,
            }

        super().__init__(
            settings,
            DECISION_TOPICS,
            name="replay-worker",
            group_id=f"replay-{uuid.uuid4().hex[:8]}",
            data_dir=data_dir,
        )
        self.regions = sorted({n.region for n in trace.nodes})

    # ---- Decider -------------------------------------------------------------------------
    def setup(self, nodes: Sequence[Mapping[str, Any]]) -> None:
        self.start_worker(nodes)

    def submit(self, record: Mapping[str, Any]) -> list[Decided]:
        """Answered once the router handled it (and the placer the hops it sent on) by every
        decision sent meanwhile: its placement and what that caused (a preemption)."""
        before = self.state()
        self.produce(JOBS_SUBMITTED, "JobSubmitted", record["job_id"], record, None)
        self.producer.flush(10)
        what = f"submission of {record['job_id']}"
        after = self.handled(before, {"router": 1}, what)
        hops = delta(before, after, (JOBS_ROUTED,))[JOBS_ROUTED]
        if hops:
            after = self.handled(before, {"placer": hops}, what)
        return self._decided(before, after)

    def job_event(self, record: Mapping[str, Any]) -> list[Decided]:
        job_id, region = record["job_id"], record["region"]
        before = self.state()
        self.produce(JOBS_EVENTS, "JobEvent", job_id, dict(record), self.partition_of(region))
        self.producer.flush(10)
        after = self.handled(before, {"job_events": 1}, f"{record['type']} of {job_id}")
        return self._decided(before, after)

    def tick(self, ts_ms: int) -> list[Decided]:
        before = self.state()
        for region in self.regions:
            record = {"event_id": f"replay-tick-{region}-{ts_ms}", "ts": ts_ms, "region": region}
            self.produce(REPLAN_TICKS, "ReplanTick", region, record, self.partition_of(region))
        self.producer.flush(10)
        after = self.handled(before, {"ticks": len(self.regions)}, f"tick at {ts_ms}")
        return self._decided(before, after)

    def _decided(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Decided]:
        """What the worker sent between two states, placements first (DECISION_TOPICS)."""
        read = self.read(delta(before, after, DECISION_TOPICS))
        return [Decided(topic, d) for topic in DECISION_TOPICS for d in read[topic]]


def _write_catalog(trace: Trace, path: Path) -> str:
    """The trace's models the built-in catalogue lacks (opaque or from --catalog), as a
    catalogue file for the worker's `catalog_file`; empty when there are none."""
    base = default_catalog()
    extra = {
        spec.name: {k: v for k, v in asdict(spec).items() if k != "name"}
        for spec in trace.catalog
        if base.get(spec.name) != spec
    }
    if not extra:
        return ""
    path.write_text(json.dumps({"models": extra}))
    return str(path)
