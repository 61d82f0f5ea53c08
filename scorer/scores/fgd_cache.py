"""FGD's per-node figures kept across decisions: each node's fragmentation now (against its GPU
model's mix) and its score under each job shape scored, keyed by the state's row versions.

A node's FGD score (the growth of its fragmentation, the share that may not use its model
counted as fragment) depends only on its row (free GPUs, shares, health, host CPU and memory),
on the mix its model sees (`AccessMix.for_model`) and on the job's shape (`shape_of`). So the
figures are computed again only for the nodes whose row changed since (a reservation, a
release, health), and for every node of a model whose mix was rebuilt. Each row's arithmetic is
its own: the figures equal those computed afresh (`tests/scorer/test_fgd_incremental.py`).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping

import numpy as np

from scorer.fragmix import MixClasses, Profile, fragmentation
from scorer.framework import CycleContext, Memo
from scorer.state import ClusterState

__all__ = ["FgdCache", "shape_of"]

# (nodes of one model, the model's index, its mix, their profile, their fragmentation now)
ScoreOf = Callable[[np.ndarray, int, MixClasses, Profile, np.ndarray], np.ndarray]


def shape_of(ctx: CycleContext) -> tuple[int, ...]:
    """What a node's growth depends on besides its row and its model's mix."""
    job = ctx.job
    if ctx.fractional:
        return (0, job.gpu_milli, job.cpu_milli, job.memory_mib)
    if ctx.spread:
        return (2, job.gpu_count, max(1, job.tensor_parallel), job.cpu_milli, job.memory_mib)
    return (1, job.gpu_count, job.cpu_milli, job.memory_mib)


class _Entry:
    """Per node: a figure and the row version it was computed at (-1: never)."""

    def __init__(self, size: int) -> None:
        self.values = np.zeros(size)
        self.versions = np.full(size, -1, np.int64)


class FgdCache(Memo):
    """Fragmentation now, and the score per (shape, node), under each node's model mix; at most
    `shapes` shapes are kept (least recently used go first)."""

    def __init__(self, shapes: int = 16) -> None:
        self._state: weakref.ref[ClusterState] | None = None
        self._size = 0
        self._held: dict[int, MixClasses] = {}  # the mix each model's figures are for
        self._now = _Entry(0)
        self._shapes: OrderedDict[tuple[int, ...], _Entry] = OrderedDict()
        self._max_shapes = max(1, shapes)

    def sync(self, state: ClusterState, views: Mapping[int, tuple[MixClasses, float]]) -> None:
        """Forget everything when the state or its size changed; the nodes of a model whose
        mix changed (`views`: by model index, the models about to be asked for, each with its
        mix and no-access share, as `AccessMix.for_model`) are computed again. A mix is known
        by identity, and held here so that its id cannot come back for another."""
        size = state.row_version.shape[0]
        if self._state is None or self._state() is not state or self._size != size:
            self._state, self._size = weakref.ref(state), size
            self._now, self._held = _Entry(size), {}
            self._shapes.clear()
        held = self._held
        changed = [m for m, (mix, _) in views.items() if held.get(m) is not mix]
        if not changed:
            return
        of_changed = np.zeros(len(state.models), bool)  # by model index: a lookup, not isin's sort
        of_changed[changed] = True
        stale = of_changed[state.model]
        for entry in (self._now, *self._shapes.values()):
            entry.versions[stale] = -1
        for m in changed:
            held[m] = views[m][0]

    def score(self, ctx: CycleContext, slots: np.ndarray, compute: ScoreOf) -> np.ndarray:
        """The score of the job's shape at `slots` (after `sync`); `compute` gives it for the
        nodes of one model changed since, from their profile (read once for both figures)."""
        state = ctx.state
        entry = self._entry(shape_of(ctx))
        stale = slots[entry.versions[slots] != state.row_version[slots]]
        if stale.size:
            for m, part in _by_model(state, stale):
                mix = self._held[m]  # sync() first
                profile = Profile.of_state(state, part)
                now = self._now_of(state, part, mix, profile)
                entry.values[part] = compute(part, m, mix, profile, now)
            entry.versions[stale] = state.row_version[stale]
        return entry.values[slots]

    def _now_of(
        self, state: ClusterState, part: np.ndarray, mix: MixClasses, profile: Profile
    ) -> np.ndarray:
        """Fragmentation now of `part` (nodes of one model, `profile` theirs, `mix` its mix):
        kept, or computed for all of `part` when any is stale (a row's figure does not depend
        on the rows beside it, so the fresh ones come out as kept)."""
        entry, versions = self._now, state.row_version[part]
        if (entry.versions[part] == versions).all():
            return entry.values[part]
        values = fragmentation(profile, mix)
        entry.values[part], entry.versions[part] = values, versions
        return values

    def _entry(self, key: tuple[int, ...]) -> _Entry:
        entry = self._shapes.get(key)
        if entry is None:
            entry = self._shapes[key] = _Entry(self._size)
            if len(self._shapes) > self._max_shapes:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(key)
        return entry


def _by_model(state: ClusterState, slots: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """`slots` grouped by GPU model index (one group without a sort when all share one)."""
    models = state.model[slots]
    first = int(models[0])
    if (models == first).all():
        return [(first, slots)]
    return [(int(m), slots[models == m]) for m in np.unique(models)]
