"""Running jobs as tenancy sees them (`Running`), and their book: a dict by job id that also
keeps, as entries change, each (tenant, region, GPU class) cell's milli-GPUs and each
region's jobs.

Quota usage and a region's jobs are asked for on every arrival that cannot be placed and on
every retry pass; summing them from every running job made each ask cost O(running jobs)
(~3 ms with 2,500 running). Every way of changing the dict goes through `__setitem__`, `pop`,
`__delitem__` or `clear`, which keep the sums; the other mutators are refused.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from scorer.tenancy import Cell

__all__ = ["Running", "RunningBook"]

_MISSING: Any = object()


@dataclass(frozen=True)
class Running:
    """One held placement, as tenancy sees it."""

    job_id: str
    tenant: str
    region: str
    gpu_class: str
    priority: int
    class_name: str
    preemptible: bool
    protected: bool  # runs non-preemptible on the tenant's allowance
    milli: int  # GPUs held, in milli
    gpus: int
    cpu_milli: int
    memory_mib: int
    started_ms: int
    expected_end_ms: float  # inf: unknown
    checkpoint_ms: int  # last checkpoint (the start of this epoch restores from one)
    checkpoint_interval_s: int
    epoch: int = 0
    restore_s: float = 0.0  # a resumed epoch reloads its checkpoint this long before computing

    def last_checkpoint(self, now_ms: int) -> int:
        """Latest checkpoint: reported, or periodic every declared interval of compute, which
        begins once the restore is over (a resumed job's periodic checkpoints start late)."""
        computing = self.started_ms + round(self.restore_s * 1000)
        last = max(self.checkpoint_ms, min(now_ms, computing))  # nothing computed: nothing lost
        if self.checkpoint_interval_s > 0 and now_ms > computing:
            period = self.checkpoint_interval_s * 1000
            last = max(last, computing + (now_ms - computing) // period * period)
        return last

    def unsaved_s(self, now_ms: int) -> float:
        return max(0.0, (now_ms - self.last_checkpoint(now_ms)) / 1000)

    def to_entry(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in _RUNNING_FIELDS}  # all plain values
        out["expected_end_ms"] = None if math.isinf(self.expected_end_ms) else self.expected_end_ms
        return out

    @classmethod
    def from_entry(cls, data: Mapping[str, Any]) -> Running:
        values: dict[str, Any] = {
            f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data
        }
        end = values.get("expected_end_ms")
        values["expected_end_ms"] = math.inf if end is None else float(end)
        return cls(**values)


_RUNNING_FIELDS = tuple(f.name for f in dataclasses.fields(Running))


class RunningBook(dict[str, Running]):
    """job id -> Running, with `cells` (cell -> [jobs, milli]) and `in_region` kept up to
    date. A cell is listed while a job is booked in it, even one of 0 milli (CPU only)."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[Cell, list[int]] = {}
        self._by_region: dict[str, dict[str, Running]] = {}

    def in_region(self, region: str) -> Iterable[Running]:
        """The region's running jobs, in the order they were booked there (a job re-booked
        from another region comes last; the dict itself keeps its first position)."""
        return self._by_region.get(region, {}).values()

    def __setitem__(self, job_id: str, run: Running) -> None:
        old = self.get(job_id)
        if old is not None:
            self._count(old, -1)
            if old.region != run.region:
                self._by_region[old.region].pop(job_id, None)
        super().__setitem__(job_id, run)
        self._count(run, +1)
        self._by_region.setdefault(run.region, {})[job_id] = run

    def __delitem__(self, job_id: str) -> None:
        self.pop(job_id)

    def pop(self, job_id: str, default: Any = _MISSING) -> Any:
        if job_id not in self:
            if default is _MISSING:
                raise KeyError(job_id)
            return default
        run = super().pop(job_id)
        self._count(run, -1)
        self._by_region[run.region].pop(job_id, None)
        return run

    def clear(self) -> None:
        super().clear()
        self.cells.clear()
        self._by_region.clear()

    def __reduce__(self) -> Any:  # copy, deepcopy, pickle: rebuild the sums from the items
        return (RunningBook, (), None, None, iter(self.items()))

    def _count(self, run: Running, sign: int) -> None:
        cell = (run.tenant, run.region, run.gpu_class)
        counts = self.cells.setdefault(cell, [0, 0])
        counts[0] += sign
        counts[1] += sign * run.milli
        if counts[0] <= 0:
            del self.cells[cell]

    def _refused(self, *_: Any, **__: Any) -> NoReturn:
        raise TypeError("RunningBook changes only by item: book[job] = run, pop, del, clear")

    update = setdefault = popitem = __ior__ = _refused
