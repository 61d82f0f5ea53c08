"""Domain types of the decision core: what a job asks for, what a node offers, what was decided.

Field names of `JobSpec` and `NodeSpec` equal the Avro `JobSubmitted` / `NodeInventory` fields,
so the edge converts with `JobSpec(**fields)`; lists from Avro are frozen into tuples here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from functools import lru_cache
from types import MappingProxyType
from typing import Any, TypeVar

from scorer.errors import InvalidSpecError
from scorer.stacks import parse_stack

__all__ = [
    "FINETUNES",
    "KINDS",
    "OPTIMIZERS",
    "PRECISIONS",
    "SHARDINGS",
    "Assignment",
    "JobSpec",
    "NodeSpec",
    "PlacementResult",
    "RegionView",
]

KINDS = ("TRAINING", "INFERENCE", "BATCH", "NOTEBOOK")
PRECISIONS = ("FP32", "TF32", "BF16", "FP16", "FP8", "INT8")
# issue 16: how a training job holds its states (memory model, scorer/memory.py)
SHARDINGS = ("NONE", "ZERO1", "ZERO2", "ZERO3", "FSDP")  # "" = auto
FINETUNES = ("FULL", "LORA", "QLORA")
OPTIMIZERS = ("ADAM", "ADAM_8BIT", "SGD")
_ALIASES = {"ADAM8BIT": "ADAM_8BIT", "8BITADAM": "ADAM_8BIT", "ADAMW": "ADAM"}

_EMPTY: Mapping[str, float] = MappingProxyType({})
_Spec = TypeVar("_Spec", "JobSpec", "NodeSpec")


def _freeze(obj: object, name: str, value: object) -> None:
    # frozen dataclasses only allow this route to normalise a field after construction
    object.__setattr__(obj, name, value)


def _from_record(cls: type[_Spec], record: Mapping[str, Any]) -> _Spec:
    """Build from a decoded Avro record, dropping envelope and extra fields (event_id, ts...)."""
    names = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in record.items() if k in names})
    except TypeError as exc:  # a required field is missing
        raise InvalidSpecError(f"{cls.__name__}: {exc}") from exc


def choice(value: object, allowed: tuple[str, ...], field_name: str, empty_ok: bool = False) -> str:
    """Upper-case `value` without '-', '_' or spaces and match it to `allowed` ('zero-3' ->
    'ZERO3', 'adam-8bit' -> 'ADAM_8BIT'); raise InvalidSpecError naming the field."""
    return _choice(str(value or "").strip(), allowed, field_name, empty_ok)


@lru_cache(maxsize=1024)
def _choice(text: str, allowed: tuple[str, ...], field_name: str, empty_ok: bool) -> str:
    # every JobSpec asks three of these, nearly always with the same few texts
    if not text and empty_ok:
        return ""
    key = "".join(c for c in text.upper() if c not in "-_ ")
    by_key = {a.replace("_", ""): a for a in allowed}
    found = by_key.get(key) or by_key.get(_ALIASES.get(key, "").replace("_", ""))
    if found is None:
        raise InvalidSpecError(f"{field_name}: must be one of {', '.join(allowed)}, got {text!r}")
    return found


def _epoch_ms(value: int | datetime | None) -> int | None:
    """Avro timestamp-millis may arrive decoded as a datetime."""
    return int(value.timestamp() * 1000) if isinstance(value, datetime) else value


@dataclass(frozen=True)
class JobSpec:
    """A workload asking for GPUs (mirrors Avro `JobSubmitted`)."""

    job_id: str
    tenant: str = "default"
    kind: str = "BATCH"
    model_family: str = ""
    job_type: str = ""
    params_b: float = 0.0
    precision: str = "FP32"
    data_parallel: int = 1
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    gpu_count: int = 1
    gpu_milli: int = 1000
    min_gpu_memory_mib: int = 0
    cpu_milli: int = 0
    memory_mib: int = 0
    allowed_gpu_models: tuple[str, ...] = ()
    allowed_regions: tuple[str, ...] = ()
    allowed_zones: tuple[str, ...] = ()  # "region/zone" or "zone"; () = any (issue 33)
    cross_region_ok: bool = False
    data_region: str | None = None
    priority: int = 0
    preemptible: bool = True
    checkpointable: bool = True  # may be stopped and resumed from a checkpoint (migration)
    checkpoint_interval_s: int = 0
    deferrable_until_ts: int | None = None
    budget_usd: float | None = None
    cost_speed_preference: float = 0.5
    expected_duration_s: float | None = None
    reference_gpu_model: str | None = None
    total_steps: int | None = None
    grad_accum_steps: int = 1  # issue 13: micro-batches per optimizer step (one all-reduce)
    # -- issue 16: memory model (scorer/memory.py) and software stack; micro_batch and seq_len
    # also give the network model (scorer/network/demand.py) its tokens per micro-batch
    sharding: str = ""  # NONE, ZERO1, ZERO2, ZERO3, FSDP; "" = auto (FSDP when d > 1)
    finetune: str = "FULL"  # FULL, LORA, QLORA
    optimizer: str = "ADAM"  # ADAM, ADAM_8BIT, SGD
    optimizer_offload: bool = False  # master weights and moments in host memory
    micro_batch: int = 0  # per GPU (training); concurrent sequences (inference); 0 = 1
    seq_len: int = 0  # tokens per sequence; inference: context length; 0 = default
    activation_checkpointing: bool | None = None  # None = auto (on from 1B params)
    software_stack: str = "portable"  # what it was built for: cuda, cuda-12.1, rocm-6, ...
    priority_class: str | None = None  # tenancy: a named class (scorer.tenancy.classes)

    def __post_init__(self) -> None:
        _freeze(self, "sharding", choice(self.sharding, SHARDINGS, "sharding", empty_ok=True))
        _freeze(self, "finetune", choice(self.finetune, FINETUNES, "finetune"))
        _freeze(self, "optimizer", choice(self.optimizer, OPTIMIZERS, "optimizer"))
        _freeze(self, "software_stack", str(self.software_stack or "portable").strip().lower())
        parse_stack(self.software_stack)  # raises InvalidSpecError naming the field
        if self.micro_batch < 0 or self.seq_len < 0:
            raise InvalidSpecError(f"job {self.job_id}: micro_batch and seq_len must be >= 0")
        _freeze(self, "allowed_gpu_models", tuple(self.allowed_gpu_models))
        _freeze(self, "allowed_regions", tuple(self.allowed_regions))
        _freeze(self, "allowed_zones", tuple(self.allowed_zones))
        _freeze(self, "kind", str(self.kind).upper())
        _freeze(self, "precision", str(self.precision).upper())
        _freeze(self, "deferrable_until_ts", _epoch_ms(self.deferrable_until_ts))
        if self.gpu_count < 0:
            raise InvalidSpecError(f"job {self.job_id}: gpu_count must be >= 0")
        if self.gpu_count == 0 and self.cpu_milli <= 0 and self.memory_mib <= 0:
            raise InvalidSpecError(
                f"job {self.job_id}: a CPU-only job (gpu_count 0) needs cpu_milli or memory_mib"
            )
        if not 0 < self.gpu_milli <= 1000:
            raise InvalidSpecError(f"job {self.job_id}: gpu_milli must be in 1..1000")
        if self.gpu_milli < 1000 and self.gpu_count != 1:
            raise InvalidSpecError(f"job {self.job_id}: a GPU share needs gpu_count 1")
        if self.grad_accum_steps < 1:
            raise InvalidSpecError(f"job {self.job_id}: grad_accum_steps must be >= 1")

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> JobSpec:
        """From a decoded `JobSubmitted` (envelope fields are dropped)."""
        return _from_record(cls, record)

    @property
    def cpu_only(self) -> bool:
        """Asks for no GPU: it uses host CPU and memory only."""
        return self.gpu_count == 0

    @property
    def model_parallel(self) -> int:
        """GPUs one model replica is split over (tensor x pipeline)."""
        return max(1, self.tensor_parallel) * max(1, self.pipeline_parallel)


@dataclass(frozen=True)
class NodeSpec:
    """A GPU server's inventory (mirrors Avro `NodeInventory`)."""

    node_id: str
    region: str
    gpu_model: str
    gpu_count: int
    gpu_memory_mib: int
    zone: str = ""
    rack: str = ""
    cloud: str = ""
    interconnect: str = "pcie"
    nvlink_islands: tuple[tuple[int, ...], ...] = ()
    cpu_milli: int = 0
    memory_mib: int = 0
    price_per_gpu_hour: float = 0.0
    # -- issue 16: software stack ("cuda-12.4", "rocm-6.1", "cann-8.0"; "" = by GPU vendor)
    software_stack: str = ""
    compute_capability: str | None = None  # "9.0"; None = the catalogue's figure

    def __post_init__(self) -> None:
        _freeze(self, "software_stack", str(self.software_stack or "").strip().lower())
        parse_stack(self.software_stack)
        islands = tuple(tuple(int(g) for g in island) for island in self.nvlink_islands)
        _freeze(self, "nvlink_islands", islands)
        if self.gpu_count < 0:
            raise InvalidSpecError(f"node {self.node_id}: gpu_count must be >= 0")

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> NodeSpec:
        """From a decoded `NodeInventory` (envelope and extra fields are dropped)."""
        return _from_record(cls, record)


@dataclass(frozen=True)
class Assignment:
    """GPUs of one node given to a job; `gpu_milli` is the share of each listed GPU. Host CPU
    and memory the job holds on the node ride along (a CPU-only job lists no GPU)."""

    node_id: str
    gpu_indices: tuple[int, ...]
    gpu_milli: int = 1000
    cpu_milli: int = 0
    memory_mib: int = 0

    def __post_init__(self) -> None:
        _freeze(self, "gpu_indices", tuple(int(g) for g in self.gpu_indices))


@dataclass(frozen=True)
class RegionView:
    """What the router knows about one region (a `RegionSummary`, decoded)."""

    region: str
    free_gpus: Mapping[str, int] = field(default_factory=dict)  # whole free healthy GPUs by model
    largest_free_block: Mapping[str, int] = field(default_factory=dict)  # most on one node
    total_gpus: Mapping[str, int] = field(default_factory=dict)
    price_per_gpu_hour: Mapping[str, float] = field(default_factory=dict)  # cheapest by model
    queue_depth: int = 0
    carbon_g_per_kwh: float | None = None
    price_per_kwh: float | None = None
    headroom_gpus: int = 0  # kept free of low-priority work for forecast demand (headroom.py)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> RegionView:
        """From a decoded `RegionSummary` (the router's view of a region it does not own)."""
        return cls(
            region=record["region"],
            free_gpus=dict(record.get("free_gpus_by_model") or {}),
            largest_free_block=dict(record.get("max_free_per_node_by_model") or {}),
            total_gpus=dict(record.get("total_gpus_by_model") or {}),
            queue_depth=int(record.get("queue_depth") or 0),
            carbon_g_per_kwh=record.get("carbon_g_per_kwh"),
        )


@dataclass(frozen=True)
class PlacementResult:
    """The placer's proposal; the caller reserves it (policy vs mechanism)."""

    placed: bool
    assignments: tuple[Assignment, ...] = ()
    region: str | None = None
    gpu_model: str | None = None
    score: float = 0.0
    breakdown: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    expected_throughput: float | None = None
    expected_duration_s: float | None = None
    price_per_hour: float | None = None
    refusals: Mapping[str, int] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()
    never_fits: bool = False

    @property
    def gpu_total(self) -> int:
        """GPUs (or GPU shares) held by the placement."""
        return sum(len(a.gpu_indices) for a in self.assignments)
