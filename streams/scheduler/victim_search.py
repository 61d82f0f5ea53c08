"""Victim search for one preemptor: the running jobs that may go, and the cheapest sufficient
set (`scorer.tenancy.victims`), each candidate set checked by tentatively releasing its GPUs
and asking the placer and the quota gate whether the preemptor then fits."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scorer import JobSpec, PlacementResult
from scorer.tenancy import (
    Candidate,
    JobPriority,
    VictimPlan,
    borrowed,
    eligibility,
    select_victims,
)
from streams.scheduler.tenancy import Running

if TYPE_CHECKING:
    from streams.scheduler.protocols import Booked

__all__ = ["VictimSearch"]


@dataclass(frozen=True)
class _NoTenant:
    cohort: str | None = None


_NO_TENANT = _NoTenant()


class VictimSearch:
    """Searches victims in a scheduler's state; `targeted` victims are not candidates again."""

    def __init__(self, scheduler: Booked, targeted: Mapping[str, str]) -> None:
        self.s = scheduler
        self.targeted = targeted
        # searches run, searches that reached candidate sets, placement checks, plans found
        self.counts = {"searches": 0, "with_candidates": 0, "checks": 0, "plans": 0}

    @property
    def policy(self) -> Any:
        return self.s.tenancy.policy.preemption

    def classes(
        self, spec: JobSpec, region: str
    ) -> list[tuple[str | None, tuple[str, ...] | None]]:
        """Quota cells to search one by one (quotas count per GPU class); one search without."""
        if not self.s.tenancy.policy.quotas_enabled:
            return [(None, None)]
        allowed = set(spec.allowed_gpu_models)
        return [
            (cls, models)
            for cls, models in self.s.tenancy.classes_in(region).items()
            if not allowed or allowed & set(models)
        ]

    def run(
        self,
        spec: JobSpec,
        prio: JobPriority,
        region: str,
        cls: str | None,
        models: tuple[str, ...] | None,
    ) -> VictimPlan | None:
        tenancy = self.s.tenancy
        self.counts["searches"] += 1
        usage = tenancy.usage()
        need = spec.gpu_count * spec.gpu_milli
        quotas = tenancy.policy.quotas_enabled
        within = (
            quotas and cls is not None and tenancy.within_nominal(spec.tenant, region, cls, need)
        )
        cohort = (tenancy.policy.tenant(spec.tenant) or _NO_TENANT).cohort
        target = spec if models is None else self.s.restrict(spec, models)
        if target is None:
            return None
        # GPUs freed on nodes the job cannot use (model, memory, precision...) never place it:
        # the room pre-checks count only usable nodes, so no placer call is spent on them
        free = self._usable_free(target, region)  # healthy usable node -> whole GPUs free
        candidates: list[Candidate] = []
        slack: dict[str, int] = {}
        now = self.s.clock()
        lent_by_cell: dict[tuple[str, str], int] = {}
        for run in tenancy.running.in_region(region):
            if run.job_id in self.targeted:
                continue
            if cls is not None and run.gpu_class != cls:
                continue
            cell = (run.tenant, run.gpu_class)
            if cell not in lent_by_cell:
                lent_by_cell[cell] = tenancy.borrowing(usage, run)
            lent = lent_by_cell[cell]
            victim_cohort = (tenancy.policy.tenant(run.tenant) or _NO_TENANT).cohort
            cause = eligibility(
                preemptor_tenant=spec.tenant,
                preemptor_priority=prio.value,
                victim_tenant=run.tenant,
                victim_priority=run.priority,
                victim_preemptible=run.preemptible,
                quotas=quotas,
                same_cohort=cohort is not None and cohort == victim_cohort,
                victim_borrowing=lent > 0,
                preemptor_within_nominal=within,
                reclaim=self.policy.reclaim,
            )
            if cause is None:
                continue
            cand = self._candidate(run, now, lent > 0, cause, free.keys())
            if not quotas and not cand.node_gpus:
                continue  # frees nothing the job can use (with quotas it may free quota)
            if quotas and run.tenant != spec.tenant:
                slack[run.tenant] = lent
            candidates.append(cand)
        if not candidates:
            return None
        whole = spec.gpu_milli >= 1000
        tp = max(1, spec.tensor_parallel)
        chunk = (spec.gpu_count if spec.gpu_count <= tp else tp) if whole else 0
        self.counts["with_candidates"] += 1
        plan = select_victims(
            candidates,
            lambda victims: self._feasible(target, region, cls, victims),
            free=free,
            chunk=chunk,
            need=spec.gpu_count if whole else 0,
            slack=slack,
            max_victims=self.policy.max_victims,
        )
        self.counts["plans"] += plan is not None
        return plan

    def _candidate(
        self, run: Running, now: int, borrowing: bool, cause: str, usable: Collection[str]
    ) -> Candidate:
        """`node_gpus` counts only GPUs on `usable` nodes (what the evicted job frees for the
        preemptor); `gpus` and the lost work are what eviction costs, wherever it runs."""
        held = self.s.state.reservation(run.job_id) or ()
        per_node: dict[str, float] = {}
        for a in held:
            if a.node_id not in usable:
                continue
            per_node[a.node_id] = (
                per_node.get(a.node_id, 0) + len(a.gpu_indices) * a.gpu_milli / 1000
            )
        return Candidate(
            job_id=run.job_id,
            tenant=run.tenant,
            priority=run.priority,
            gpus=run.milli / 1000,
            milli=run.milli,
            node_gpus=per_node,
            lost_gpu_s=run.unsaved_s(now) * run.milli / 1000,
            borrowing=borrowing,
            cause=cause,
            started_ms=run.started_ms,
        )

    def _usable_free(self, spec: JobSpec, region: str) -> dict[str, float]:
        """Whole GPUs free on each healthy node of the region that passes the job's static
        filters (`Placer.usable`)."""
        st = self.s.state
        usable = self.s.placer.usable(spec, region)
        healthy = usable[st.node_ok[usable]]
        return {st.spec(int(i)).node_id: float(st.free_whole[int(i)]) for i in healthy}

    def _feasible(
        self, spec: JobSpec, region: str, cls: str | None, victims: tuple[Candidate, ...]
    ) -> PlacementResult | None:
        """Tentatively release the victims; the placement the job would get (quota too)."""
        st, tenancy = self.s.state, self.s.tenancy
        self.counts["checks"] += 1
        held = {v.job_id: st.reservation(v.job_id) for v in victims}
        for job_id in held:
            st.release(job_id)
        try:
            if cls is not None:
                usage = tenancy.usage()
                for v in victims:
                    run = tenancy.running[v.job_id]
                    cell = (run.tenant, run.region, run.gpu_class)
                    usage[cell] = usage.get(cell, 0) - run.milli
                gate = tenancy.gate(spec, region, usage)
                if not gate.tiers:
                    return None
            result = self.s.placer.place(spec, region, explain=False)
            return result if result.placed else None
        finally:
            for job_id, assignments in held.items():
                if assignments:
                    st.reserve(job_id, assignments)

    def quota_may_admit(
        self, spec: JobSpec, prio: JobPriority, region: str, relief: dict[Any, Any]
    ) -> bool:
        """Could any victim set bring the job within its quota? An upper bound: its quota gate
        with every job of its own tenant it outranks gone and other tenants' usage there at
        zero (victims only lower usage). False: a search cannot succeed, whatever runs.
        `relief` memoizes that usage per (tenant, priority) within one sweep."""
        tenancy = self.s.tenancy
        if not tenancy.policy.quotas_enabled:
            return True
        key = (spec.tenant, prio.value)
        if key not in relief:
            usage = tenancy.usage()
            for run in tenancy.running.in_region(region):
                if run.job_id in self.targeted:
                    continue
                cell = (run.tenant, run.region, run.gpu_class)
                if run.tenant != spec.tenant:
                    usage[cell] = 0
                elif run.preemptible and run.priority < prio.value:
                    usage[cell] = usage.get(cell, 0) - run.milli
            relief[key] = usage
        return bool(tenancy.gate(spec, region, relief[key]).tiers)

    def may_reclaim(self, routed: Mapping[str, Any], region: str) -> bool:
        """Within nominal in some class where a cohort member borrows (a cheap pre-check)."""
        tenancy = self.s.tenancy
        job = routed["job"]
        tenant = str(job.get("tenant", "default"))
        me = tenancy.policy.tenant(tenant)
        if me is None or me.cohort is None:
            return False
        usage = tenancy.usage()
        need = int(job.get("gpu_count", 1)) * int(job.get("gpu_milli", 1000))
        others = [m.name for m in tenancy.policy.cohort_members(me.cohort) if m.name != tenant]
        for cls in tenancy.classes_in(region):
            if not tenancy.within_nominal(tenant, region, cls, need, usage):
                continue
            if any(borrowed(tenancy.policy, usage, o, region, cls) for o in others):
                return True
        return False
