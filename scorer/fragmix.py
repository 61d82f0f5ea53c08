"""FGD's fragmentation measure (Weng et al., "Beware of Fragmentation", USENIX ATC '23) against
an expected job mix that is learned from the jobs seen, starting from a prior.

A node's fragmentation for a task class is the free GPU capacity that class cannot use there:
all of it when the node cannot host the class at all (too few whole GPUs, no GPU with the share
free, or too little free host CPU or memory: a GPU without CPU next to it is stranded too);
otherwise the free capacity of the GPUs too small for the class's per-GPU request. The node's
expected fragmentation is the mix-weighted sum over classes; a placement is scored by how much
it grows (`growth`), and a region is measured by its sum (`region_fragmentation`).

Classes are (GPUs, milli per GPU) with the mean host CPU and memory of the jobs seen in them;
shares are grouped up to the next multiple of `SHARE_STEP` milli (a GPU with less free than the
group's bound counts as a fragment for it), which keeps the classes few and the measure cheap.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from scorer.errors import ScorerError
from scorer.state import SHARE_THRESHOLDS, ClusterState

__all__ = [
    "DEFAULT_MIX",
    "SHARE_STEP",
    "LearnedMix",
    "MixClasses",
    "Profile",
    "TaskMix",
    "fragmentation",
    "region_fragmentation",
]

FULL = 1000  # milli-GPU of a whole GPU
SHARE_STEP = int(SHARE_THRESHOLDS[0])
_MEMORY = 100_000  # jobs remembered for the learned distribution
_NONE = np.zeros(0, np.int64)


@dataclass(frozen=True)
class TaskMix:
    """Expected job mix: whole-GPU gang sizes and GPU shares (milli) with their probabilities."""

    whole: Mapping[int, float]
    shares: Mapping[int, float]

    def check(self) -> None:
        classes = {**self.whole, **self.shares}
        if any(size <= 0 for size in classes) or any(p < 0 for p in classes.values()):
            raise ScorerError(f"task mix needs positive sizes and probabilities: {self}")
        if any(share >= FULL for share in self.shares):
            raise ScorerError("a share class must be below 1000 milli-GPU")


# Gavel's recipe (70 % 1 GPU, 10 % 2, 20 % 4) plus 8-GPU gangs and inference shares
DEFAULT_MIX = TaskMix(whole={1: 0.55, 2: 0.10, 4: 0.15, 8: 0.10}, shares={250: 0.05, 500: 0.05})


@dataclass(frozen=True)
class MixClasses:
    """Task classes as arrays: GPUs, milli per GPU, host CPU and memory, probability."""

    gpus: np.ndarray
    milli: np.ndarray
    cpu: np.ndarray
    memory: np.ndarray
    p: np.ndarray

    @cached_property
    def columns(self) -> np.ndarray:
        """Column of SHARE_THRESHOLDS for each class's per-GPU request (whole GPUs: 1000)."""
        return _threshold_index(self.milli)

    @cached_property
    def shares(self) -> np.ndarray:
        """Indices of the share classes."""
        return np.flatnonzero(self.milli < FULL)

    @cached_property
    def _whole_table(self) -> np.ndarray:
        """By whole free GPUs w (0..64): the probability of the whole classes w GPUs can host."""
        w = np.arange(65)[:, None]
        whole = self.milli >= FULL
        return ((w >= self.gpus[None, :]) & whole[None, :]) @ self.p

    def whole_table(self, w: np.ndarray) -> np.ndarray:
        return self._whole_table[np.minimum(w, 64)]

    @cached_property
    def _sums(self) -> tuple[float, np.ndarray, np.ndarray, float, float]:
        """What every fragmentation pass reads of the mix: sum(p), the share classes' columns
        and probabilities, and the largest host CPU and memory a class needs (0: none)."""
        shares = self.shares
        cpu = float(self.cpu.max()) if self.cpu.any() else 0.0
        memory = float(self.memory.max()) if self.memory.any() else 0.0
        return float(self.p.sum()), self.columns[shares], self.p[shares], cpu, memory

    def host_limited(self, p: Profile) -> np.ndarray:
        """Nodes whose free host CPU or memory is below some class's need."""
        *_, cpu, memory = self._sums
        if not cpu and not memory:
            return _NONE
        limited = np.zeros(p.total.shape[0], bool)
        if cpu:
            limited |= p.cpu_declared & (p.cpu < cpu)
        if memory:
            limited |= p.mem_declared & (p.memory < memory)
        return np.flatnonzero(limited)

    @classmethod
    def of(cls, mix: TaskMix) -> MixClasses:
        mix.check()
        rows = [(k, FULL, p) for k, p in mix.whole.items()]
        rows += [(1, m, p) for m, p in mix.shares.items()]
        total = sum(p for *_, p in rows) or 1.0
        return cls(
            np.array([r[0] for r in rows], np.int64),
            np.array([r[1] for r in rows], np.int64),
            np.zeros(len(rows)),
            np.zeros(len(rows)),
            np.array([r[2] / total for r in rows]),
        )


def _share_group(milli: int) -> int:
    """Shares grouped up to the next multiple of SHARE_STEP (999 for the last group)."""
    return min(FULL - 1, -(-milli // SHARE_STEP) * SHARE_STEP) if milli < FULL else FULL


class LearnedMix:
    """The job mix expected next: a prior worth `prior_jobs` jobs plus every job seen (once).

    Without a prior it is FGD's own estimate (the distribution of the jobs seen so far).
    """

    def __init__(
        self, prior: TaskMix | None = DEFAULT_MIX, prior_jobs: float = 20.0, *, learn: bool = True
    ) -> None:
        self.learn = learn  # False: the prior alone, whatever is seen
        self.prior = MixClasses.of(prior) if prior is not None else None
        self.prior_jobs = prior_jobs if prior is not None else 0.0
        self._seen: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._counts: dict[tuple[int, int], list[float]] = {}  # key -> [n, cpu sum, mem sum]
        self._cached: MixClasses | None = None
        self._since_build = 0

    def observe(self, job_id: str, gpus: int, milli: int, cpu: int, memory: int) -> None:
        if gpus <= 0 or job_id in self._seen or not self.learn:
            return  # CPU-only jobs strand no GPU
        key = (gpus, _share_group(milli))
        self._seen[job_id] = key
        if key not in self._counts:
            self._cached = None  # a new class: rebuild now
        row = self._counts.setdefault(key, [0.0, 0.0, 0.0])
        row[0] += 1
        row[1] += cpu
        row[2] += memory
        if len(self._seen) > _MEMORY:
            old = self._counts[self._seen.popitem(last=False)[1]]
            old[0] -= 1  # its host figures stay in the sums: a small bias, never negative n
        self._since_build += 1

    def classes(self) -> MixClasses:
        # probabilities move little per job: rebuild after 2 % more jobs (or a new class)
        if self._cached is None or self._since_build > len(self._seen) // 50:
            self._cached, self._since_build = self._build(), 0
        return self._cached

    def _build(self) -> MixClasses:
        weights: dict[tuple[int, int], list[float]] = {}
        if self.prior is not None:
            for g, m, p in zip(self.prior.gpus, self.prior.milli, self.prior.p, strict=True):
                weights[(int(g), int(m))] = [p * self.prior_jobs, 0.0, 0.0, 0.0]
        for key, (n, cpu, mem) in self._counts.items():
            if n <= 0:
                continue
            row = weights.setdefault(key, [0.0, 0.0, 0.0, 0.0])
            row[0] += n
            row[1], row[2], row[3] = n, cpu / n, mem / n
        keys = [k for k, v in weights.items() if v[0] > 0] or [(1, FULL)]
        total = sum(weights.get(k, [1.0])[0] for k in keys)
        return MixClasses(
            np.array([k[0] for k in keys], np.int64),
            np.array([k[1] for k in keys], np.int64),
            np.array([weights.get(k, [0, 0, 0, 0])[2] for k in keys]),
            np.array([weights.get(k, [0, 0, 0, 0])[3] for k in keys]),
            np.array([weights.get(k, [1.0])[0] / total for k in keys]),
        )


@dataclass(frozen=True)
class Profile:
    """What FGD's measure needs of each node: whole free GPUs, total free milli, per share
    threshold T (`SHARE_THRESHOLDS`) the free milli of GPUs below T and the GPUs at or above T,
    and free host CPU/memory (with whether the node declares them)."""

    whole: np.ndarray
    total: np.ndarray
    below: np.ndarray  # nodes x thresholds
    atleast: np.ndarray  # nodes x thresholds
    cpu: np.ndarray
    memory: np.ndarray
    cpu_declared: np.ndarray
    mem_declared: np.ndarray

    @classmethod
    def of_state(cls, state: ClusterState, slots: np.ndarray) -> Profile:
        """The profile of live nodes, from the state's derived columns."""
        ok = state.node_ok[slots]
        if ok.all():  # the usual case: no masking copies
            whole, total = state.free_whole[slots], state.free_milli_total[slots]
            below, atleast = state.share_below[slots], state.share_atleast[slots]
        else:
            whole, total = state.free_whole[slots] * ok, state.free_milli_total[slots] * ok
            below = state.share_below[slots] * ok[:, None]
            atleast = state.share_atleast[slots] * ok[:, None]
        return cls(
            whole,
            total,
            below,
            atleast,
            state.free_cpu[slots],
            state.free_mem[slots],
            state.cpu_milli[slots] > 0,
            state.memory_mib[slots] > 0,
        )

    @classmethod
    def of_free(cls, free: np.ndarray) -> Profile:
        """From a nodes x GPUs matrix of free milli (0 for absent or sick GPUs), no host."""
        small = free[:, None, :] < SHARE_THRESHOLDS[None, :, None]
        n = free.shape[0]
        none = np.zeros(n, bool)
        return cls(
            (free >= FULL).sum(axis=1),
            free.sum(axis=1).astype(float),
            (small * free[:, None, :]).sum(axis=2),
            (~small).sum(axis=2),
            np.zeros(n),
            np.zeros(n),
            none,
            none,
        )

    def taking_whole(self, k: np.ndarray | int, cpu: int, memory: int) -> Profile:
        """After `k` whole GPUs (per node, or one number for all) and host resources are
        taken."""
        return Profile(
            self.whole - k,
            self.total - FULL * k,
            self.below,
            self.atleast - (k[:, None] if isinstance(k, np.ndarray) else k),
            self.cpu - cpu,
            self.memory - memory,
            self.cpu_declared,
            self.mem_declared,
        )

    def taking_share(self, x: np.ndarray, milli: int, cpu: int, memory: int) -> Profile:
        """After `milli` is taken from one GPU with `x` free (per node)."""
        y = x - milli
        t = SHARE_THRESHOLDS[None, :]
        below = self.below + (y[:, None] * (y[:, None] < t)) - (x[:, None] * (x[:, None] < t))
        atleast = self.atleast + (y[:, None] >= t).astype(int) - (x[:, None] >= t).astype(int)
        return Profile(
            self.whole - (x >= FULL),
            self.total - milli,
            below,
            atleast,
            self.cpu - cpu,
            self.memory - memory,
            self.cpu_declared,
            self.mem_declared,
        )

    def take(self, rows: np.ndarray) -> Profile:
        """The profile of `rows` (indices into this one)."""
        return Profile(
            self.whole[rows],
            self.total[rows],
            self.below[rows],
            self.atleast[rows],
            self.cpu[rows],
            self.memory[rows],
            self.cpu_declared[rows],
            self.mem_declared[rows],
        )


def _threshold_index(milli: np.ndarray) -> np.ndarray:
    """Column of SHARE_THRESHOLDS for a class's per-GPU request (whole GPUs: 1000)."""
    return np.minimum(-(-milli // SHARE_STEP), SHARE_THRESHOLDS.shape[0]) - 1


def fragmentation(profile: Profile, mix: MixClasses) -> np.ndarray:
    """Expected fragmentation (milli-GPU) of each node of `profile`.

    e.g. free [1000, 300, 0, 0], one class (1 GPU, 1000) -> the 300 is a fragment: 300;
    (2 GPUs, 1000) -> one whole GPU only: all 1300; the same node with too little free CPU for
    the class: all 1300 for either.

    Computed as total x sum(p) - sum over the classes a node can host of p x (total - small):
    for whole-GPU classes (total - small) is the whole GPUs' 1000 x w, so their part is a table
    lookup by w; only shares and nodes whose host CPU/memory may refuse a class pay per class.
    """
    p = profile
    p_sum, cols, p_shares, _, _ = mix._sums
    out = p.total * p_sum - FULL * p.whole * mix.whole_table(p.whole)
    if cols.size:
        usable = p.total[:, None] - p.below[:, cols]
        out -= _row_dot((p.atleast[:, cols] > 0) * usable, p_shares)
    limited = mix.host_limited(p)
    if limited.size:  # host refuses some classes on these nodes: take back what they counted
        fits_gpu = np.where(
            mix.milli[None, :] >= FULL,
            p.whole[limited, None] >= mix.gpus[None, :],
            p.atleast[limited][:, mix.columns] > 0,
        )
        host = (~p.cpu_declared[limited, None] | (p.cpu[limited, None] >= mix.cpu[None, :])) & (
            ~p.mem_declared[limited, None] | (p.memory[limited, None] >= mix.memory[None, :])
        )
        usable = p.total[limited, None] - p.below[limited][:, mix.columns]
        out[limited] += _row_dot((fits_gpu & ~host) * usable, mix.p)
    return out


def _row_dot(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """`m @ v`, each row summed in one fixed order: BLAS's sum for a row depends on where the
    row lies in memory, so two identical nodes could differ in the last bit (and a tie go to
    the later one), and a node's figure with the other nodes computed beside it."""
    return (m * v).sum(axis=1)


def region_fragmentation(state: ClusterState, region: str, mix: MixClasses) -> float:
    """FGD's cluster measure for one region: the sum of its nodes' expected fragmentation."""
    return float(fragmentation(Profile.of_state(state, state.slots(region)), mix).sum())
