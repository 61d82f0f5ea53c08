"""Extension points of the decision core (Kubernetes-scheduler style) and the per-cycle input.

A filter plugin returns a boolean mask over the candidate nodes (vectorised) and can explain one
node with a `Status` listing every reason; a score plugin returns 0..100 per feasible node.
"Does not fit" is a Status, never an exception. Scoring and filtering never learn: a plugin that
learns from the jobs placed (a job mix, pinned demand) implements `ObservePlugin`, which the
caller invokes once a placement is committed (`Placer.observe`), so a dry run changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from scorer.state import ClusterState
from scorer.throughput import ThroughputModel
from scorer.types import JobSpec
from scorer.units import gib

if TYPE_CHECKING:
    from scorer.gang import GangPlan
    from scorer.network.view import NetworkView

__all__ = [
    "CycleContext",
    "FilterPlugin",
    "Insufficient",
    "Memo",
    "ModelVectors",
    "ObservePlugin",
    "PlanFilterPlugin",
    "PlanScorePlugin",
    "ScorePlugin",
    "Status",
    "clamp_score",
]


@dataclass(frozen=True)
class Insufficient:
    """One unmet need: `requested` of `resource`, of which the node offers `free`.

    `unit` says how a person reads the numbers: "MiB" prints as GiB, "milli" as cores or
    GPU shares, "" as a plain count ("gpus: needs 8 free, has 3").
    """

    resource: str
    requested: float
    free: float
    unit: str = ""

    def __str__(self) -> str:
        return f"{self.resource}: needs {_human(self.requested, self.unit)}, has " + _human(
            self.free, self.unit
        )


def _human(value: float, unit: str) -> str:
    if unit == "MiB":
        return gib(value)
    if unit == "cpu_milli":
        return f"{value / 1000:g} cores"
    if unit == "gpu_milli":
        return f"{value / 1000:g} GPU"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.3g}"


@dataclass(frozen=True)
class Status:
    """Outcome of a filter for one node: success, or every reason it refuses."""

    code: str = "Success"  # Success | Unschedulable | UnschedulableAndUnresolvable
    reasons: tuple[Insufficient | str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.code == "Success"

    @classmethod
    def success(cls) -> Status:
        return cls()

    @classmethod
    def unschedulable(cls, *reasons: Insufficient | str) -> Status:
        """Refused now; may fit once capacity frees."""
        return cls("Unschedulable", reasons)

    @classmethod
    def unresolvable(cls, *reasons: Insufficient | str) -> Status:
        """Refused whatever happens on the node (model, memory, precision, region)."""
        return cls("UnschedulableAndUnresolvable", reasons)

    def __str__(self) -> str:
        return "; ".join(str(r) for r in self.reasons) or self.code


@dataclass(frozen=True)
class ModelVectors:
    """Per-GPU-model facts about one job, indexed like `ClusterState.models`."""

    speed: np.ndarray  # relative to the reference GPU, all GPUs on one node
    speed_spread: np.ndarray  # same, gang spread over nodes
    precision_ok: np.ndarray
    allowed: np.ndarray
    known: np.ndarray  # in the catalogue
    power_w: np.ndarray
    link_gbs: np.ndarray
    memory_need_mib: int  # per GPU

    @cached_property
    def listed(self) -> np.ndarray:
        """In the catalogue and in the job's allowed models."""
        return self.allowed & self.known

    @cached_property
    def best_speed(self) -> float:
        """Fastest model the job may use (precision and allow-list permitting)."""
        return float((self.speed * self.precision_ok * self.allowed).max(initial=0.0))

    @cached_property
    def runnable(self) -> np.ndarray:
        """Either placement shape has a non-zero speed."""
        return np.maximum(self.speed, self.speed_spread) > 0


@dataclass(frozen=True)
class CycleContext:
    """Frozen input of one placement cycle: the job, the state, the candidate nodes."""

    job: JobSpec
    state: ClusterState
    throughput: ThroughputModel
    slots: np.ndarray  # candidate node slots
    models: ModelVectors
    spread: bool = False  # scoring a gang spread over nodes
    network: NetworkView | None = None  # links and placed flows, for communication fit
    memo: dict[tuple[str, int], np.ndarray] = field(default_factory=dict, compare=False)
    # what several plugins ask of one spread plan (its communication fit), by id of the plan;
    # each entry holds its plan, so the id cannot be reused while the entry lives
    plans: dict[int, tuple[object, object]] = field(default_factory=dict, compare=False)

    @cached_property
    def node_model(self) -> np.ndarray:
        return self.state.model[self.slots]

    @property
    def fractional(self) -> bool:
        return self.job.gpu_milli < 1000

    @property
    def chunk(self) -> int:
        """Fewest GPUs a node must offer: a whole gang that cannot split, else one TP group."""
        job = self.job
        tp = max(1, job.tensor_parallel)
        return job.gpu_count if job.gpu_count <= tp else tp

    def gpus_taken(self, slots: np.ndarray) -> np.ndarray | int:
        """GPUs each node would take: the whole gang (one number for all), or its usable TP
        groups when spread."""
        if not self.spread:
            return self.job.gpu_count
        tp = max(1, self.job.tensor_parallel)
        usable = (self.state.free_whole[slots] // tp) * tp
        return np.minimum(usable, self.job.gpu_count)

    def speed_of(self, slots: np.ndarray) -> np.ndarray:
        """Relative speed on each node: model speed x measured per-GPU perf factor."""
        key = (
            "spread" if self.spread else "speed",
            id(slots),
        )  # several plugins ask for the same candidates in one cycle
        cached = self.memo.get(key)
        if cached is None:
            table = self.models.speed_spread if self.spread else self.models.speed
            cached = table[self.state.model[slots]] * self.state.perf_mean[slots]
            self.memo[key] = cached
        return cached


@runtime_checkable
class FilterPlugin(Protocol):
    """Hard constraint. `static` filters do not depend on occupancy or health."""

    name: str
    static: bool

    def filter(self, ctx: CycleContext) -> np.ndarray:
        """Boolean mask over `ctx.slots`: True where the node may host the job."""
        ...

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        """Every reason this node refuses the job (Success when it does not)."""
        ...


@runtime_checkable
class ScorePlugin(Protocol):
    """Soft preference: 0..100 per node, higher is better (a float when all nodes tie)."""

    name: str

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray | float: ...


@runtime_checkable
class PlanFilterPlugin(Protocol):
    """A filter that also judges a whole spread plan (nodes and GPUs of a gang)."""

    name: str

    def allows_plan(self, ctx: CycleContext, plan: GangPlan) -> Status: ...


@runtime_checkable
class PlanScorePlugin(Protocol):
    """A score that values a whole spread plan (0..100) instead of each node."""

    name: str

    def score_plan(self, ctx: CycleContext, plan: GangPlan) -> float: ...


@runtime_checkable
class ObservePlugin(Protocol):
    """A plugin that learns from placements: `observe` is told of each committed placement
    (once, after its reservation), never of a job only scored."""

    name: str

    def observe(self, job: JobSpec) -> None: ...


class Memo:
    """Marks a cache a plugin may fill while scoring: its content is a pure function of the
    plugin's learned state and the cluster's rows, so filling it changes no decision."""

    __slots__ = ()


def clamp_score(values: np.ndarray) -> np.ndarray:
    """Clip to 0..100 (np.clip's dispatch costs more than two ufuncs on small arrays)."""
    return np.minimum(np.maximum(values, 0.0), 100.0)
