"""The replay trace format (docs/traces.md): nodes.csv, jobs.csv and optional throughputs.csv.

Parsed once into frozen dataclasses; `job_record` / `node_record` turn them into the
JobSubmitted / NodeInventory records both engines feed the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from agents.replay.csvio import Row, positive, read_rows, to_bool, to_float, to_int, to_list
from agents.replay.errors import TraceError
from scorer import Catalog, ThroughputModel, default_catalog

__all__ = [
    "Trace",
    "TraceJob",
    "TraceNode",
    "job_record",
    "load_jobs",
    "load_nodes",
    "load_throughputs",
    "load_trace",
    "node_record",
]

_T = TypeVar("_T")

NODE_COLUMNS = ("node_id", "region", "gpu_model", "gpu_count")
JOB_COLUMNS = ("job_id", "submit_s", "num_gpus", "duration_s")
THROUGHPUT_COLUMNS = ("job_type", "gpu_model", "num_gpus", "steps_per_s")


@dataclass(frozen=True)
class TraceNode:
    node_id: str
    region: str
    gpu_model: str  # the catalogue's canonical name
    gpu_count: int
    zone: str = ""
    rack: str = ""
    cpu_milli: int = 0  # 0 = not declared (not held against jobs)
    memory_mib: int = 0
    price_per_gpu_hour: float = 0.0
    interconnect: str = "pcie"
    gpu_memory_mib: int = 16384


@dataclass(frozen=True)
class TraceJob:
    job_id: str
    submit_s: float
    num_gpus: int
    duration_s: float  # run time alone on `reference_model` (consolidated)
    gpu_milli: int = 1000
    gpu_models: tuple[str, ...] = ()
    cpu_milli: int = 0
    memory_mib: int = 0
    priority: int = 0
    preemptible: bool = True
    tenant: str = "default"
    job_type: str = ""
    reference_model: str | None = None
    data_region: str | None = None
    allowed_regions: tuple[str, ...] = ()
    kind: str = "TRAINING"
    checkpoint_interval_s: int = 0


@dataclass(frozen=True)
class Trace:
    nodes: tuple[TraceNode, ...]
    jobs: tuple[TraceJob, ...]  # sorted by submit time, then file order
    throughput: ThroughputModel | None = None

    @property
    def total_gpus(self) -> int:
        return sum(n.gpu_count for n in self.nodes)


def _model(row: Row, name: str, catalog: Catalog) -> str:
    raw = row.get(name)
    spec = catalog.get(raw)
    if spec is None:
        known = ", ".join(catalog.names)
        raise row.error(name, f"unknown GPU model {raw!r} (known: {known})")
    return spec.name


def _node(row: Row, catalog: Catalog) -> TraceNode:
    for col in ("node_id", "region"):
        if not row.get(col):
            raise row.error(col, "is required and empty")
    model = _model(row, "gpu_model", catalog)
    spec = catalog[model]
    return TraceNode(
        node_id=row.get("node_id"),
        region=row.get("region"),
        gpu_model=model,
        gpu_count=row.required("gpu_count", positive(to_int)),
        zone=row.get("zone"),
        rack=row.get("rack"),
        cpu_milli=row.parse("cpu_milli", positive(to_int, strict=False), 0),
        memory_mib=row.parse("memory_mib", positive(to_int, strict=False), 0),
        price_per_gpu_hour=row.parse(
            "price_per_gpu_hour", positive(to_float, strict=False), spec.price_per_gpu_hour
        ),
        interconnect=row.get("interconnect") or spec.interconnect,
        gpu_memory_mib=spec.memory_mib,
    )


def _load_unique(
    path: str | Path, columns: Sequence[str], parse: Callable[[Row], _T], key: str, what: str
) -> list[_T]:
    """Parse every row; a repeated `key` is an error at its row, an empty file at the file."""
    items: list[_T] = []
    seen: set[str] = set()
    for row in read_rows(path, columns):
        item = parse(row)
        ident = getattr(item, key)
        if ident in seen:
            raise row.error(key, f"duplicate {key} {ident!r}")
        seen.add(ident)
        items.append(item)
    if not items:
        raise TraceError(str(path), f"no {what}")
    return items


def load_nodes(path: str | Path, catalog: Catalog | None = None) -> tuple[TraceNode, ...]:
    catalog = catalog or default_catalog()
    return tuple(_load_unique(path, NODE_COLUMNS, lambda r: _node(r, catalog), "node_id", "nodes"))


def _milli(raw: str) -> int:
    value = to_int(raw)
    if not 1 <= value <= 1000:
        raise ValueError("expected a GPU share in 1..1000 milli")
    return value


def _job(row: Row, catalog: Catalog) -> TraceJob:
    if not row.get("job_id"):
        raise row.error("job_id", "is required and empty")
    num_gpus = row.required("num_gpus", positive(to_int))
    milli = row.parse("gpu_milli", _milli, 1000)
    if milli < 1000 and num_gpus != 1:
        raise row.error("gpu_milli", f"a GPU share needs num_gpus 1, got {num_gpus}")
    models = tuple(
        _checked_model(row, "gpu_models", m, catalog) for m in to_list(row.get("gpu_models"))
    )
    ref = row.get("reference_model")
    return TraceJob(
        job_id=row.get("job_id"),
        submit_s=row.required("submit_s", positive(to_float, strict=False)),
        num_gpus=num_gpus,
        duration_s=row.required("duration_s", positive(to_float)),
        gpu_milli=milli,
        gpu_models=models,
        cpu_milli=row.parse("cpu_milli", positive(to_int, strict=False), 0),
        memory_mib=row.parse("memory_mib", positive(to_int, strict=False), 0),
        priority=row.parse("priority", to_int, 0),
        preemptible=row.parse("preemptible", to_bool, True),
        tenant=row.get("tenant") or "default",
        job_type=row.get("job_type"),
        reference_model=_checked_model(row, "reference_model", ref, catalog) if ref else None,
        data_region=row.get("data_region") or None,
        allowed_regions=to_list(row.get("allowed_regions")),
    )


def _checked_model(row: Row, column: str, name: str, catalog: Catalog) -> str:
    spec = catalog.get(name)
    if spec is None:
        raise row.error(column, f"unknown GPU model {name!r} (known: {', '.join(catalog.names)})")
    return spec.name


def load_jobs(path: str | Path, catalog: Catalog | None = None) -> tuple[TraceJob, ...]:
    catalog = catalog or default_catalog()
    jobs = _load_unique(path, JOB_COLUMNS, lambda r: _job(r, catalog), "job_id", "jobs")
    return tuple(sorted(jobs, key=lambda j: j.submit_s))  # stable: file order breaks ties


def load_throughputs(path: str | Path, catalog: Catalog | None = None) -> ThroughputModel:
    """Our `throughputs.csv`, or Gavel's table (detected by its `gpu_type` column)."""
    catalog = catalog or default_catalog()
    table: dict[tuple[str, str, int, bool], float] = {}
    try:
        first = Path(path).read_text(encoding="utf-8-sig").lstrip().split("\n", 1)[0].lower()
    except OSError as exc:
        raise TraceError(str(path), f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TraceError(str(path), f"not UTF-8 text ({exc.reason})") from None
    gavel = "gpu_type" in first and "steps_per_sec" in first
    cols = (
        ("job_type", "gpu_type", "scale_factor", "steps_per_sec") if gavel else THROUGHPUT_COLUMNS
    )
    job_col, model_col, gpus_col, rate_col = cols
    for row in read_rows(path, cols):
        if not row.get(job_col):
            raise row.error(job_col, "is required and empty")
        key = (
            row.get(job_col),
            _checked_model(row, model_col, row.get(model_col), catalog),
            row.required(gpus_col, positive(to_int)),
            row.parse("consolidated", to_bool, True),
        )
        table[key] = row.required(rate_col, positive(to_float, strict=False))
    if not table:
        raise TraceError(str(path), "no throughput rows")
    return ThroughputModel(catalog, table)


def load_trace(
    nodes: str | Path,
    jobs: str | Path,
    throughputs: str | Path | None = None,
    catalog: Catalog | None = None,
) -> Trace:
    catalog = catalog or default_catalog()
    model = load_throughputs(throughputs, catalog) if throughputs else None
    return Trace(load_nodes(nodes, catalog), load_jobs(jobs, catalog), model)


def job_record(job: TraceJob, ts_ms: int) -> dict[str, Any]:
    """The JobSubmitted record of a trace job (Avro-encodable, defaults filled)."""
    record: dict[str, Any] = {
        "event_id": f"replay-{job.job_id}",
        "ts": ts_ms,
        "job_id": job.job_id,
        "tenant": job.tenant,
        "kind": job.kind,
        "job_type": job.job_type,
        "gpu_count": job.num_gpus,
        "gpu_milli": job.gpu_milli,
        "cpu_milli": job.cpu_milli,
        "memory_mib": job.memory_mib,
        "allowed_gpu_models": list(job.gpu_models),
        "allowed_regions": list(job.allowed_regions),
        "data_region": job.data_region,
        "priority": job.priority,
        "preemptible": job.preemptible,
        "checkpoint_interval_s": job.checkpoint_interval_s,
        "expected_duration_s": float(job.duration_s),
        "reference_gpu_model": job.reference_model,
    }
    return record


def node_record(node: TraceNode, ts_ms: int) -> dict[str, Any]:
    """The NodeInventory record of a trace node."""
    return {
        "event_id": f"replay-{node.node_id}",
        "ts": ts_ms,
        "node_id": node.node_id,
        "region": node.region,
        "zone": node.zone,
        "rack": node.rack,
        "gpu_model": node.gpu_model,
        "gpu_count": node.gpu_count,
        "gpu_memory_mib": node.gpu_memory_mib,
        "interconnect": node.interconnect,
        "cpu_milli": node.cpu_milli,
        "memory_mib": node.memory_mib,
        "price_per_gpu_hour": node.price_per_gpu_hour,
    }


def by_id(items: Iterable[TraceNode]) -> Mapping[str, TraceNode]:
    return {n.node_id: n for n in items}
