"""Low-churn quotas: re-issue a job's quota only when it moved enough, or before it expires.

`QuotaLedger.decide_arrays(alloc, now_ms)` compares an `Allocation`'s rates with the quotas
in force and returns the changes to emit (`decide(target, capacity, now_ms)` does the same for
a mapping of (job, link) -> Gbit/s):

- new (job, link): issue;
- |new - old| > max(rel_change x old, abs_change_gbps): issue (a phase change always moves a
  rate by more than that);
- in force but expiring within `renew_before_s`: renew at the new rate;
- in force but no longer wanted (job ended, moved, path changed): revoke (0 Gbit/s);
- otherwise hold the old quota.

Holding must never over-commit a link: a held *increase* is safe (the old quota is smaller),
a held *decrease* is not. After deciding, on every link whose quotas in force would exceed
its allocatable capacity the held decreases are issued too (reason `capacity`), so what is in
force is at most the allocation there. Changes are returned decreases (and revocations) first,
so an executor applying them in order never exceeds a link. Vectorised over sorted keys: a
round for thousands of jobs costs a few numpy passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np

from scorer.network.allocator import KEY_SHIFT, Allocation
from scorer.network.errors import NetworkError

__all__ = ["REASONS", "Hysteresis", "Issued", "QuotaChange", "QuotaLedger"]

REASONS = ("new", "change", "renew", "capacity", "revoke")
_LINK_MASK = (1 << KEY_SHIFT) - 1


@dataclass(frozen=True)
class Hysteresis:
    rel_change: float = 0.1
    abs_change_gbps: float = 0.05
    ttl_s: float = 30.0
    renew_before_s: float = 10.0

    def __post_init__(self) -> None:
        if self.ttl_s <= self.renew_before_s or self.rel_change < 0 or self.abs_change_gbps < 0:
            raise NetworkError("hysteresis: need ttl_s > renew_before_s and changes >= 0")


@dataclass(frozen=True)
class Issued:
    gbps: float
    valid_until_ms: int
    phase: str


class QuotaChange(NamedTuple):
    """One quota to emit (a NamedTuple: a busy round creates them by the thousand)."""

    job_id: str
    link_id: str
    gbps: float
    valid_until_ms: int
    phase: str
    reason: str  # new | change | renew | capacity | revoke
    previous_gbps: float | None = None
    demand_gbps: float = 0.0  # what the job asked for on this link in its phase


_CHANGE = partial(tuple.__new__, QuotaChange)  # a record from its fields, no Python call


class QuotaLedger:
    """Quotas in force, as arrays sorted by (job index, link index) key."""

    def __init__(self, hysteresis: Hysteresis | None = None) -> None:
        self.hysteresis = hysteresis or Hysteresis()
        self._keys = np.zeros(0, np.int64)
        self._gbps = np.zeros(0)
        self._until = np.zeros(0, np.int64)
        self._comm = np.zeros(0, bool)
        self._labels: dict[int, tuple[str, str]] = {}

    # ---- deciding --------------------------------------------------------------------------
    def decide_arrays(self, alloc: Allocation, now_ms: int) -> list[QuotaChange]:
        """The changes that bring the quotas in force close to `alloc` (module docstring)."""
        h = self.hysteresis
        keys, gbps, comm = alloc.keys, alloc.gbps, alloc.comm
        found, pos = _match(self._keys, keys)
        old = np.where(found, self._gbps[pos], 0.0) if self._keys.size else np.zeros(keys.size)
        until_old = np.where(found, self._until[pos], 0) if self._keys.size else np.zeros(keys.size)
        moved = np.abs(gbps - old) > np.maximum(h.rel_change * old, h.abs_change_gbps)
        reason = np.full(keys.shape[0], -1)
        reason[~found] = 0
        reason[found & moved] = 1
        renew = found & ~moved & (until_old - now_ms <= int(h.renew_before_s * 1000))
        reason[renew] = 2
        in_force = np.where(reason >= 0, gbps, old)
        links = keys & _LINK_MASK
        total = np.bincount(links, weights=in_force, minlength=alloc.capacity.shape[0])
        over = total > alloc.capacity * (1 + 1e-9) + 1e-9
        forced = (reason < 0) & (gbps < old) & over[links]
        reason[forced] = 3
        in_force[forced] = gbps[forced]
        until = np.where(reason >= 0, now_ms + int(h.ttl_s * 1000), until_old)
        gone = ~_match(keys, self._keys)[0]  # in force, no longer wanted
        fresh = {k: alloc.label(k) for k in keys[reason == 0].tolist()}
        replaced = self._replaced(gone, fresh, keys, old)
        out = self._revocations(gone, now_ms, replaced)  # decreases first
        out += self._changes(alloc, keys, gbps, old, reason, now_ms + int(h.ttl_s * 1000))
        self._labels.update(fresh)
        self._keys, self._gbps, self._until, self._comm = keys.copy(), in_force, until, comm.copy()
        return out

    def _changes(
        self,
        alloc: Allocation,
        keys: np.ndarray,
        gbps: np.ndarray,
        old: np.ndarray,
        reason: np.ndarray,
        until: int,
    ) -> list[QuotaChange]:
        idx = np.flatnonzero(reason >= 0)
        idx = idx[np.argsort(gbps[idx] >= old[idx], kind="stable")]  # decreases first
        if not idx.size:
            return []
        # records only for the quotas that change, built column by column: a busy round
        # emits thousands, and a NamedTuple's own __new__ is a Python call per record
        names = np.asarray(alloc.job_names, dtype=object)
        link_ids = np.asarray(alloc.link_ids, dtype=object)
        r, o = reason[idx], old[idx]
        previous = o.astype(object)
        previous[(r == 0) & (o == 0)] = None  # a first issue has no previous rate
        columns = (
            names[keys[idx] >> KEY_SHIFT].tolist(),
            link_ids[keys[idx] & _LINK_MASK].tolist(),
            gbps[idx].tolist(),
            [until] * idx.size,
            np.where(alloc.comm[idx], "COMM", "COMPUTE").tolist(),
            np.asarray(REASONS, dtype=object)[r].tolist(),
            previous.tolist(),
            alloc.demand[idx].tolist(),
        )
        return list(map(_CHANGE, zip(*columns, strict=True)))

    def _replaced(
        self,
        gone: np.ndarray,
        fresh: Mapping[int, tuple[str, str]],
        keys: np.ndarray,
        old: np.ndarray,
    ) -> set[tuple[str, str]]:
        """(job, link)s re-added under a new job index (a restart or a move): the new quota
        replaces the one in force, so it is not revoked, and its previous rate goes into `old`
        so a replacement that shrinks is ordered with the decreases."""
        before = {
            self._labels[k]: g
            for k, g in zip(self._keys[gone].tolist(), self._gbps[gone].tolist(), strict=True)
        }
        both = {k: before[lab] for k, lab in fresh.items() if lab in before}
        if both:
            old[np.searchsorted(keys, list(both))] = list(both.values())
        return {fresh[k] for k in both}

    def _revocations(
        self, gone: np.ndarray, now_ms: int, replaced: set[tuple[str, str]]
    ) -> list[QuotaChange]:
        out = []
        for i in np.flatnonzero(gone).tolist():
            key = int(self._keys[i])
            job, link = self._labels.pop(key)
            if (job, link) in replaced:
                continue
            phase = "COMM" if self._comm[i] else "COMPUTE"
            out.append(QuotaChange(job, link, 0.0, now_ms, phase, "revoke", float(self._gbps[i])))
        return out

    def decide(
        self,
        target: Mapping[tuple[str, str], float],
        capacity: Mapping[str, float],
        now_ms: int,
        phase: Mapping[str, str] | None = None,
    ) -> list[QuotaChange]:
        """Same, for a mapping (job, link) -> Gbit/s (tests, small callers)."""
        return self.decide_arrays(_allocation(self, target, capacity, phase or {}), now_ms)

    # ---- what is in force ------------------------------------------------------------------
    @property
    def issued(self) -> dict[tuple[str, str], Issued]:
        return {
            self._labels[k]: Issued(g, u, "COMM" if c else "COMPUTE")
            for k, g, u, c in zip(
                self._keys.tolist(),
                self._gbps.tolist(),
                self._until.tolist(),
                self._comm.tolist(),
                strict=True,
            )
        }

    def in_force(self, link_id: str, now_ms: int) -> float:
        """Sum of the unexpired quotas on a link."""
        return float(
            sum(
                q.gbps
                for (_, lk), q in self.issued.items()
                if lk == link_id and q.valid_until_ms > now_ms
            )
        )

    @property
    def in_force_gbps(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, Gbit/s) in force, sorted by key (after a round: the allocation's keys)."""
        return self._keys, self._gbps

    def next_expiry_ms(self) -> int | None:
        return int(self._until.min()) if self._until.size else None


class _Names:
    """Stable small integers for the names a mapping-based caller uses."""

    def __init__(self, ledger: QuotaLedger) -> None:
        self.jobs: list[str] = []
        self.links: list[str] = []
        self._job: dict[str, int] = {}
        self._link: dict[str, int] = {}
        for job, link in ledger._labels.values():  # keep the keys already in force
            self.job(job)
            self.link(link)

    def job(self, name: str) -> int:
        if name not in self._job:
            self._job[name] = len(self.jobs)
            self.jobs.append(name)
        return self._job[name]

    def link(self, name: str) -> int:
        if name not in self._link:
            self._link[name] = len(self.links)
            self.links.append(name)
        return self._link[name]


def _allocation(
    ledger: QuotaLedger,
    target: Mapping[tuple[str, str], float],
    capacity: Mapping[str, float],
    phase: Mapping[str, str],
) -> Allocation:
    names = _Names(ledger)
    remap = {
        old: (names.job(j) << KEY_SHIFT) | names.link(lk) for old, (j, lk) in ledger._labels.items()
    }
    _rekey(ledger, remap)
    pairs = sorted(
        ((names.job(j) << KEY_SHIFT) | names.link(lk), g) for (j, lk), g in target.items()
    )
    for lk in capacity:
        names.link(lk)
    keys = np.array([k for k, _ in pairs], np.int64)
    cap = np.array([capacity.get(lk, np.inf) for lk in names.links], float)
    comm = np.array(
        [phase.get(names.jobs[k >> KEY_SHIFT], "COMM") == "COMM" for k, _ in pairs], bool
    )
    return Allocation(
        link_ids=tuple(names.links), capacity=cap, load=np.zeros(cap.shape[0]), keys=keys,
        gbps=np.array([g for _, g in pairs], float), demand=np.zeros(keys.shape[0]), comm=comm,
        job_names=names.jobs,
    )  # fmt: skip


def _rekey(ledger: QuotaLedger, remap: Mapping[int, int]) -> None:
    """Renumber the keys in force (a mapping caller's names get fresh indices each call)."""
    if not remap:
        return
    new = np.array([remap[int(k)] for k in ledger._keys], np.int64)
    order = np.argsort(new)
    ledger._keys, ledger._gbps = new[order], ledger._gbps[order]
    ledger._until, ledger._comm = ledger._until[order], ledger._comm[order]
    ledger._labels = {remap[k]: v for k, v in ledger._labels.items()}


def _match(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which `keys` are in `sorted_keys`, and where (a valid index when there are any)."""
    if not sorted_keys.size:
        return np.zeros(keys.shape[0], bool), np.zeros(keys.shape[0], np.int64)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.shape[0] - 1)
    return sorted_keys[pos] == keys, pos
