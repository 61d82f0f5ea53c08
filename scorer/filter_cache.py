"""Static filters' masks kept across decisions.

A static filter's mask depends only on the nodes' inventory (model, region, memory, host
capacity, software stack: `ClusterState.inventory_version`), on the job's model vectors and on
what the filter's `static_key(job)` names. Such a mask is computed once per (region, job key)
and inventory version, so a stream of jobs of few kinds filters at the cost of the dynamic
filters (health, capacity) alone. A filter without `static_key` runs at every decision.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np

from scorer.framework import CycleContext, FilterPlugin
from scorer.state import ClusterState
from scorer.types import JobSpec

__all__ = ["StaticMasks"]

_MAX_KEYS = 4096


class StaticMasks:
    """Per filter of `filters`, its mask for a job key when it is static and keyed."""

    def __init__(
        self, state: ClusterState, filters: Sequence[FilterPlugin], *, keep: bool = True
    ) -> None:
        """`keep=False`: nothing is kept (every mask is computed at each decision)."""
        self._state = state
        self._filters = list(filters)
        self._keys: list[Callable[[JobSpec], Hashable] | None] = [
            getattr(f, "static_key", None) if f.static and keep else None for f in self._filters
        ]
        self._cache: dict[tuple[object, ...], list[np.ndarray | None]] = {}
        self._version = -1
        self.hits = 0  # decisions served from the cache (for tests and profiles)

    def masks(
        self, ctx: CycleContext, region: str | None, vectors_key: tuple[object, ...]
    ) -> list[np.ndarray | None]:
        """Per filter, its mask over `ctx.slots` (the live nodes of `region`), or None where
        the filter must run now. `vectors_key` is what `ctx.models` was made from."""
        version = self._state.inventory_version
        if version != self._version:  # a node came, went or changed: start afresh
            self._cache.clear()
            self._version = version
        job = ctx.job
        key = (region, vectors_key, *(k(job) for k in self._keys if k is not None))
        cached = self._cache.get(key)
        if cached is not None:
            self.hits += 1
        else:
            if len(self._cache) >= _MAX_KEYS:
                self._cache.clear()
            cached = [
                None if k is None else _frozen(f.filter(ctx))
                for f, k in zip(self._filters, self._keys, strict=True)
            ]
            self._cache[key] = cached
        return cached


def _frozen(mask: np.ndarray) -> np.ndarray:
    """A mask shared by every decision of its key: read-only, so nobody changes it."""
    out = np.array(mask, bool)  # a copy: the filter may hand back a view of its own state
    out.flags.writeable = False
    return out
