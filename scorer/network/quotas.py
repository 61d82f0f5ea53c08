"""Low-churn quotas: re-issue a job's quota only when it moved enough, or before it expires.

`QuotaLedger.decide(target, capacity, now_ms)` compares the allocation's rates with the quotas
in force and returns the changes to emit:

- new (job, link): issue;
- |new - old| > max(rel_change x old, abs_change_gbps): issue (a phase change always moves a
  rate by more than that);
- in force but expiring within `renew_before_s`: renew at the new rate;
- in force but no longer wanted (job ended, moved, path changed): revoke (0 Gbit/s);
- otherwise hold the old quota.

Holding must never over-commit a link: a held *increase* is safe (the old quota is smaller),
a held *decrease* is not. After deciding, every link whose quotas in force would exceed its
allocatable capacity gets its held decreases issued, largest first, until it fits. Changes are
returned decreases (and revocations) first, so an executor applying them in order never
exceeds a link.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scorer.network.errors import NetworkError

__all__ = ["Hysteresis", "Issued", "QuotaChange", "QuotaLedger"]


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


@dataclass(frozen=True)
class QuotaChange:
    job_id: str
    link_id: str
    gbps: float
    valid_until_ms: int
    phase: str
    reason: str  # new | change | renew | capacity | revoke
    previous_gbps: float | None = None


class QuotaLedger:
    """Quotas in force, by (job_id, link_id)."""

    def __init__(self, hysteresis: Hysteresis | None = None) -> None:
        self.hysteresis = hysteresis or Hysteresis()
        self.issued: dict[tuple[str, str], Issued] = {}

    def decide(
        self,
        target: Mapping[tuple[str, str], float],
        capacity: Mapping[str, float],
        now_ms: int,
        phase: Mapping[str, str] | None = None,
    ) -> list[QuotaChange]:
        """The quota changes that bring the ledger close to `target` (see the module doc)."""
        h, phases = self.hysteresis, phase or {}
        until = now_ms + int(h.ttl_s * 1000)
        renew_at = int(h.renew_before_s * 1000)
        out: list[QuotaChange] = []
        held: list[tuple[tuple[str, str], float]] = []
        for key, gbps in target.items():
            old = self.issued.get(key)
            ph = phases.get(key[0], "COMM")
            if old is None:
                out.append(QuotaChange(*key, gbps, until, ph, "new"))
            elif abs(gbps - old.gbps) > max(h.rel_change * old.gbps, h.abs_change_gbps):
                out.append(QuotaChange(*key, gbps, until, ph, "change", old.gbps))
            elif old.valid_until_ms - now_ms <= renew_at:
                out.append(QuotaChange(*key, gbps, until, ph, "renew", old.gbps))
            else:
                held.append((key, gbps))
        for key, old in self.issued.items():
            if key not in target:
                out.append(QuotaChange(*key, 0.0, now_ms, old.phase, "revoke", old.gbps))
        out.extend(self._fit(out, held, capacity, until, phases))
        self._apply(out)
        return sorted(out, key=lambda c: (c.gbps >= (c.previous_gbps or 0.0), c.link_id, c.job_id))

    def _fit(
        self,
        changes: list[QuotaChange],
        held: list[tuple[tuple[str, str], float]],
        capacity: Mapping[str, float],
        until: int,
        phases: Mapping[str, str],
    ) -> list[QuotaChange]:
        """Issue held decreases on links the quotas in force would over-commit."""
        force = {(c.job_id, c.link_id): c.gbps for c in changes}
        total: dict[str, float] = {}
        for key, old in self.issued.items():
            total[key[1]] = total.get(key[1], 0.0) + force.get(key, old.gbps)
        for key, gbps in force.items():
            if key not in self.issued:
                total[key[1]] = total.get(key[1], 0.0) + gbps
        extra: list[QuotaChange] = []
        decreases = sorted(
            ((self.issued[k].gbps - g, k, g) for k, g in held if g < self.issued[k].gbps),
            reverse=True,
        )
        for cut, key, gbps in decreases:
            cap = capacity.get(key[1], float("inf"))
            if total.get(key[1], 0.0) > cap * (1 + 1e-9) + 1e-9:
                old = self.issued[key]
                extra.append(
                    QuotaChange(
                        *key, gbps, until, phases.get(key[0], old.phase), "capacity", old.gbps
                    )
                )
                total[key[1]] -= cut
        return extra

    def _apply(self, changes: list[QuotaChange]) -> None:
        for c in changes:
            if c.reason == "revoke":
                self.issued.pop((c.job_id, c.link_id), None)
            else:
                self.issued[(c.job_id, c.link_id)] = Issued(c.gbps, c.valid_until_ms, c.phase)

    def in_force(self, link_id: str, now_ms: int) -> float:
        """Sum of the unexpired quotas on a link."""
        return sum(
            q.gbps for k, q in self.issued.items() if k[1] == link_id and q.valid_until_ms > now_ms
        )

    def forget(self, job_id: str) -> None:
        for key in [k for k in self.issued if k[0] == job_id]:
            del self.issued[key]
