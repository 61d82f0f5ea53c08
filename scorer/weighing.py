"""How the score plugins weigh into one 0..100 score: each job's weights (from its traits and
the overrides, under the load of where it may go), the weighted mean with each plugin's share,
and packing first (nodes beyond the slack of the best packing score go last). The placer
decides where a job goes; this decides how much each plugin counts there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from scorer.framework import CycleContext, ScorePlugin
from scorer.hostonly import HostRank
from scorer.state import ClusterState
from scorer.types import JobSpec
from scorer.weights import job_weights, under_load

__all__ = ["Weighing"]


class Weighing:
    """The score plugins with their weights; `packing_first`: plugins that rank first, only
    nodes within `packing_slack` points (0..100) of the best of their weighted mean being
    chosen from by the full score."""

    def __init__(
        self,
        plugins: Sequence[ScorePlugin],
        overrides: Mapping[str, float] | None = None,
        packing_first: Sequence[str] = (),
        packing_slack: float = 0.0,
    ) -> None:
        self.plugins = list(plugins)
        self.overrides = dict(overrides or {})
        self.packing_first = frozenset(packing_first)
        self.packing_slack = packing_slack
        self._cache: dict[tuple[object, ...], dict[str, float]] = {}

    def weights(self, job: JobSpec, free_share: float) -> dict[str, float]:
        """The job's weights where `free_share` of the GPUs is free."""
        return under_load(self.job_weights(job), free_share)

    def job_weights(self, job: JobSpec) -> dict[str, float]:
        # weights depend on a few job traits only: cache by them
        key = (
            job.cost_speed_preference,
            job.gpu_count > 1,
            job.model_parallel > 1,
            job.deferrable_until_ts is None,
            bool(job.data_region),
        )
        cached = self._cache.get(key)
        if cached is None:
            derived = job_weights(job, self.overrides)
            cached = {p.name: derived.get(p.name, 1.0) for p in self.plugins}
            if len(self._cache) < 4096:
                self._cache[key] = cached
        return cached

    def score(
        self, ctx: CycleContext, slots: np.ndarray, weights: Mapping[str, float]
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Weighted mean of the plugins' 0..100 scores, and each plugin's weighted share."""
        active = [(p, weights.get(p.name, 0.0)) for p in self.plugins]
        active = [(p, w) for p, w in active if w > 0]
        total_w = sum(w for _, w in active) or 1.0
        total = np.zeros(slots.shape[0])
        parts: dict[str, np.ndarray] = {}
        for plugin, w in active:
            part = np.asarray(plugin.score(ctx, slots) * (w / total_w))  # 0-d when all tie
            total += part
            parts[plugin.name] = part
        return total, parts

    def packing_guard(
        self, total: np.ndarray, parts: Mapping[str, np.ndarray], weights: Mapping[str, float]
    ) -> np.ndarray:
        """`total` with the nodes beyond `packing_slack` of the best packing score put last.

        e.g. packing scores 80, 78, 60 with slack 5: the third node is chosen only if the
        others are gone; among the first two the full score decides."""
        names = [n for n in parts if n in self.packing_first]
        if not names or total.ndim == 0 or total.shape[0] < 2:
            return total
        active = sum(w for n, w in weights.items() if w > 0 and n in parts)
        share = sum(weights[n] for n in names) / (active or 1.0)  # parts are weighted shares
        packing = np.zeros(total.shape[0])
        for n in names:
            packing += parts[n]
        packing /= max(share, 1e-9)
        keep = packing >= packing.max() - self.packing_slack - 1e-9
        return np.where(keep, total, total - 1e6)

    def hook(self, method: str) -> Callable[..., Any] | None:
        """`method` of the first score plugin that has it (GPU choice, CPU-only ranking)."""
        return next((getattr(p, method) for p in self.plugins if hasattr(p, method)), None)

    def host_rank(self) -> HostRank | None:
        """How CPU-only jobs rank nodes: a plugin's own order; when packing first, GPU-less
        nodes before any GPU node (the host CPU a CPU-only job takes on a GPU node can strand
        its GPUs later in the fill), that order among each."""
        rank = self.hook("rank_host_only")
        if rank is None or not self.packing_first:
            return rank
        plugin_rank = rank

        def gpu_less_first(state: ClusterState, job: JobSpec, slots: np.ndarray) -> np.ndarray:
            order = np.asarray(plugin_rank(state, job, slots), float)
            return order + np.where(state.gpu_count[slots] > 0, 1e9, 0.0)

        return gpu_less_first
