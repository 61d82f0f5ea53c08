"""Score: fragmentation growth, FGD's measure (Weng et al., ATC '23) against the expected mix.

A node's fragmentation for a task class is the free GPU capacity that class cannot use there
(`scorer.fragmix`: all of it when the node cannot host the class, GPUs or host CPU/memory; else
the GPUs too small for it). The expected mix is learned from the jobs placed (`observe`, called
at commit; scoring only reads it), starting from a prior (`DEFAULT_MIX`, worth 20 jobs). A
placement is scored by how much the node's mix-weighted fragmentation grows: score = 50 - 50 x
growth / requested milli, clipped to 0..100 (consuming fragments scores above 50, stranding
capacity below).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict

import numpy as np

from scorer.fragmix import (
    DEFAULT_MIX,
    FULL,
    LearnedMix,
    MixClasses,
    Profile,
    TaskMix,
    fragmentation,
)
from scorer.framework import CycleContext, Memo, clamp_score
from scorer.state import ClusterState
from scorer.types import JobSpec

__all__ = [
    "DEFAULT_MIX",
    "NAME",
    "FragmentationScore",
    "NodeFragmentation",
    "TaskMix",
    "growth_score",
    "placement_growth",
]

NAME = "fragmentation"


class FragmentationScore:
    name = NAME

    def __init__(
        self, mix: TaskMix | None = DEFAULT_MIX, prior_jobs: float = 20.0, *, learn: bool = True
    ) -> None:
        self.mix = LearnedMix(mix, prior_jobs, learn=learn)
        self.expected = self.mix.classes()  # what scoring reads: rebuilt by `observe` only
        self.before = NodeFragmentation()

    def observe(self, job: JobSpec) -> None:
        """A placement of `job` was committed: it joins the mix (each job once)."""
        self.mix.observe(job.job_id, job.gpu_count, job.gpu_milli, job.cpu_milli, job.memory_mib)
        self.expected = self.mix.classes()

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        growth, requested = placement_growth(ctx, slots, self.expected, self.before)
        return growth_score(growth, requested)


class NodeFragmentation(Memo):
    """Each node's expected fragmentation now, and its growth under each job shape scored,
    cached by the state's row versions: a decision recomputes only the nodes that changed
    since (a reservation, a release, health), and every node when the mix does."""

    def __init__(self, shapes: int = 16) -> None:
        self._state: weakref.ref[ClusterState] | None = None
        self._mix: MixClasses | None = None
        self._values = np.zeros(0)
        self._versions = np.zeros(0, np.int64)
        self._shapes: OrderedDict[tuple[int, ...], _Growth] = OrderedDict()
        self._max_shapes = max(1, shapes)

    def __call__(self, state: ClusterState, slots: np.ndarray, mix: MixClasses) -> np.ndarray:
        self._check(state, mix)
        stale = slots[self._versions[slots] != state.row_version[slots]]
        if stale.size:
            self._values[stale] = fragmentation(Profile.of_state(state, stale), mix)
            self._versions[stale] = state.row_version[stale]
        return self._values[slots]

    def _check(self, state: ClusterState, mix: MixClasses) -> None:
        """Forget everything when the state, its size or the mix changed."""
        size = state.row_version.shape[0]
        same = self._state is not None and self._state() is state
        if not same or mix is not self._mix or self._values.shape[0] != size:
            self._state, self._mix = weakref.ref(state), mix
            self._values, self._versions = np.zeros(size), np.full(size, -1, np.int64)
            self._shapes.clear()

    def growth(
        self, ctx: CycleContext, slots: np.ndarray, mix: MixClasses
    ) -> tuple[np.ndarray, np.ndarray]:
        """`placement_growth` of the job's shape, recomputed only for the stale nodes."""
        state, job = ctx.state, ctx.job
        self._check(state, mix)
        key = _shape(ctx)
        cached = self._shapes.get(key)
        if cached is None:
            cached = self._shapes[key] = _Growth(state.row_version.shape[0])
            if len(self._shapes) > self._max_shapes:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(key)
        stale = slots[cached.versions[slots] != state.row_version[slots]]
        if stale.size:
            now = self(state, stale, mix)
            after, requested = _after(ctx, stale)
            cached.growth[stale] = fragmentation(after, mix) - now
            cached.requested[stale] = requested
            cached.versions[stale] = state.row_version[stale]
        if not ctx.spread and not ctx.fractional:  # one request for every node
            return cached.growth[slots], np.full(slots.shape[0], float(job.gpu_count * FULL))
        return cached.growth[slots], cached.requested[slots]


class _Growth:
    """Per node: fragmentation growth and requested milli for one job shape, with the row
    version they were computed at (-1: never)."""

    def __init__(self, size: int) -> None:
        self.growth = np.zeros(size)
        self.requested = np.zeros(size)
        self.versions = np.full(size, -1, np.int64)


def _shape(ctx: CycleContext) -> tuple[int, ...]:
    """What the growth on a node depends on besides the node's row."""
    job = ctx.job
    if ctx.fractional:
        return (0, job.gpu_milli, job.cpu_milli, job.memory_mib)
    if ctx.spread:
        return (2, job.gpu_count, max(1, job.tensor_parallel), job.cpu_milli, job.memory_mib)
    return (1, job.gpu_count, job.cpu_milli, job.memory_mib)


def _after(ctx: CycleContext, slots: np.ndarray) -> tuple[Profile, np.ndarray]:
    """Each node's profile once the job lands there, and the milli-GPU it requests there."""
    s, job = ctx.state, ctx.job
    before = Profile.of_state(s, slots)
    if ctx.fractional:
        free = np.where(s.gpu_exists[slots] & s.gpu_ok[slots], s.free_milli[slots], 0)
        x = np.where(free >= job.gpu_milli, free, FULL + 1).min(axis=1)  # best-fit GPU
        x = np.where(x > FULL, job.gpu_milli, x)  # no room (filtered out anyway)
        after = before.taking_share(x, job.gpu_milli, job.cpu_milli, job.memory_mib)
        return after, np.full(slots.shape[0], float(job.gpu_milli))
    k = np.broadcast_to(np.asarray(ctx.gpus_taken(slots)), (slots.shape[0],))
    after = before.taking_whole(k, job.cpu_milli, job.memory_mib)
    return after, k.astype(float) * FULL


def placement_growth(
    ctx: CycleContext,
    slots: np.ndarray,
    mix: LearnedMix | MixClasses,
    cache: NodeFragmentation | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Growth of each node's expected fragmentation if the job lands there, and the milli-GPU
    it requests there (with a cache: computed again only for nodes changed since)."""
    classes = mix if isinstance(mix, MixClasses) else mix.classes()
    if cache is not None:
        return cache.growth(ctx, slots, classes)
    after, requested = _after(ctx, slots)
    now = fragmentation(Profile.of_state(ctx.state, slots), classes)
    return fragmentation(after, classes) - now, requested


def growth_score(growth_milli: np.ndarray, requested_milli: np.ndarray | float) -> np.ndarray:
    """50 - 50 x growth / request: no growth 50, consuming only fragments 100.

    e.g. 1 GPU from a node with 8 whole free, mix 8-GPU p=0.1: growth 0.1 x 7000 = 700
    -> 50 - 35 = 15; from a node with 1 free: growth -(0.1+0.15+0.10) x 1000 -> 67.5.
    """
    return clamp_score(50.0 - 50.0 * growth_milli / np.maximum(requested_milli, 1.0))
