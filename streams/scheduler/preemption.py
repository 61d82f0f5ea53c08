"""Preemption mechanism: search victims, emit one PreemptionDecision per victim, hold the GPUs
for the preemptor, place it once every victim is gone (or the grace period ends).

Policy (who may be evicted, which set is cheapest) is `scorer.tenancy.victims`, asked by
`streams.scheduler.victim_search`; this module commits it. A preemptor's pending state lives in its
queue entry (`preempting`: victims and their epochs, those gone, the target GPUs, the
deadline), so it survives a restart with the queue table; the GPUs of the target that are
free are held in the arrays under `hold:<job>` (recomputed on every change, never in the
reservations table), so no other job takes them.

    waiting job cannot be placed -> victims chosen -> PreemptionDecision x N, QUEUED(PREEMPTING)
    executor reports EVICTED (or FINISHED) for each victim -> its GPUs join the hold,
        the victim is requeued with its progress at epoch + 1
    last victim gone, or the deadline passed -> hold released, preemptor placed -> PLACED
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from infra.topics import DECISIONS_PREEMPTION
from scorer import Assignment, JobSpec, PlacementResult
from scorer.holds import preemptor_hold
from scorer.tenancy import RECLAIM, Candidate, JobPriority, VictimPlan
from streams.base.outbox import Outgoing, new_event_id, outgoing
from streams.scheduler import quota_holds
from streams.scheduler.convert import assignment_records, parse_assignments
from streams.scheduler.fairness import entry_priority
from streams.scheduler.tenancy import PREEMPTING
from streams.scheduler.victim_search import VictimSearch

if TYPE_CHECKING:
    from streams.scheduler.protocols import Preempts

__all__ = ["Preemptions"]

log = logging.getLogger(__name__)


class Preemptions:
    """Pending preemptions of one worker's scheduler."""

    def __init__(self, scheduler: Preempts) -> None:
        self.s = scheduler
        self.targeted: dict[str, str] = {}  # victim -> preemptor
        scheduler.tenancy.leaving = self.targeted
        self._fruitless: dict[str, int] = {}  # job -> tenancy version its search found nothing
        self.search = VictimSearch(scheduler, self.targeted)

    @property
    def policy(self) -> Any:
        return self.s.tenancy.policy.preemption

    # ---- deciding -----------------------------------------------------------------------
    def try_preempt(self, routed: Mapping[str, Any], region: str) -> list[Outgoing]:
        """Victims for a job that cannot be placed in `region`; [] when none would do."""
        if not self.policy.enabled:
            return []
        spec = self.s.spec_of(routed)
        prio = self.s.tenancy.priority(spec)
        if isinstance(prio, str):
            return []
        version = self.s.tenancy.version
        if self._fruitless.get(spec.job_id) == version:
            return []  # nothing started or stopped since its last search found no victims
        best: tuple[VictimPlan, str | None] | None = None
        for cls, models in self.search.classes(spec, region):
            plan = self.search.run(spec, prio, region, cls, models)
            if plan is not None and (best is None or plan.cost < best[0].cost):
                best = (plan, cls)
        if best is not None and self._delays_quota(routed, region, best[0]):
            best = None
        if best is None:
            self._fruitless[spec.job_id] = version
            return []
        self._fruitless.pop(spec.job_id, None)
        return self._commit(routed, region, spec, prio, *best)

    def _delays_quota(self, routed: Mapping[str, Any], region: str, plan: VictimPlan) -> bool:
        """A preemptor respects its tenant's quota reservation like any job that starts."""
        holds = self.s.tenancy.quota_reservations.get(region, {})
        leaving = {v.job_id for v in plan.victims}
        res = quota_holds.blocking(self.s, routed, plan.target, holds, leaving)
        if res is not None:
            self.s.tenancy.wait(routed["job"]["job_id"], *quota_holds.wait_reason(self.s, res))
        return res is not None

    def _commit(
        self,
        routed: Mapping[str, Any],
        region: str,
        spec: JobSpec,
        prio: JobPriority,
        plan: VictimPlan,
        cls: str | None,
    ) -> list[Outgoing]:
        s, now = self.s, self.s.clock()
        job_id = spec.job_id
        grace_ms = int(self.policy.grace_period_s * 1000)
        victims = {v.job_id: s.tenancy.running[v.job_id].epoch for v in plan.victims}
        target: PlacementResult = plan.target
        pending = {
            "victims": victims,
            "gone": [],
            "target": assignment_records(target.assignments),
            "deadline_ms": now + grace_ms,
            "since_ms": now,
        }
        entry = {k: v for k, v in routed.items() if k != "_retry"}
        waiting = {
            **entry,
            "region": region,
            "queued_ts": int(routed.get("queued_ts") or now),
            "prio": prio.value,
            "preempting": pending,
        }
        s.book.wait(job_id, waiting)
        claim = s.tenancy.record(
            spec, region, target.gpu_model, now_ms=now, expected_s=None, epoch=s.epoch_of(routed)
        )
        s.tenancy.forget(job_id)
        s.tenancy.claims[job_id] = claim
        for victim in victims:
            self.targeted[victim] = job_id
        s.tenancy.invalidate()
        self._rehold(job_id)
        names = ", ".join(victims)
        s.tenancy.wait(job_id, PREEMPTING, f"preempting {names}; placed when they stop")
        out = [self._decision(v, spec, prio, region, now, grace_ms) for v in plan.victims]
        reason = f"preempting {len(victims)} job(s): {names} (grace {grace_ms / 1000:g}s)"
        out.append(s.queued_decision(s.queue[job_id], PREEMPTING, reason, tag="preempting"))
        log.info("preemption job_id=%s victims=%s cause=%s", job_id, names, plan.victims[0].cause)
        return out

    def _decision(
        self,
        victim: Candidate,
        spec: JobSpec,
        prio: JobPriority,
        region: str,
        now: int,
        grace_ms: int,
    ) -> Outgoing:
        run = self.s.tenancy.running[victim.job_id]
        unsaved = run.unsaved_s(now)
        what = "reclaim" if victim.cause == RECLAIM else "priority"
        borrowing = ", borrowing" if victim.borrowing else ""
        record = {
            "event_id": new_event_id(victim.job_id, "preempt", str(run.epoch)),
            "ts": now,
            "job_id": victim.job_id,
            "for_job_id": spec.job_id,
            "region": region,
            "victim_assignments": assignment_records(self.s.state.reservation(run.job_id) or ()),
            "checkpoint_first": unsaved > self.policy.checkpoint_stale_s,
            "victim_priority": run.priority,
            "reason": (
                f"{what}: {spec.job_id} ({prio.class_name} {prio.value}, {spec.tenant}) needs "
                f"{spec.gpu_count * spec.gpu_milli / 1000:g} GPUs; {run.job_id} ({run.class_name} "
                f"{run.priority}, {run.tenant}{borrowing}) has {unsaved:.0f}s unsaved"
            ),
            "victim_epoch": run.epoch,
            "victim_tenant": run.tenant,
            "for_tenant": spec.tenant,
            "for_priority": prio.value,
            "cause": victim.cause,
            "grace_period_s": grace_ms / 1000,
            "deadline_ts": now + grace_ms,
            "expected_lost_gpu_s": victim.lost_gpu_s,
        }
        return outgoing(
            DECISIONS_PREEMPTION,
            victim.job_id,
            record,
            region=region,
            partition_of=self.s.partition_of,
        )

    # ---- holding and completing ---------------------------------------------------------
    def _rehold(self, job_id: str) -> None:
        """Hold the target GPUs that are free now (victims' GPUs join as they are released)."""
        st, hold = self.s.state, preemptor_hold(job_id)
        self.s.book.release_hold(hold)
        entry = self.s.queue.get(job_id) or {}
        pending = entry.get("preempting")
        if not pending:
            return
        parts = []
        for a in parse_assignments(pending["target"]):
            try:
                slot = st.slot_of(a.node_id)
            except KeyError:
                continue
            for g in a.gpu_indices:
                take = min(a.gpu_milli, int(st.free_milli[slot, g]))
                if take > 0:
                    parts.append(Assignment(a.node_id, (g,), take))
        if parts:  # cannot be refused: only free milli is taken
            self.s.book.hold(hold, parts)

    def on_gone(self, victim: str) -> list[Outgoing]:
        """A victim stopped (evicted, finished, failed or forced): maybe place its preemptor."""
        preemptor = self.targeted.pop(victim, None)
        entry = self.s.queue.get(preemptor) if preemptor else None
        if preemptor is None or entry is None or not entry.get("preempting"):
            return []
        pending = entry["preempting"]
        gone = sorted({*pending["gone"], victim})
        self.s.book.wait(preemptor, {**entry, "preempting": {**pending, "gone": gone}})
        self._rehold(preemptor)
        if set(gone) >= set(pending["victims"]):
            return self._complete(preemptor)
        return []

    def _complete(self, job_id: str) -> list[Outgoing]:
        """Every victim is gone: release the hold and place the preemptor like any job."""
        entry = self.s.queue[job_id]
        victims = ", ".join(entry["preempting"]["victims"])
        self.s.book.release_hold(preemptor_hold(job_id))
        self.s.tenancy.claims.pop(job_id, None)
        for victim in entry["preempting"]["victims"]:
            self.targeted.pop(victim, None)
        routed = {k: v for k, v in entry.items() if k != "preempting"}
        self.s.book.wait(job_id, routed)
        placed = self.s.place_waiting(routed, note=f"placed after preempting {victims}")
        if not placed:
            log.warning("preemptor not placed after its victims left job_id=%s", job_id)
        return placed

    def expire(self, now_ms: int, regions: Collection[str] | None = None) -> list[Outgoing]:
        """Deadlines passed: count the remaining victims as gone; complete what is complete."""
        out: list[Outgoing] = []
        for job_id, entry in list(self.s.queue.items()):
            pending = entry.get("preempting")
            if not pending or (regions is not None and entry["region"] not in regions):
                continue
            left = [v for v in pending["victims"] if v not in pending["gone"]]
            if not left:
                out.extend(self._complete(job_id))
            elif now_ms >= int(pending["deadline_ms"]):
                for victim in left:
                    log.warning("grace period over victim=%s preemptor=%s", victim, job_id)
                    out.extend(self.s.force_evict(victim, int(pending["victims"][victim])))
        return out

    def sweep(self, region: str) -> list[Outgoing]:
        """Waiting jobs that may preempt (or reclaim), a few per tick, in fair order. A job no
        eviction can bring within its quota (`VictimSearch.quota_may_admit`), or that would
        delay its tenant's quota reservation on any placement (`quota_holds.surely_blocked`),
        is passed over without using one of the tick's searches."""
        if not self.policy.enabled:
            return []
        tenancy = self.s.tenancy
        lowest = min(
            (r.priority for r in tenancy.running.in_region(region)
             if r.preemptible and r.job_id not in self.targeted),
            default=None,
        )  # fmt: skip
        if lowest is None:
            return []  # nobody to evict
        reclaim = tenancy.policy.quotas_enabled and self.policy.reclaim != "never"
        waiting = [
            r for r in self.s.queue.values()
            if r["region"] == region and not r.get("preempting")
            and r.get("hold_until", 0) <= self.s.clock()  # deferred: it waits by choice
            and (reclaim or entry_priority(r) > lowest)
        ]  # fmt: skip
        out: list[Outgoing] = []
        relief: dict[Any, Any] = {}
        holds = tenancy.quota_reservations.get(region, {})
        with tenancy.one_pass():
            tries = 0
            for routed in tenancy.fair_order(region, waiting):
                if tries >= self.policy.searches_per_tick:
                    break
                if self._fruitless.get(routed["job"]["job_id"]) == tenancy.version:
                    continue  # searched since anything last changed
                if entry_priority(routed) <= lowest and not self.search.may_reclaim(routed, region):
                    continue
                if not self._may_admit(routed, region, relief):
                    continue  # over its quota whatever is evicted: no search spent on it
                if quota_holds.surely_blocked(self.s, routed, region, holds):
                    continue  # would delay its tenant's quota reservation: no search either
                tries += 1
                out.extend(self.try_preempt(routed, region))
        return out

    def _may_admit(self, routed: Mapping[str, Any], region: str, relief: dict[Any, Any]) -> bool:
        spec = self.s.spec_of(routed)
        prio = self.s.tenancy.priority(spec)
        return not isinstance(prio, str) and self.search.quota_may_admit(spec, prio, region, relief)

    def restore(self) -> None:
        """After a rebuild: who is targeted, what is claimed, what is held. A victim whose
        placement the logs say ended counts as gone (the next tick completes its preemptor)."""
        self.targeted.clear()
        for job_id, entry in list(self.s.queue.items()):
            pending = entry.get("preempting")
            if not pending:
                continue
            gone = sorted(
                {*pending["gone"], *(v for v, e in pending["victims"].items() if self._ended(v, e))}
            )
            if gone != sorted(pending["gone"]):
                entry = {**entry, "preempting": {**pending, "gone": gone}}
                self.s.book.wait(job_id, entry)
            for victim in pending["victims"]:
                if victim not in gone:
                    self.targeted[victim] = job_id
            routed_spec = self.s.spec_of(entry)
            claim = self.s.tenancy.record(
                routed_spec, entry["region"], None, now_ms=self.s.clock(), expected_s=None,
                epoch=self.s.epoch_of(entry),
            )  # fmt: skip
            self.s.tenancy.forget(job_id)
            target = parse_assignments(pending["target"])
            model = self._model_of(target)
            self.s.tenancy.claims[job_id] = dataclasses.replace(
                claim, gpu_class=self.s.tenancy.gpu_class(model)
            )
            self._rehold(job_id)

    def _ended(self, victim: str, epoch: int) -> bool:
        entry = self.s.reservations.get(victim)
        return (
            entry is None
            or int(entry.get("epoch") or 0) != int(epoch)
            or bool(entry.get("released"))
        )

    def _model_of(self, target: tuple[Assignment, ...]) -> str | None:
        """The canonical GPU model of a placement (the catalogue name the quotas use)."""
        st = self.s.state
        for a in target:
            try:
                return st.models[int(st.model[st.slot_of(a.node_id)])]
            except KeyError:
                continue
        return None
