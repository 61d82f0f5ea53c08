"""Fleet state from node events: inventory, telemetry, stale nodes, windowed region summaries."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infra.topics import DECISIONS_MIGRATION, REGION_STATE
from scorer.holds import HOLD_PREFIX as HOLD
from streams.base.outbox import Outgoing, new_event_id, now_ms, outgoing
from streams.scheduler.convert import assignment_records, node_spec
from streams.scheduler.core import Scheduler
from streams.scheduler.protection import CORDON_KEY, Protection
from streams.telemetry.reports import Reports

__all__ = ["FleetTracker"]

log = logging.getLogger(__name__)


@dataclass
class _Window:
    """Utilisation samples of one region since the last summary."""

    util_sum: float = 0.0
    samples: int = 0
    start_ms: int = field(default_factory=now_ms)


@dataclass
class _Front:
    """How far the telemetry stream has got, in the agents' time: the newest report applied
    (a clock ahead of the worker's counts as now), moved on by the time since it came while
    nothing more is there to read."""

    ts_ms: int = 0
    at: float = 0.0  # time.monotonic() when it was applied

    def advance(self, ts_ms: int) -> None:
        ts = min(ts_ms, now_ms())
        if ts > self.ts_ms:
            self.ts_ms, self.at = ts, time.monotonic()

    def now_ms(self, *, behind: bool) -> int | None:
        if not self.ts_ms:
            return None
        return self.ts_ms + (0 if behind else int((time.monotonic() - self.at) * 1000))


_NOT_CONTENT = ("event_id", "ts", CORDON_KEY)  # an event's identity and time; our cordon mark


def _same_inventory(held: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    """Whether an inventory says what the held one says, its identity and time apart (the
    held entry may carry this worker's cordon mark, which no inventory has)."""
    return all(held.get(k) == v for k, v in record.items() if k not in _NOT_CONTENT) and all(
        k in record for k in held if k not in _NOT_CONTENT
    )


class FleetTracker:
    """Applies node events to the scheduler's arrays and summarises regions per window."""

    def __init__(self, scheduler: Scheduler, *, stale_after_s: float) -> None:
        self.s = scheduler
        self.stale_after_s = stale_after_s
        self.stale: set[str] = set()
        self._windows: dict[str, _Window] = {}
        self._carbon: dict[str, float] = {}
        self._last_retry: dict[str, float] = {}
        self._last_ts: dict[str, int] = {}  # node -> ts of the last telemetry applied
        self._front = _Front()
        self._heard: dict[str, int] = {}  # node -> ts of its newest report (inventory too)
        # node -> ts of its newest inventory (the table keeps the ts of the last one that
        # changed something; a re-announcement only moves this)
        self._inventory_ts: dict[str, int] = {}
        self.ignored: Counter[str] = Counter()  # valid events with nothing to apply
        self.retry_every_s = 1.0
        self.protection = Protection(scheduler, scheduler.tenancy.policy.protection)

    def on_inventory(self, record: Mapping[str, Any]) -> list[Outgoing]:
        """A node (re)announces itself; an older inventory than the one held is ignored.

        A node that reconnects with fewer GPUs keeps its reservations (no GPU is promised
        twice), and the jobs holding GPUs it no longer has are reported for rescheduling.
        """
        node_id = record["node_id"]
        held = self.s.nodes.get(node_id)
        ts = int(record.get("ts") or 0)
        newest = max(int((held or {}).get("ts") or 0), self._inventory_ts.get(node_id, 0))
        if held is not None and ts < newest:
            self.ignored["inventory_out_of_order"] += 1
            return []
        self._inventory_ts[node_id] = ts
        self.s.last_seen[node_id] = time.monotonic()
        self._heard_from(node_id, ts)
        if held is not None and _same_inventory(held, record):
            # the periodic re-announcement: nothing to write (a changelog record per node per
            # minute, kept for ever by the embedded broker), to recompute, or to retry the
            # region's queue for (its capacity did not change; a long queue's retry costs ms)
            self.ignored["inventory_unchanged"] += 1
            return []
        cordon = (held or {}).get(CORDON_KEY)
        self.s.nodes[node_id] = dict(record) | ({CORDON_KEY: cordon} if cordon else {})
        self.s.state.upsert_node(node_spec(record))
        shrank = held is not None and int(record["gpu_count"]) < int(held["gpu_count"])
        out = self._report_lost_gpus(node_id, int(record["gpu_count"])) if shrank else []
        if self.s.queued_in(record["region"]):
            out += self.s.retry_queue(record["region"])
        return out

    def _heard_from(self, node_id: str, ts_ms: int) -> None:
        if ts_ms:
            self._heard[node_id] = max(ts_ms, self._heard.get(node_id, 0))
            self._front.advance(ts_ms)

    def _report_lost_gpus(self, node_id: str, gpu_count: int) -> list[Outgoing]:
        lost = [
            job_id
            for job_id, held in self.s.state.jobs.items()
            if not job_id.startswith(HOLD)
            and any(a.node_id == node_id and max(a.gpu_indices) >= gpu_count for a in held)
        ]
        for job_id in lost:
            log.warning("node shrank under a job node_id=%s job_id=%s", node_id, job_id)
        return [
            self._reschedule(job_id, self.s.state.jobs[job_id], f"shrank:{node_id}:{gpu_count}")
            for job_id in lost
        ]

    def on_telemetry(self, record: Mapping[str, Any]) -> list[Outgoing]:
        """Apply one node's report (`on_reports`)."""
        return self.on_reports(Reports.from_records([record]))

    def on_reports(self, reports: Reports) -> list[Outgoing]:
        """Apply reports in order. One older than the last applied for its node (a burst of
        buffered telemetry replayed after a reconnect, events out of order) is ignored, and so
        is one for a node not known yet (telemetry before inventory: nothing to attach it to).
        Then each touched region's queue is retried (at once where a node came back)."""
        out: list[Outgoing] = []
        retry: dict[str, bool] = {}  # region -> a node there was stale until now
        for part in reports.rounds():
            out += self._apply(part, retry)
        for region, now in retry.items():
            out += self._maybe_retry(region, now=now)
        return out

    def _apply(self, reports: Reports, retry: dict[str, bool]) -> list[Outgoing]:
        """Reports of distinct nodes."""
        s = self.s
        known = np.array([n in s.nodes or n in s.last_seen for n in reports.node_id], bool)
        last = np.array([self._last_ts.get(n, 0) for n in reports.node_id], np.int64)
        late = known & (reports.ts > 0) & (reports.ts < last)
        for reason, mask in (("telemetry_unknown_node", ~known), ("telemetry_out_of_order", late)):
            if mask.any():
                self.ignored[reason] += int(mask.sum())
        keep = known & ~late
        if not keep.all():
            if not keep.any():
                return []
            reports = reports.take(np.flatnonzero(keep))
        seen_at, stale, heard = time.monotonic(), self.stale, self._heard
        for node_id, region, ts in zip(
            reports.node_id, reports.region, reports.ts.tolist(), strict=True
        ):
            self._last_ts[node_id] = ts
            if ts:
                heard[node_id] = max(ts, heard.get(node_id, 0))
            s.last_seen[node_id] = seen_at
            came_back = node_id in stale
            stale.discard(node_id)
            retry[region] = retry.get(region, False) or came_back
        if reports.ts.max(initial=0) > 0:
            self._front.advance(int(reports.ts.max()))
        if len(reports.index):
            self._apply_gpus(reports)
        cordoned, state = self.protection.cordoned, s.state
        for node_id, healthy in zip(reports.node_id, reports.node_healthy.tolist(), strict=True):
            state.set_node_healthy(node_id, healthy and not cordoned(node_id))
        self._note_util(reports)
        return self.protection.observe(reports)

    def _apply_gpus(self, reports: Reports) -> None:
        """Patch per-GPU health and speed; a delta report carries only the GPUs that changed.
        Most reports repeat what the arrays hold: only a node whose values differ is set
        (each setter recomputes the node's summary)."""
        state = self.s.state
        slot = np.full(len(reports), -1, np.int64)
        for i in np.flatnonzero(reports.gpu_counts()).tolist():
            slot[i] = state.slot_of(reports.node_id[i])
        row_slot = slot[reports.owner]
        fits = (reports.index >= 0) & (reports.index < state.gpu_count[row_slot])
        rows, index = row_slot[fits], reports.index[fits]
        owner, healthy, perf = reports.owner[fits], reports.healthy[fits], reports.perf[fits]
        ok_changed = state.gpu_ok[rows, index] != healthy
        perf_changed = state.perf[rows, index] != np.clip(perf, 0.0, 2.0)
        for changed, values_of, values, setter in (
            (ok_changed, state.gpu_ok, healthy, state.set_gpu_health),
            (perf_changed, state.perf, perf, state.set_perf_factor),
        ):
            nodes = np.unique(owner[changed])
            starts = np.searchsorted(owner, nodes, "left").tolist()  # rows are grouped by report
            ends = np.searchsorted(owner, nodes, "right").tolist()
            for i, start, end in zip(nodes.tolist(), starts, ends, strict=True):
                row = values_of[slot[i], : int(state.gpu_count[slot[i]])].copy()
                row[index[start:end]] = values[start:end]
                setter(reports.node_id[i], row.tolist())

    def _note_util(self, reports: Reports) -> None:
        """Each report's mean GPU utilisation into its region's window."""
        counts = reports.gpu_counts()
        sums = np.bincount(reports.owner, weights=reports.util, minlength=len(reports))
        for i in np.flatnonzero(counts).tolist():
            window = self._windows.setdefault(reports.region[i], _Window())
            window.util_sum += float(sums[i]) / int(counts[i])
            window.samples += 1

    def _maybe_retry(self, region: str, *, now: bool = False) -> list[Outgoing]:
        """Retry the region's queue at most every `retry_every_s` (or now), after telemetry of
        that region.

        Releases retry at once; this sweep catches what no release triggered (a restart that
        restored queued jobs, capacity that came back healthy, a decision refused earlier).
        """
        at = time.monotonic()
        if not now and at - self._last_retry.get(region, 0.0) < self.retry_every_s:
            return []
        self._last_retry[region] = at
        return self.s.retry_queue(region) if self.s.queued_in(region) else []

    def on_grid(self, record: Mapping[str, Any]) -> None:
        self._carbon[record["region"]] = float(record["carbon_g_per_kwh"])
        self.s.state.set_region_signal(
            record["region"],
            carbon_g_per_kwh=float(record["carbon_g_per_kwh"]),
            price_per_kwh=float(record["price_per_kwh"]),
        )

    def mark_stale(self, *, behind: bool = False) -> list[Outgoing]:
        """Nodes whose heartbeat is older than `stale_after_s` stop taking work.

        Jobs running on a node that went stale are reported for rescheduling: one
        MigrationDecision each (reason NODE_UNHEALTHY, no target: the executor checkpoints or
        restarts them and the placer decides again when they are resubmitted).

        Silence is judged twice: on this worker's clock since the node's last report was
        applied, and in the stream's own time (`_Front`) since the report was written.
        `behind`: the worker's telemetry input holds records it has not read yet (a stall, a
        backlog), so the stream's time stands at the last report read. Then every node looks
        silent on the first clock but none on the second, and nothing is evicted for the
        worker's own lag; a node that stopped reporting is found once the backlog is read. A
        fleet that goes quiet as a whole leaves nothing to read: stale on both.
        """
        cutoff = time.monotonic() - self.stale_after_s
        front = self._front.now_ms(behind=behind)

        def silent(node_id: str, seen: float) -> bool:
            if seen >= cutoff or node_id in self.stale:
                return False
            if front is None:  # no report with a time read yet: silent unless some wait
                return not behind
            heard = self._heard.get(node_id)
            return not heard or front - heard > self.stale_after_s * 1000

        newly = {n for n, seen in self.s.last_seen.items() if silent(n, seen)}
        for node_id in sorted(newly):
            self.stale.add(node_id)
            self.s.state.set_node_healthy(node_id, False)
            log.warning("node stale node_id=%s after_s=%.1f", node_id, self.stale_after_s)
        if not newly:
            return []
        return [
            self._reschedule(job_id, held)
            for job_id, held in self.s.state.jobs.items()
            if not job_id.startswith(HOLD) and any(a.node_id in newly for a in held)
        ]

    def _reschedule(self, job_id: str, held: Any, why: str = "") -> Outgoing:
        region = (self.s.reservations.get(job_id) or {}).get("region", "")
        record = {
            "event_id": new_event_id(job_id, "stale", why or ",".join(sorted(self.stale))),
            "ts": now_ms(), "job_id": job_id, "from_region": region,
            "from_assignments": assignment_records(held), "to_region": "",
            "to_assignments": [], "reason": "NODE_UNHEALTHY", "expected_gain": 0.0,
        }  # fmt: skip
        log.warning("job on stale node reported for rescheduling job_id=%s", job_id)
        return outgoing(DECISIONS_MIGRATION, job_id, record, region=region,
                        partition_of=self.s.partition_of)  # fmt: skip

    def summaries(self) -> list[Outgoing]:
        """One RegionSummary per region known to this worker, closing the current window."""
        end = now_ms()
        out = []
        for region, view in self.s.state.region_views().items():
            window = self._windows.pop(region, _Window(start_ms=end))
            slots = self.s.state.slots(region)
            healthy = int(self.s.state.node_ok[slots].sum()) if len(slots) else 0
            prices = list(view.price_per_gpu_hour.values())
            record = {
                "event_id": new_event_id(),
                "ts": end,
                "region": region,
                "window_start": window.start_ms,
                "window_end": end,
                "nodes": len(slots),
                "healthy_nodes": healthy,
                "total_gpus_by_model": dict(view.total_gpus),
                "free_gpus_by_model": dict(view.free_gpus),
                "max_free_per_node_by_model": dict(view.largest_free_block),
                "util_mean": window.util_sum / window.samples if window.samples else 0.0,
                "queue_depth": self.s.queued_in(region),
                "price_per_gpu_hour_mean": sum(prices) / len(prices) if prices else 0.0,
                "carbon_g_per_kwh": self._carbon.get(region, view.carbon_g_per_kwh or 0.0),
            }
            self.s.state.set_queue_depth(region, self.s.queued_in(region))
            out.append(
                outgoing(
                    REGION_STATE, region, record, region=region, partition_of=self.s.partition_of
                )
            )
        return out
