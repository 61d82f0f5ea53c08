"""A service: the model one replica runs, its SLO, replica bounds, where it may run and how.

`parse_service(mapping)` validates a service file's fields (one error naming the field) and
gives a frozen `ServiceSpec`; `replica_job(spec)` is the JobSpec one replica is placed as (the
inference memory model of `scorer.memory` checks that the model and its KV cache fit a GPU).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scorer.catalog import Catalog, default_catalog
from scorer.memory import memory_need_mib
from scorer.services.errors import ServiceSpecError
from scorer.types import JobSpec

__all__ = ["PRECISIONS", "ServiceSpec", "parse_service", "replica_job", "warm_target"]

PRECISIONS = ("FP32", "TF32", "BF16", "FP16", "FP8", "INT8")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_INTS = {  # field: (default, lowest)
    "gpus_per_replica": (1, 1),
    "batch": (8, 1),
    "context": (4096, 1),
    "min_replicas": (1, 0),
    "max_replicas": (64, 1),
    "warm_pool": (1, 0),
}
_FLOATS = {  # field: (default, lowest, highest)
    "params_b": (0.0, 0.0, 10_000.0),
    "slo_p99_ms": (230.0, 1.0, 600_000.0),
    "service_ms": (40.0, 0.1, 600_000.0),
    "max_zone_share": (0.5, 0.01, 1.0),
    "headroom": (0.15, 0.0, 2.0),
    "warm_share": (0.0, 0.0, 2.0),
    "scale_in_after_s": (600.0, 0.0, 86_400.0),
    "model_load_s": (90.0, 0.0, 3_600.0),
    "cold_start_s": (240.0, 0.0, 7_200.0),
}
_LISTS = ("command", "regions", "zones", "gpu_models")
KNOWN_FIELDS = frozenset(
    {"name", "model_family", "precision", "capacity_rps", "service_ms_on", "degrade"}
    | set(_INTS)
    | set(_FLOATS)
    | set(_LISTS)
)
DEGRADES = ("SHED", "QUEUE")


@dataclass(frozen=True)
class ServiceSpec:
    """An inference service (mirrors Avro `ServiceSpec`)."""

    name: str
    model_family: str = ""
    params_b: float = 0.0
    precision: str = "FP16"
    batch: int = 8  # concurrent sequences one replica serves (its slots; sizes the KV cache)
    context: int = 4096  # tokens per sequence (KV cache)
    gpus_per_replica: int = 1
    command: tuple[str, ...] = ()
    min_replicas: int = 1
    max_replicas: int = 64
    slo_p99_ms: float = 230.0
    service_ms: float = 40.0  # mean time a request holds a slot, on `service_ms_on`
    service_ms_on: str = ""  # GPU model service_ms was measured on ("" = the first allowed)
    capacity_rps: Mapping[str, float] = field(default_factory=dict)  # per replica at the SLO
    gpu_models: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()  # () = every zone of `regions`
    max_zone_share: float = 0.5  # no zone holds more than this share of the replicas
    headroom: float = 0.15  # plan for rate x (1 + headroom): it moves before the next look
    warm_pool: int = 1  # loaded standby replicas kept beside the serving ones
    warm_share: float = 0.0  # ... plus this share of the serving ones (a burst reserve)
    scale_in_after_s: float = 600.0  # hysteresis: need below the replicas this long first
    model_load_s: float = 90.0  # free GPU -> serving (neighbouring region or own zone)
    cold_start_s: float = 240.0  # reclaimed or powered-up GPU -> serving
    degrade: str = "SHED"  # what happens to requests beyond capacity: SHED or QUEUE


def _int(name: str, value: Any) -> int:
    default, low = _INTS[name]
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ServiceSpecError(name, f"must be an integer, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise ServiceSpecError(name, f"must be an integer, got {value!r}") from None
    if number < low:
        raise ServiceSpecError(name, f"must be >= {low}, got {number}")
    return number


def _float(name: str, value: Any) -> float:
    default, low, high = _FLOATS[name]
    if value is None:
        return default
    if isinstance(value, bool):
        raise ServiceSpecError(name, f"must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ServiceSpecError(name, f"must be a number, got {value!r}") from None
    if not low <= number <= high:
        raise ServiceSpecError(name, f"must be in [{low:g}, {high:g}], got {number:g}")
    return number


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split() if name == "command" else [v for v in value.split(",") if v]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise ServiceSpecError(name, f"must be a list of non-empty strings, got {value!r}")
    return tuple(v.strip() for v in value)


def _capacity(value: Any, catalog: Catalog) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ServiceSpecError("capacity_rps", f"must map GPU model to requests/s, got {value!r}")
    out: dict[str, float] = {}
    for model, rps in value.items():
        if str(model) not in catalog:
            raise ServiceSpecError(f"capacity_rps.{model}", "unknown GPU model")
        if isinstance(rps, bool) or not isinstance(rps, int | float) or rps <= 0:
            raise ServiceSpecError(f"capacity_rps.{model}", f"must be > 0, got {rps!r}")
        out[catalog.canonical(str(model))] = float(rps)
    return out


def _choice(name: str, value: Any, allowed: tuple[str, ...], default: str) -> str:
    text = str(value if value is not None else default).strip().upper()
    if text not in allowed:
        raise ServiceSpecError(name, f"must be one of {', '.join(allowed)}, got {value!r}")
    return text


def parse_service(doc: Mapping[str, Any], catalog: Catalog | None = None) -> ServiceSpec:
    """A validated ServiceSpec from a service file's mapping; ServiceSpecError names the field."""
    catalog = catalog or default_catalog()
    if not isinstance(doc, Mapping):
        raise ServiceSpecError("service", "the file must hold a mapping of fields")
    unknown = sorted(str(k) for k in doc if k not in KNOWN_FIELDS)
    if unknown:
        raise ServiceSpecError(unknown[0], "unknown field")
    name = str(doc.get("name") or "")
    if not _NAME.match(name):
        raise ServiceSpecError("name", f"must be 1-63 of a-z 0-9 . _ -, got {name!r}")
    lists = {n: _strings(n, doc.get(n)) for n in _LISTS}
    for model in lists["gpu_models"]:
        if model not in catalog:
            raise ServiceSpecError("gpu_models", f"unknown GPU model {model!r}")
    lists["gpu_models"] = tuple(catalog.canonical(m) for m in lists["gpu_models"])
    fields: dict[str, Any] = {n: _int(n, doc.get(n)) for n in _INTS}
    fields.update({n: _float(n, doc.get(n)) for n in _FLOATS})
    fields.update(lists)
    spec = ServiceSpec(
        name=name,
        model_family=str(doc.get("model_family") or ""),
        precision=_choice("precision", doc.get("precision"), PRECISIONS, "FP16"),
        degrade=_choice("degrade", doc.get("degrade"), DEGRADES, "SHED"),
        capacity_rps=_capacity(doc.get("capacity_rps"), catalog),
        service_ms_on=str(doc.get("service_ms_on") or ""),
        **fields,
    )
    return _checked(spec, catalog)


def _checked(spec: ServiceSpec, catalog: Catalog) -> ServiceSpec:
    if spec.max_replicas < spec.min_replicas:
        raise ServiceSpecError(
            "max_replicas",
            f"must be >= min_replicas ({spec.min_replicas}), got {spec.max_replicas}",
        )
    if not spec.regions:
        raise ServiceSpecError("regions", "name at least one region")
    if spec.service_ms_on and spec.service_ms_on not in catalog:
        raise ServiceSpecError("service_ms_on", f"unknown GPU model {spec.service_ms_on!r}")
    for model in spec.gpu_models:
        have = catalog[model].memory_mib
        need = memory_need_mib(replica_job(spec))
        if need > have:
            raise ServiceSpecError(
                "gpus_per_replica", f"one replica needs {need} MiB per GPU, {model} has {have}"
            )
    return spec


def replica_job(spec: ServiceSpec, replica: int = 0) -> JobSpec:
    """The job one replica is placed as: online-inference, never preempted, tensor-parallel
    over its GPUs, the KV cache of `batch` sequences of `context` tokens."""
    return JobSpec(
        job_id=f"svc-{spec.name}-{replica}",
        tenant=spec.name,
        kind="INFERENCE",
        model_family=spec.model_family,
        params_b=spec.params_b,
        precision=spec.precision,
        tensor_parallel=spec.gpus_per_replica,
        gpu_count=spec.gpus_per_replica,
        allowed_gpu_models=spec.gpu_models,
        allowed_regions=spec.regions,
        priority=1000,
        preemptible=False,
        checkpointable=False,
        micro_batch=spec.batch,
        seq_len=spec.context,
        priority_class="online-inference",
    )


def warm_target(spec: ServiceSpec, active: int) -> int:
    """Standby replicas to keep when `active` replicas serve (or are starting)."""
    return spec.warm_pool + math.ceil(spec.warm_share * active - 1e-9)
