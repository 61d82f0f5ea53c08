"""A region's retry pass: waiting jobs in fair order, EASY backfill around the first one that
cannot start.

Order: tenants by weighted DRF share, lowest first (recomputed as jobs start), each tenant's jobs
by the scheduler's `within_tenant_order`. The first job that cannot start (not enough GPUs now)
gets a reservation at its earliest start (`scorer.tenancy.backfill`), from the expected end of
the jobs holding GPUs; a later job then starts only where it does not delay that start: it is
expected to end before it, or it keeps off the reserved GPUs that are free now (placed with
those GPUs held for the pass). Work per pass is bounded by `max_refusals`: refusals by the
placer (CAPACITY, BACKFILL). A job its tenant's quota refuses (QUOTA, ALLOWANCE) costs no
placer call and does not count: like Kueue's BestEffortFIFO, an inadmissible job never keeps
the jobs behind it from being tried, except its own tenant's: each tenant's oldest job of its
highest priority holds a quota reservation (`scheduler.quota_holds`), and another job of that
tenant starts only where it does not delay it (QUOTA_RESERVATION, no refusal counted).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from scorer import Assignment, JobSpec, PlacementResult
from scorer.holds import backfill_hold
from scorer.tenancy import QuotaReservation, Reservation, earliest_start, held_now
from streams.base.outbox import Outgoing
from streams.scheduler import quota_holds
from streams.scheduler.fairness import entry_priority
from streams.scheduler.tenancy import (
    ALLOWANCE,
    BACKFILL,
    CAPACITY,
    GANG_RESERVATION,
    QUOTA,
    QUOTA_RESERVATION,
)

if TYPE_CHECKING:
    from streams.scheduler.protocols import Retries

__all__ = ["GangHold", "free_at", "retry_region"]


@dataclass(frozen=True)
class GangHold:
    """A region's backfill reservation and the reserved GPUs that are free now."""

    reservation: Reservation
    free_now: Mapping[str, tuple[int, ...]]


def _whole_gpus(job: Mapping[str, Any]) -> int:
    return int(job.get("gpu_count", 1)) if int(job.get("gpu_milli", 1000)) >= 1000 else 0


# refusals of the quota gate, and of a quota reservation: no placer refusal counted
_GATED = frozenset((QUOTA, ALLOWANCE, QUOTA_RESERVATION))
# what the quota gate reads of a job (its answer is the same for jobs alike in these)
_GATE_FIELDS = ("tenant", "priority_class", "priority", "preemptible", "gpu_count", "gpu_milli",
                "allowed_gpu_models")  # fmt: skip
_HEAD_TRIES = 2  # jobs per pass that may try for the reservation (the first may wait on quota)


def retry_region(s: Retries, region: str, *, max_refusals: int = 8) -> list[Outgoing]:
    now = s.clock()
    waiting = [
        r for r in s.queue.values()
        if r["region"] == region and not r.get("preempting")
        and r.get("hold_until", 0) <= now  # deferred to a greener window: not yet
    ]  # fmt: skip
    if not waiting:
        s.tenancy.reservations.pop(region, None)
        s.tenancy.quota_reservations.pop(region, None)
        return []
    with s.tenancy.one_pass():
        return _pass(s, region, waiting, max_refusals)


def _pass(
    s: Retries, region: str, waiting: list[Mapping[str, Any]], max_refusals: int
) -> list[Outgoing]:
    backfill = s.tenancy.policy.backfill.enabled
    free = sum(s.state.free_gpus(region).values())
    order = s.tenancy.fair_order(region, waiting)
    out: list[Outgoing] = []
    hold: GangHold | None = None
    refused, head_tries = 0, _HEAD_TRIES if backfill else 0
    gates: dict[tuple[Any, ...], tuple[str, str]] = {}
    quotas = _QuotaHeads(s, region, waiting)
    for routed in order:
        job_id, need = routed["job"]["job_id"], _whole_gpus(routed["job"])
        quotas.seen(routed)
        if quotas.keeps_out(routed):
            continue  # would delay its tenant's quota reservation: no placer call, no hold
        if need > free:
            if hold is None and head_tries > 0:
                head_tries -= 1
                hold = reserve(s, routed, region)
            elif not (hold and hold.reservation.job_id == job_id):
                _short_of_gpus(s, routed, region, free, gates)
            continue
        placed, code = _try(s, routed, region, hold, quotas.holds)
        if placed:
            out.extend(placed)
            free -= need
            order.placed(routed)
            quotas.started(routed)
            gates.clear()  # usage grew: the quota's answers may change
            continue
        if code in _GATED:
            continue  # refused by quota alone: no placer refusal counted
        refused += 1
        if hold is None and head_tries > 0 and code == CAPACITY:
            head_tries -= 1
            hold = reserve(s, routed, region)
        if refused >= max_refusals:
            break
    if hold is not None:
        s.tenancy.reservations[region] = hold
    else:
        s.tenancy.reservations.pop(region, None)
    quotas.keep()
    return out


class _QuotaHeads:
    """A pass's quota reservations (`streams.scheduler.quota_holds`): one per tenant, for its oldest
    waiting job of its highest priority (priority, then age, whatever the within-tenant order:
    a speed-aware order ranks a gang the free GPUs cannot hold last, and would hand the
    reservation to a small job instead), made before any job of the pass starts and dropped
    when that job starts. Tenants the pass did not reach keep the last pass's."""

    def __init__(self, s: Retries, region: str, waiting: Sequence[Mapping[str, Any]]) -> None:
        self.s, self.region = s, region
        self.on = quota_holds.enabled(s)
        self.holds: dict[str, QuotaReservation] = {}
        self.tenants: set[str] = set()
        heads: dict[str, Mapping[str, Any]] = {}
        for routed in waiting if self.on else ():
            tenant = str(routed["job"].get("tenant", "default"))
            if tenant not in heads or _head_key(routed) < _head_key(heads[tenant]):
                heads[tenant] = routed
        for tenant, routed in heads.items():
            if s.tenancy.waits.get(routed["job"]["job_id"], ("",))[0] == ALLOWANCE:
                continue  # waits on its non-preemptible allowance, not on quota
            res = quota_holds.reserve_quota(s, routed, region)
            if res is not None:
                self.holds[tenant] = res

    def seen(self, routed: Mapping[str, Any]) -> None:
        self.tenants.add(str(routed["job"].get("tenant", "default")))

    def started(self, routed: Mapping[str, Any]) -> None:
        tenant = str(routed["job"].get("tenant", "default"))
        res = self.holds.get(tenant)
        if res is not None and res.job_id == routed["job"]["job_id"]:
            del self.holds[tenant]

    def keeps_out(self, routed: Mapping[str, Any]) -> bool:
        res = quota_holds.surely_blocked(self.s, routed, self.region, self.holds)
        if res is None:
            return False
        self.s.tenancy.wait(routed["job"]["job_id"], *quota_holds.wait_reason(self.s, res))
        return True

    def keep(self) -> None:
        if not self.on:
            self.s.tenancy.quota_reservations.pop(self.region, None)
            return
        last = self.s.tenancy.quota_reservations.get(self.region, {})
        kept = {t: r for t, r in last.items() if t not in self.tenants and r.job_id in self.s.queue}
        self.s.tenancy.quota_reservations[self.region] = {**kept, **self.holds}
        for res in self.holds.values():
            quota_holds.tell(self.s, res)


def _head_key(routed: Mapping[str, Any]) -> tuple[int, int, str]:
    """Highest priority, then the longest waiting."""
    return (-entry_priority(routed), int(routed.get("queued_ts", 0)), routed["job"]["job_id"])


def _short_of_gpus(
    s: Retries,
    routed: Mapping[str, Any],
    region: str,
    free: int,
    gates: dict[tuple[Any, ...], tuple[str, str]],
) -> None:
    """A job skipped for lack of free GPUs waits with CAPACITY, unless its quota refuses it
    anyway: then QUOTA (or ALLOWANCE) is what it waits for, and what `gpuflow queue` shows.
    `gates` memoizes the quota's answer per job shape until a job starts in the pass."""
    job = routed["job"]
    key = tuple(str(job.get(field)) for field in _GATE_FIELDS)
    if key not in gates:
        gate = s.tenancy.gate(s.spec_of(routed), region)
        gates[key] = (gate.code, gate.reason) if not gate.tiers else ("", "")
    code, reason = gates[key]
    if not code:
        code, reason = CAPACITY, f"needs {_whole_gpus(job)} GPUs, {free} free in {region}"
    s.tenancy.wait(job["job_id"], code, reason)


def respect_reservation(
    s: Retries, routed: Mapping[str, Any], region: str, result: PlacementResult
) -> tuple[PlacementResult, str, str]:
    """An arriving job placed outside a retry pass respects the region's reservations too (the
    ones the last pass made, while their jobs still wait): its tenant's quota reservation, then
    the gang reservation."""
    quota = quota_holds.blocking(s, routed, result, s.tenancy.quota_reservations.get(region, {}))
    if quota is not None:
        code, why = quota_holds.wait_reason(s, quota)
        return PlacementResult(placed=False, reasons=(why,)), code, why
    hold = s.tenancy.reservations.get(region)
    if hold is None or hold.reservation.job_id not in s.queue or _harmless(s, result, hold):
        return result, "", ""
    with _holding(s, hold):
        again, _, _ = s.propose(routed, region)
    if again.placed:
        return again, "", ""
    return again, BACKFILL, _delays(s, hold)


def _delays(s: Retries, hold: GangHold) -> str:
    start = (hold.reservation.start_ms - s.clock()) / 1000
    return (
        f"backfill: would delay the gang reservation of {hold.reservation.job_id} "
        f"(starts in ~{max(0.0, start):.0f}s)"
    )


def _try(
    s: Retries,
    routed: Mapping[str, Any],
    region: str,
    hold: GangHold | None,
    quotas: Mapping[str, QuotaReservation],
) -> tuple[list[Outgoing], str]:
    job_id = routed["job"]["job_id"]
    result, code, reason = s.propose(routed, region)
    if not result.placed:
        s.tenancy.wait(job_id, code, reason)
        return [], code
    if hold is not None and not _harmless(s, result, hold):
        with _holding(s, hold):
            result, code, reason = s.propose(routed, region)
        if not result.placed:
            s.tenancy.wait(job_id, BACKFILL, _delays(s, hold))
            return [], BACKFILL
    quota = quota_holds.blocking(s, routed, result, quotas)
    if quota is not None:
        s.tenancy.wait(job_id, *quota_holds.wait_reason(s, quota))
        return [], QUOTA_RESERVATION
    note = s.queue_why.pop(job_id, "")  # why the queue order tried it now (speed-aware)
    placed = s.commit({**routed, "_retry": True}, result, time.perf_counter_ns(), note=note)
    return ([placed] if placed is not None else []), ""


def _harmless(s: Retries, result: PlacementResult, hold: GangHold) -> bool:
    """Ends before the reservation starts, or keeps off the reserved GPUs free now."""
    duration = result.expected_duration_s
    if duration is not None and s.clock() + duration * 1000 <= hold.reservation.start_ms:
        return True
    for a in result.assignments:
        if set(a.gpu_indices) & set(hold.free_now.get(a.node_id, ())):
            return False
    return True


@contextlib.contextmanager
def _holding(s: Retries, hold: GangHold) -> Iterator[None]:
    """Hold the reserved GPUs that are still free, for one placement attempt."""
    parts = []
    for node, gpus in hold.free_now.items():
        slot = s.state.slot_of(node)
        free = tuple(g for g in gpus if s.state.free_milli[slot, g] >= 1000)
        if free:
            parts.append(Assignment(node, free))
    if parts:
        s.book.hold(backfill_hold(), parts)
    try:
        yield
    finally:
        s.book.release_hold(backfill_hold())


def reserve(s: Retries, routed: Mapping[str, Any], region: str) -> GangHold | None:
    """The backfill reservation of the first job that cannot start, and its wait reason."""
    spec = s.spec_of(routed)
    gate = s.tenancy.gate(spec, region)
    if not gate.tiers:
        s.tenancy.wait(spec.job_id, gate.code, gate.reason)
        return None
    models = gate.tiers[0]
    target = spec if models is None else s.restrict(spec, models)
    if target is None:
        return None
    times = free_at(s, target, region)
    tp = max(1, spec.tensor_parallel)
    chunk = spec.gpu_count if spec.gpu_count <= tp else tp
    reservation = earliest_start(spec.job_id, times, need=spec.gpu_count, chunk=chunk, tp=tp)
    if reservation is None:
        s.tenancy.wait(spec.job_id, CAPACITY, "no reservation: running jobs' ends are unknown")
        return None
    wait_s = max(0.0, (reservation.start_ms - s.clock()) / 1000)
    nodes = ", ".join(sorted(reservation.gpus))
    s.tenancy.wait(
        spec.job_id,
        GANG_RESERVATION,
        f"gang reservation: {reservation.gpu_count} GPUs on {nodes} in ~{wait_s:.0f}s",
    )
    return GangHold(reservation, held_now(reservation, times, s.clock()))


def free_at(s: Retries, spec: JobSpec, region: str) -> dict[str, list[float]]:
    """When each GPU of the nodes that could host `spec` becomes whole-free (ms): now when free,
    a holder's expected end (overdue ones: now), inf when unknown (holds, unhealthy GPUs)."""
    st, now = s.state, float(s.clock())
    usable = s.placer.usable(spec, region)
    usable = usable[st.node_ok[usable]]
    # one numpy pass for all the nodes, then each node's row cut to its GPUs
    rows = np.where(st.gpu_ok[usable], now, math.inf).tolist()
    times: dict[str, list[float]] = {
        st.spec(slot).node_id: row[:count]
        for slot, row, count in zip(
            usable.tolist(), rows, st.gpu_count[usable].tolist(), strict=True
        )
    }
    ends: dict[str, float] = {}
    for node_id, row in times.items():  # only the jobs on these nodes, not every running job
        for job_id in st.jobs_on(node_id):
            if job_id not in ends:
                run = s.tenancy.running.get(job_id)
                ends[job_id] = max(run.expected_end_ms, now) if run is not None else math.inf
            end = ends[job_id]
            for a in st.reservation(job_id) or ():
                if a.node_id != node_id:
                    continue
                for g in a.gpu_indices:
                    if g < len(row):
                        row[g] = max(row[g], end)
    return times
