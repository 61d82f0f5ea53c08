"""Preference: keep the last whole nodes whole for the gangs that need them.

Nodes are grouped by (region, GPU model, GPUs per node). A group keeps a reserve of whole-free
nodes sized by the expected mix (`scorer.fragmix.LearnedMix`): the share of expected GPU demand
from jobs that need more than half of such a node, times the group's nodes, rounded up (no
reserve when no such job is expected). A job that needs at most half a node does not take a GPU
of a group's last reserved whole nodes while another node can host it. A gang free to use any
model leaves a model's last whole node to gangs that can use only that model, once such a gang
has been seen. Load spreading then never breaks up the last whole nodes.

e.g. 45 A100 nodes of 8 GPUs, expected demand 16.7 % from 5-8-GPU gangs: reserve
ceil(0.167 x 45) = 8; with 8 whole left, a 1-GPU job goes to any other node that fits.
"""

from __future__ import annotations

import numpy as np

from scorer.fragmix import FULL, LearnedMix
from scorer.framework import CycleContext
from scorer.state import ClusterState

__all__ = ["NAME", "WholeNodeReserve", "reserve_share"]

NAME = "whole_node_reserve"


class WholeNodeReserve:
    name = NAME

    def __init__(self) -> None:
        self.mix = LearnedMix()
        self.pinned: set[tuple[str, int]] = set()  # (model, gang size) asked for by pinned gangs
        self._groups: tuple[int, np.ndarray] | None = None  # (id of the slots array, groups)

    def prefer(self, ctx: CycleContext, candidates: np.ndarray) -> np.ndarray:
        """Mask over `candidates`: True where placing the job keeps the reserves."""
        job, s = ctx.job, ctx.state
        self.mix.observe(job.job_id, job.gpu_count, job.gpu_milli, job.cpu_milli, job.memory_mib)
        size = s.gpu_count[candidates]
        whole = (s.free_whole[candidates] == size) & (size >= 2) & s.node_ok[candidates]
        need = job.gpu_count if job.gpu_milli >= FULL else 0
        if need >= 2 and len(job.allowed_gpu_models) == 1:
            self.pinned.add((ctx.throughput.catalog.canonical(job.allowed_gpu_models[0]), need))
        if not whole.any():
            return np.ones(candidates.shape[0], bool)
        group, left, nodes = self._group_of(s, ctx.slots, candidates)
        keep = whole & (2 * need <= size) & (left <= np.ceil(self._share(size) * nodes - 1e-9))
        if need >= 2 and not job.allowed_gpu_models:  # leave each model its last whole node
            keep |= whole & (left <= 1)
        return ~keep

    def _group_of(
        self, s: ClusterState, slots: np.ndarray, candidates: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each candidate's group, whole-free nodes left in it, and its live nodes."""
        cached = self._groups
        if cached is None or cached[0] != id(slots):  # membership changed: regroup
            key = (s.model[slots].astype(np.int64) * 4096 + s.region[slots]) * 256
            _, group = np.unique(key + s.gpu_count[slots], return_inverse=True)
            cached = self._groups = (id(slots), group)
        group = cached[1]
        live = s.node_ok[slots]
        whole = live & (s.free_whole[slots] == s.gpu_count[slots])
        at = group[np.searchsorted(slots, candidates)]
        return at, np.bincount(group, weights=whole)[at], np.bincount(group, weights=live)[at]

    def _share(self, size: np.ndarray) -> np.ndarray:
        return reserve_share(self.mix, size)

    def _pinned_reserve(self, s: ClusterState, candidates: np.ndarray) -> np.ndarray:
        """One whole node of a model and size that gangs pinned to that model asked for."""
        out = np.zeros(candidates.shape[0])
        for i, (m, k) in enumerate(zip(s.model[candidates], s.gpu_count[candidates], strict=True)):
            model = s.models[int(m)]
            if any((model, g) in self.pinned for g in range(int(k) // 2 + 1, int(k) + 1)):
                out[i] = 1.0
        return out


def reserve_share(mix: LearnedMix, size: np.ndarray) -> np.ndarray:
    """Per node size: the share of expected GPU demand from jobs needing more than half of it.

    e.g. mix 1 GPU p=.9, 8 GPUs p=.1: demand .9 + .8 = 1.7; for 8-GPU nodes .8 / 1.7 = 0.47,
    for 4-GPU nodes 0 (no 3-4-GPU jobs).
    """
    classes = mix.classes()
    demand = classes.p * classes.gpus * np.minimum(classes.milli, FULL) / FULL
    total = float(demand.sum()) or 1.0
    gpus = classes.gpus[None, :]
    big = (2 * gpus > size[:, None]) & (gpus <= size[:, None])
    return np.asarray((big * demand[None, :]).sum(axis=1) / total)
