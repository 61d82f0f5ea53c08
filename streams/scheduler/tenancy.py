"""Tenancy mechanism: who runs what (the book), quota admission, fair queue order, wait reasons.

Policy is `scorer.tenancy` (pure); this module keeps the state it needs and asks it:
  - the book: one `Running` per held placement (tenant, class, priority, GPUs, CPU, memory,
    start, expected end, last checkpoint), rebuilt from the reservations table after a restart;
  - usage per (tenant, region, GPU class), preemptors already promised GPUs included;
  - the admission gate: which GPU classes a job may use under its quota (within nominal
    first, then borrowing), or why it must wait;
  - the queue order of a region (`scheduler.fairness`): tenants by weighted DRF share, within a
    tenant by `within_order` (default: priority, then age);
  - why each waiting job waits (QUOTA, CAPACITY, GANG_RESERVATION, BACKFILL, PREEMPTING,
    ALLOWANCE, QUOTA_RESERVATION), for `gpuflow queue`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scorer import ClusterState, JobSpec
from scorer.tenancy import (
    Cell,
    JobPriority,
    TenancyPolicy,
    admit,
    allowance_left,
    borrowed,
    nominal_of,
    resolve_priority,
)
from streams.scheduler.fairness import QUEUE_DEPTH, FairOrder, WithinOrder, priority_then_age
from streams.scheduler.running_book import Running, RunningBook

__all__ = [
    "ALLOWANCE",
    "BACKFILL",
    "CAPACITY",
    "GANG_RESERVATION",
    "PREEMPTING",
    "QUOTA",
    "QUOTA_RESERVATION",
    "Gate",
    "Running",
    "Tenancy",
]

QUOTA, CAPACITY, GANG_RESERVATION = "QUOTA", "CAPACITY", "GANG_RESERVATION"
BACKFILL, PREEMPTING, ALLOWANCE = "BACKFILL", "PREEMPTING", "ALLOWANCE"
QUOTA_RESERVATION = "QUOTA_RESERVATION"  # would delay the tenant's head job's quota
MILLI = 1000


@dataclass(frozen=True)
class Gate:
    """Quota's answer for one job in one region: model sets to try in order, or why not."""

    tiers: tuple[tuple[str, ...] | None, ...]  # None: any model the job allows
    borrowing: tuple[bool, ...] = ()
    code: str = ""
    reason: str = ""


class Tenancy:
    """Tenancy state of one worker's scheduler (see the module doc)."""

    def __init__(
        self,
        state: ClusterState,
        policy: TenancyPolicy | None = None,
        within_order: WithinOrder | None = None,
    ) -> None:
        self.state = state
        self.policy = policy or TenancyPolicy()
        self.within_order = within_order or priority_then_age
        self.running = RunningBook()
        self.claims: dict[str, Running] = {}  # preemptors: GPUs promised, not yet placed
        self.waits: dict[str, tuple[str, str]] = {}  # job_id -> (code, one line)
        self.reservations: dict[str, Any] = {}  # region -> GangHold (streams.scheduler.queueing)
        # region -> tenant -> QuotaReservation (streams.scheduler.quota_holds)
        self.quota_reservations: dict[str, dict[str, Any]] = {}
        # victims of pending preemptions (-> their preemptor): committed to leave, so their
        # GPUs count for their preemptor's claim, not for them (kept by `Preemptions`)
        self.leaving: Mapping[str, str] = {}
        self._memo: dict[Any, Any] | None = None  # within one pass (`one_pass`)
        self.version = 0  # bumps whenever a placement is booked or forgotten
        self.queue_depth = (
            QUEUE_DEPTH  # jobs per tenant a pass orders (`streams.scheduler.fairness`)
        )

    @contextlib.contextmanager
    def one_pass(self) -> Iterator[None]:
        """Within a retry pass usage and the GPU classes of a region are computed once (usage
        is kept up to date as jobs are booked); claims and victims do not change in a pass."""
        outer = self._memo is not None
        if not outer:
            self._memo = {}
        try:
            yield
        finally:
            if not outer:
                self._memo = None

    # ---- jobs ---------------------------------------------------------------------------
    def priority(self, job: JobSpec) -> JobPriority | str:
        return resolve_priority(job, self.policy.classes)

    def problem(self, job: JobSpec) -> str | None:
        """A reason to refuse the job outright (an unknown priority class), else None."""
        resolved = self.priority(job)
        return resolved if isinstance(resolved, str) else None

    def gpu_class(self, model: str | None) -> str:
        return self.policy.gpu_class(model or "")

    def record(
        self,
        job: JobSpec,
        region: str,
        gpu_model: str | None,
        *,
        now_ms: int,
        expected_s: float | None,
        epoch: int,
        restore_s: float = 0.0,
    ) -> Running:
        """Book a placement that was just committed (`restore_s`: it resumes from a checkpoint
        and reloads it first)."""
        prio = self.priority(job)
        if isinstance(prio, str):  # refused at the router; never placed
            raise ValueError(prio)
        run = Running(
            job_id=job.job_id,
            tenant=job.tenant,
            region=region,
            gpu_class=self.gpu_class(gpu_model),
            priority=prio.value,
            class_name=prio.class_name,
            preemptible=prio.preemptible,
            protected=prio.protection_requested,
            milli=job.gpu_count * job.gpu_milli,
            gpus=job.gpu_count,
            cpu_milli=job.cpu_milli,
            memory_mib=job.memory_mib,
            started_ms=now_ms,
            expected_end_ms=now_ms + expected_s * 1000 if expected_s else math.inf,
            checkpoint_ms=now_ms,
            checkpoint_interval_s=job.checkpoint_interval_s,
            epoch=epoch,
            restore_s=restore_s,
        )
        self.running[job.job_id] = run
        self.claims.pop(job.job_id, None)
        self._booked(run, +1)
        return run

    def forget(self, job_id: str) -> Running | None:
        run = self.running.pop(job_id, None)
        if run is not None:
            self._booked(run, -1)
        return run

    def invalidate(self) -> None:
        """Claims or victims changed inside a pass: recompute usage on the next ask."""
        if self._memo is not None:
            self._memo.pop("usage", None)

    def _booked(self, run: Running, sign: int) -> None:
        self.version += 1
        cached = self._memo.get("usage") if self._memo is not None else None
        if cached is not None:
            cell = (run.tenant, run.region, run.gpu_class)
            cached[cell] = cached.get(cell, 0) + sign * run.milli

    def checkpointed(self, job_id: str, at_ms: int) -> None:
        run = self.running.get(job_id)
        if run is not None and at_ms > run.checkpoint_ms:
            self.running[job_id] = dataclasses.replace(run, checkpoint_ms=at_ms)

    # ---- usage and quota ----------------------------------------------------------------
    def holding(self) -> list[Running]:
        """What counts against quotas and shares: running jobs not leaving, and claims."""
        staying = [r for r in self.running.values() if r.job_id not in self.leaving]
        return [*staying, *self.claims.values()]

    def usage(self) -> dict[Cell, int]:
        if self._memo is None:
            return self._usage()
        if "usage" not in self._memo:
            self._memo["usage"] = self._usage()
        return dict(self._memo["usage"])

    def _usage(self) -> dict[Cell, int]:
        """Milli-GPUs per cell of `holding()`: the book's sums, less the jobs leaving, plus
        the claims (both few: pending preemptions)."""
        book = self.running
        out = {cell: milli for cell, (_, milli) in book.cells.items()}
        gone: dict[Cell, int] = {}
        for job_id in self.leaving:
            run = book.get(job_id)
            if run is not None:
                cell = (run.tenant, run.region, run.gpu_class)
                out[cell] -= run.milli
                gone[cell] = gone.get(cell, 0) + 1
        for cell, jobs in gone.items():
            if book.cells[cell][0] == jobs:
                del out[cell]
        for claim in self.claims.values():
            cell = (claim.tenant, claim.region, claim.gpu_class)
            out[cell] = out.get(cell, 0) + claim.milli
        return out

    def holding_in(self, region: str) -> list[Running]:
        """`holding()` of one region."""
        staying = [r for r in self.running.in_region(region) if r.job_id not in self.leaving]
        return [*staying, *(c for c in self.claims.values() if c.region == region)]

    def protected(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for run in self.holding():
            if run.protected:
                out[(run.tenant, run.region)] = out.get((run.tenant, run.region), 0) + run.milli
        return out

    def classes_in(self, region: str) -> dict[str, tuple[str, ...]]:
        """GPU class -> models of it present in a region."""
        if self._memo is None:
            return self._classes_in(region)
        key = ("classes", region)
        if key not in self._memo:
            self._memo[key] = self._classes_in(region)
        return dict(self._memo[key])

    def _classes_in(self, region: str) -> dict[str, tuple[str, ...]]:
        slots = self.state.slots(region)
        models = {self.state.models[int(m)] for m in np.unique(self.state.model[slots])}
        out: dict[str, list[str]] = {}
        for model in sorted(models):
            out.setdefault(self.gpu_class(model), []).append(model)
        return {c: tuple(m) for c, m in out.items()}

    def gate(self, job: JobSpec, region: str, usage: Mapping[Cell, int] | None = None) -> Gate:
        """Model sets the job may try in `region` under its quota, nominal first."""
        prio = self.priority(job)
        if isinstance(prio, str):
            return Gate((), code=QUOTA, reason=prio)
        need = job.gpu_count * job.gpu_milli
        # the tenant's non-preemptible allowance, when it has one (summing what its protected
        # jobs hold walks every running job: not for tenants without a cap)
        capped = allowance_left(self.policy, {}, job.tenant, region) is not None
        if prio.protection_requested and capped:
            left = allowance_left(self.policy, self.protected(), job.tenant, region)
            if left is not None and left < need:
                why = f"{job.tenant} has {left / MILLI:g} non-preemptible GPUs left in {region}"
                return Gate((), code=ALLOWANCE, reason=f"allowance: {why}")
        if not self.policy.quotas_enabled:
            return Gate((None,), (False,))
        usage = self.usage() if usage is None else usage
        nominal: list[str] = []
        lent: list[str] = []
        reasons: list[str] = []
        for cls, models in self.classes_in(region).items():
            adm = admit(
                self.policy, usage, job.tenant, region, cls, need, preemptible=prio.preemptible
            )
            if not adm.ok:
                reasons.append(adm.reason)
            (lent if adm.borrowing else nominal if adm.ok else []).extend(models)
        tiers = [(tuple(nominal), False)] if nominal else []
        tiers += [(tuple(lent), True)] if lent else []
        if not tiers:
            return Gate(
                (), code=QUOTA, reason=reasons[0] if reasons else "quota: no GPU class here"
            )
        return Gate(tuple(t for t, _ in tiers), tuple(b for _, b in tiers))

    def within_nominal(
        self,
        tenant: str,
        region: str,
        gpu_class: str,
        need: int,
        usage: Mapping[Cell, int] | None = None,
    ) -> bool:
        usage = self.usage() if usage is None else usage
        used = usage.get((tenant, region, gpu_class), 0)
        return used + need <= nominal_of(self.policy, tenant, region, gpu_class)

    def borrowing(self, usage: Mapping[Cell, int], run: Running) -> int:
        """Milli-GPUs the job's tenant borrows in the job's cell (0 without quotas)."""
        if not self.policy.quotas_enabled:
            return 0
        return borrowed(self.policy, usage, run.tenant, run.region, run.gpu_class)

    # ---- fair order ---------------------------------------------------------------------
    def capacity(self, region: str) -> np.ndarray:
        slots = self.state.slots(region)
        s = self.state
        return np.array(
            [
                float(s.gpu_count[slots].sum()),
                float(s.cpu_milli[slots].sum()),
                float(s.memory_mib[slots].sum()),
            ]
        )

    def shares(self, region: str) -> dict[str, np.ndarray]:
        sums: dict[str, list[float]] = {}  # plain floats: an array per job cost more than the sum
        for run in self.holding_in(region):
            acc = sums.setdefault(run.tenant, [0.0, 0.0, 0.0])
            acc[0] += run.milli / MILLI
            acc[1] += run.cpu_milli
            acc[2] += run.memory_mib
        return {tenant: np.array(acc, float) for tenant, acc in sums.items()}

    def fair_order(self, region: str, waiting: Sequence[Mapping[str, Any]]) -> FairOrder:
        """Waiting jobs of a region in fair order (`streams.scheduler.fairness`)."""
        return FairOrder.of(
            waiting, self.within_order, self.shares(region), self.capacity(region),
            self.policy.weight, self.queue_depth,
        )  # fmt: skip

    # ---- reasons ------------------------------------------------------------------------
    def wait(self, job_id: str, code: str, reason: str) -> None:
        self.waits[job_id] = (code, reason)

    def done_waiting(self, job_id: str) -> None:
        self.waits.pop(job_id, None)
