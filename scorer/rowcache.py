"""Per-node values that depend on a node's row and a job's shape, kept across decisions.

A score that is a function of each node's row (free GPUs, health, host resources) and of a few
job traits (its shape) need not be recomputed over every candidate for every decision: it is
kept per shape with the row version it was computed at (`ClusterState.row_version`, bumped
whenever a row's capacity or health changes), and only the rows changed since are computed
again. The values are the same as computing them afresh: each row's arithmetic is its own.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from scorer.framework import Memo
from scorer.state import ClusterState

__all__ = ["RowCache"]


class RowCache(Memo):
    """Values per (shape, node), recomputed for the nodes whose row changed; at most `shapes`
    shapes are kept (least recently used go first)."""

    def __init__(self, shapes: int = 16) -> None:
        self._state: weakref.ref[ClusterState] | None = None
        self._size = 0
        self._shapes: OrderedDict[Hashable, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._max_shapes = max(1, shapes)

    def get(
        self,
        state: ClusterState,
        shape: Hashable,
        slots: np.ndarray,
        compute: Callable[[np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """The values at `slots`; `compute(stale)` gives them for the rows changed since."""
        size = state.row_version.shape[0]
        if self._state is None or self._state() is not state or self._size != size:
            self._state, self._size = weakref.ref(state), size
            self._shapes.clear()
        entry = self._shapes.get(shape)
        if entry is None:
            entry = self._shapes[shape] = (np.zeros(size), np.full(size, -1, np.int64))
            if len(self._shapes) > self._max_shapes:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(shape)
        values, versions = entry
        stale = slots[versions[slots] != state.row_version[slots]]
        if stale.size:
            values[stale] = compute(stale)
            versions[stale] = state.row_version[stale]
        return values[slots]

    def clear(self) -> None:
        self._shapes.clear()
