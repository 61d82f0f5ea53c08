"""The task mix as each GPU model sees it: FGD's typical tasks with the GPU models they may use.

FGD (Weng et al., ATC '23; its artifact's `GetNodePodFrag`) counts all the free GPU of a node as
fragment for a task class that may not use the node's GPU model ("no access"), so the mix a
node faces depends on its model: the classes whose allow-list names it (or is empty), with
their share of all GPU tasks seen, and `no_access`, the share that may not use it. Probabilities
are over every GPU task seen (each once), not renormalised per model: a model few tasks may use
has a small mix and a large `no_access`. Each model's view is built from the counts as they
stood at the last rebuild (a new class, or 2 % more tasks), whenever a model is first asked
for: the view is the same whichever jobs were scored in between.

e.g. seen 3 tasks of (1 GPU) unpinned and 1 of (1 GPU) pinned to T4: for T4 the mix is
{(1, 1000): 1.0}, no_access 0; for V100-16 {(1, 1000): 0.75}, no_access 0.25.
"""

from __future__ import annotations

import numpy as np

from scorer.fragmix import FULL, SHARE_STEP, MixClasses
from scorer.framework import Memo
from scorer.types import JobSpec

__all__ = ["AccessMix", "share_group"]

_REBUILD_SHARE = 50  # probabilities move little per task: rebuild after 2 % more tasks


def share_group(milli: int) -> int:
    """Shares grouped up to the next multiple of SHARE_STEP (999 for the last), as fragmix."""
    return min(FULL - 1, -(-milli // SHARE_STEP) * SHARE_STEP) if milli < FULL else FULL


Key = tuple[int, int, frozenset[str]]  # GPUs, share group, allowed models


class _Views(dict[str, tuple[MixClasses, float]], Memo):
    """Each model's view, built from the frozen counts when first asked for."""


class AccessMix:
    """GPU tasks seen, by (GPUs, share group, allowed models), and each model's view of them."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._counts: dict[Key, list[float]] = {}  # n, cpu sum, mem sum
        self._total = 0
        self._since = 0
        self._frozen: tuple[dict[Key, tuple[float, ...]], int] = ({}, 0)  # what views are of
        self._built = _Views()

    def observe(self, job: JobSpec) -> None:
        if job.gpu_count <= 0 or job.job_id in self._seen:
            return  # CPU-only tasks take no GPU: FGD's frag of them is the same on every node
        self._seen.add(job.job_id)
        key = (job.gpu_count, share_group(job.gpu_milli), frozenset(job.allowed_gpu_models))
        rebuild = key not in self._counts
        row = self._counts.setdefault(key, [0.0, 0.0, 0.0])
        row[0] += 1
        row[1] += job.cpu_milli
        row[2] += job.memory_mib
        self._total += 1
        self._since += 1
        if self._since > self._total // _REBUILD_SHARE:
            rebuild, self._since = True, 0
        if rebuild:
            self._frozen = ({k: tuple(v) for k, v in self._counts.items()}, self._total)
            self._built = _Views()

    def for_model(self, model: str) -> tuple[MixClasses, float]:
        """The classes a node of `model` can serve (probabilities over all GPU tasks seen) and
        the share of tasks that may not use it (`no_access`)."""
        built = self._built.get(model)
        if built is None:
            built = self._built[model] = self._build(model)
        return built

    def _build(self, model: str) -> tuple[MixClasses, float]:
        counts, seen_total = self._frozen
        merged: dict[tuple[int, int], list[float]] = {}
        for (gpus, milli, allowed), (seen, cpu, mem) in counts.items():
            if allowed and model not in allowed:
                continue
            row = merged.setdefault((gpus, milli), [0.0, 0.0, 0.0])
            row[0] += seen
            row[1] += cpu
            row[2] += mem
        total = max(seen_total, 1)
        keys = list(merged) or [(1, FULL)]
        n = np.array([merged.get(k, [0.0])[0] for k in keys])
        safe = np.maximum(n, 1.0)
        classes = MixClasses(
            np.array([k[0] for k in keys], np.int64),
            np.array([k[1] for k in keys], np.int64),
            np.array([merged.get(k, [0, 0, 0])[1] for k in keys]) / safe,
            np.array([merged.get(k, [0, 0, 0])[2] for k in keys]) / safe,
            n / total,
        )
        no_access = 1.0 - float(n.sum()) / total if seen_total else 0.0
        return classes, no_access
