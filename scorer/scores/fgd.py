"""Score: Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation", ATC '23).

FGD places a task where the expected fragmentation grows least. A node's fragmentation is
FGD's measure (`scorer.fragmix`, host CPU and memory included) against the task mix the node
faces (`scorer.scores.access`: the typical tasks that may use its GPU model; the free GPU of a
node counts whole as fragment for the tasks that may not, as the artifact's "no access"). The
mix is learned online from the GPU tasks placed (`observe`, at commit; each once, no prior);
scoring only reads it.

Which GPU a share takes: the one whose use grows fragmentation least (lowest index on a tie,
as the artifact's `calculateGpuShareFragExtendScore`); whole GPUs: the lowest-index free ones
(the artifact's `AllocateExclusiveGpuId`). A CPU-only task: the node where its host CPU and
memory grow fragmentation least (`rank_host_only`). Ties between nodes: inventory order (the
preset's first-fit tie-break). score = 50 - 50 x (F_after - F_before) / requested milli,
clipped to 0..100.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from scorer.fragmix import FULL, MixClasses, Profile, fragmentation
from scorer.framework import CycleContext
from scorer.scores.access import AccessMix
from scorer.scores.fgd_cache import FgdCache
from scorer.scores.fragmentation import growth_score
from scorer.state import ClusterState
from scorer.types import JobSpec

__all__ = ["NAME", "FgdScore", "expected_fragmentation", "share_growth"]

NAME = "fgd"
_NO_FIT = np.inf
_CODE = 2 * FULL  # node x _CODE + free milli (0..1000): one code per (node, free)


class FgdScore:
    name = NAME

    def __init__(self) -> None:
        self.mix = AccessMix()
        self._cache = FgdCache()  # per node and job shape, by row version

    def observe(self, job: JobSpec) -> None:
        """A placement of `job` was committed: it joins the task mix (each task once)."""
        self.mix.observe(job)

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        s = ctx.state
        # only the models among `slots`: a model's mix is built when first asked for
        present = np.flatnonzero(np.bincount(s.model[slots], minlength=len(s.models)))
        names, of = s.models, self.mix.for_model
        views = {m: of(names[m]) for m in present.tolist()}
        self._cache.sync(s, views)
        return self._cache.score(ctx, slots, partial(_score, ctx, views))

    def choose_share(self, ctx: CycleContext, slot: int) -> int:
        """The GPU of `slot` whose share grows fragmentation least (lowest index on a tie)."""
        s, job = ctx.state, ctx.job
        classes, _ = self.mix.for_model(s.models[int(s.model[slot])])
        one = np.array([slot])
        now = fragmentation(Profile.of_state(s, one), classes)
        return int(np.argmin(share_growth(s, one, job, classes, now)[0]))

    def choose_gpus(self, ctx: CycleContext, slot: int, k: int) -> tuple[int, ...]:
        """The `k` lowest-index whole free GPUs (any k whole GPUs leave the same fragments)."""
        s = ctx.state  # a node has a handful of GPUs: plain Python costs less than numpy
        rows = zip(s.gpu_exists[slot].tolist(), s.gpu_ok[slot].tolist(),
                   s.free_milli[slot].tolist(), strict=True)  # fmt: skip
        return tuple(g for g, (e, o, f) in enumerate(rows) if e and o and f == FULL)[:k]

    def rank_host_only(self, state: ClusterState, job: JobSpec, slots: np.ndarray) -> np.ndarray:
        """Growth of each node's fragmentation if a CPU-only task takes its host share there
        (lower first): a GPU node left without the CPU its GPUs' tasks need strands them."""
        out = np.zeros(slots.shape[0])
        models = state.model[slots]
        for m in np.unique(models):
            at = np.flatnonzero(models == m)
            classes, _ = self.mix.for_model(state.models[int(m)])
            before = Profile.of_state(state, slots[at])
            after = before.taking_whole(np.zeros(at.shape[0], np.int64), job.cpu_milli,
                                        job.memory_mib)  # fmt: skip
            out[at] = fragmentation(after, classes) - fragmentation(before, classes)
        return out


def _score(
    ctx: CycleContext,
    views: dict[int, tuple[MixClasses, float]],
    part: np.ndarray,
    m: int,
    classes: MixClasses,
    before: Profile,
    now: np.ndarray,
) -> np.ndarray:
    """The score on each node of `part` (nodes of GPU model `m`, whose mix is `classes`,
    profile `before` and fragmentation now `now`)."""
    s, job = ctx.state, ctx.job
    if ctx.fractional:
        grown = share_growth(s, part, job, classes, now, before).min(axis=1)
        requested: np.ndarray | float = float(job.gpu_milli)
    else:
        k = ctx.gpus_taken(part)  # one number for all unless spread
        taken = before.taking_whole(k, job.cpu_milli, job.memory_mib)
        grown = fragmentation(taken, classes) - now
        requested = (k * FULL).astype(float) if isinstance(k, np.ndarray) else float(k * FULL)
    # the tasks that may not use this model count all its free GPU here as fragment
    return growth_score(grown - views[m][1] * requested, requested)


def share_growth(
    s: ClusterState,
    slots: np.ndarray,
    job: JobSpec,
    classes: MixClasses,
    now: np.ndarray,
    before: Profile | None = None,
) -> np.ndarray:
    """Nodes x GPUs: fragmentation growth if the share goes to that GPU (inf: it does not fit);
    `before`: the nodes' profile, when read already.

    The growth depends on the node and the GPU's free milli only, so each (node, free milli)
    the share fits is one row of a single pass (an idle node's GPUs are one row, not eight);
    each row's arithmetic is its own, so the figures equal those of a pass per GPU."""
    free = np.where(s.gpu_exists[slots] & s.gpu_ok[slots], s.free_milli[slots], -1)
    out = np.full(free.shape, _NO_FIT)
    node, gpu = np.nonzero(free >= job.gpu_milli)
    if node.size:
        pairs, which = np.unique(node * _CODE + free[node, gpu], return_inverse=True)
        at, x = np.divmod(pairs, _CODE)
        rows = Profile.of_state(s, slots[at]) if before is None else before.take(at)
        after = rows.taking_share(x, job.gpu_milli, job.cpu_milli, job.memory_mib)
        out[node, gpu] = (fragmentation(after, classes) - now[at])[which]
    return out


def expected_fragmentation(free: np.ndarray, classes: dict[tuple[int, int], float]) -> np.ndarray:
    """Mix-weighted free milli-GPU each node cannot give to a task class, per row of `free`
    (host resources not considered).

    e.g. free [1000, 300, 0, 0], classes {(1 GPU, 1000): 1.0}: the 300 on the partly used GPU
    is a fragment -> 300; with {(2 GPUs, 1000): 1.0}: only one whole GPU -> all 1300.
    """
    keys = list(classes)
    total = sum(classes.values()) or 1.0
    mix = MixClasses(
        np.array([k[0] for k in keys], np.int64),
        np.array([k[1] if k[1] < FULL else FULL for k in keys], np.int64),
        np.zeros(len(keys)),
        np.zeros(len(keys)),
        np.array([classes[k] / total for k in keys]),
    )
    return fragmentation(Profile.of_free(free), mix)
