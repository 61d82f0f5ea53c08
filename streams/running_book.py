"""The tenancy book of running jobs: a dict by job id that also keeps, as entries change,
each (tenant, region, GPU class) cell's milli-GPUs and each region's jobs.

Quota usage and a region's jobs are asked for on every arrival that cannot be placed and on
every retry pass; summing them from every running job made each ask cost O(running jobs)
(~3 ms with 2,500 running). Every way of changing the dict goes through `__setitem__`, `pop`,
`__delitem__` or `clear`, which keep the sums; the other mutators are refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn

from scorer.tenancy import Cell

if TYPE_CHECKING:
    from streams.tenancy import Running

__all__ = ["RunningBook"]

_MISSING: Any = object()


class RunningBook(dict[str, "Running"]):
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
