"""The replay trace format (docs/traces.md): nodes.csv, jobs.csv and optional throughputs.csv.

Parsed once into frozen dataclasses; `job_record` / `node_record` turn them into the
JobSubmitted / NodeInventory records both engines feed the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agents.replay.csvio import Row, positive, read_rows, to_bool, to_float, to_int, to_list
from agents.replay.errors import TraceError
from scorer import Catalog, ThroughputModel, default_catalog
from scorer.catalog import OPAQUE_BASE
from scorer.network import Link
from scorer.types import KINDS, PRECISIONS

__all__ = [
    "PASSTHROUGH",
    "ModelResolver",
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
# kept as read and written back (they do not change a placement)
PASSTHROUGH = ("qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time")


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

    @property
    def cpu_only(self) -> bool:
        return self.gpu_count == 0


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
    # communication shape (issue 13): what the network model reads (docs/network.md)
    params_b: float = 0.0
    precision: str = "FP32"
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    grad_accum_steps: int = 1
    micro_batch: int = 0
    seq_len: int = 0
    cross_region_ok: bool = False
    priority_class: str | None = None  # tenancy: a named class (docs/tenancy.md)
    checkpointable: bool = True  # False: never migrated (a move would lose all its work)
    # columns of the public traces kept as read, written back by `write_jobs` (PASSTHROUGH)
    extra: tuple[tuple[str, str], ...] = ()

    @property
    def cpu_only(self) -> bool:
        return self.num_gpus == 0

    @property
    def gpu_demand(self) -> float:
        """GPUs asked for (a share counts its fraction)."""
        return self.num_gpus * self.gpu_milli / 1000


@dataclass(frozen=True)
class Trace:
    nodes: tuple[TraceNode, ...]
    jobs: tuple[TraceJob, ...]  # sorted by submit time, then file order
    throughput: ThroughputModel | None = None
    links: tuple[Link, ...] = ()  # inter-region links (links.csv), for the network model
    catalog: Catalog = field(default_factory=default_catalog)  # with the trace's opaque models
    warnings: tuple[str, ...] = ()  # one line per GPU model taken as opaque

    @property
    def total_gpus(self) -> int:
        return sum(n.gpu_count for n in self.nodes)

    def throughput_model(self) -> ThroughputModel:
        """The trace's speeds over its own catalogue (measured table, else roofline)."""
        if self.throughput is None:
            return ThroughputModel(self.catalog)
        if self.throughput.catalog is self.catalog:
            return self.throughput
        return self.throughput.with_catalog(self.catalog)


class ModelResolver:
    """GPU model names through the catalogue; an unknown one is taken as an opaque model (the
    figures of `scorer.catalog.OPAQUE_BASE`) with one warning naming it."""

    def __init__(self, catalog: Catalog | None = None) -> None:
        self.catalog = catalog or default_catalog()
        self._opaque: dict[str, str] = {}  # name -> where it was first seen

    def __call__(self, row: Row, column: str, raw: str) -> str:
        spec = self.catalog.get(raw)
        if spec is not None:
            return spec.name
        if not raw:
            raise row.error(column, "is required and empty")
        self._opaque.setdefault(raw, f"{row.path}:{row.line}")
        self.catalog = self.catalog.with_opaque([raw])
        return raw

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(
            f"{where}: GPU model {name!r} is not in the catalogue; taken as an opaque model "
            f"with the figures of {OPAQUE_BASE} (describe it with --catalog FILE)"
            for name, where in self._opaque.items()
        )


def _node(row: Row, models: ModelResolver) -> TraceNode:
    for col in ("node_id", "region"):
        if not row.get(col):
            raise row.error(col, "is required and empty")
    count = row.required("gpu_count", positive(to_int, strict=False))
    if count == 0:  # a CPU-only node: no accelerator, whatever the model column says
        model, memory, interconnect, price = "", 0, "none", 0.0
    else:
        model = models(row, "gpu_model", row.get("gpu_model"))
        spec = models.catalog[model]
        memory, interconnect = spec.memory_mib, spec.interconnect
        price = spec.price_per_gpu_hour
    return TraceNode(
        node_id=row.get("node_id"),
        region=row.get("region"),
        gpu_model=model,
        gpu_count=count,
        zone=row.get("zone"),
        rack=row.get("rack"),
        cpu_milli=row.parse("cpu_milli", positive(to_int, strict=False), 0),
        memory_mib=row.parse("memory_mib", positive(to_int, strict=False), 0),
        price_per_gpu_hour=row.parse("price_per_gpu_hour", positive(to_float, strict=False), price),
        interconnect=row.get("interconnect") or interconnect,
        gpu_memory_mib=memory,
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


def load_nodes(
    path: str | Path, catalog: Catalog | ModelResolver | None = None
) -> tuple[TraceNode, ...]:
    """nodes.csv, or the Alibaba traces' node list (recognised by `sn` and `gpu`)."""
    models = catalog if isinstance(catalog, ModelResolver) else ModelResolver(catalog)
    from agents.replay import openb  # the public format's own reader

    if openb.is_node_list(path):
        parse: Callable[[Row], TraceNode] = lambda r: openb.node(r, models)  # noqa: E731
        return tuple(_load_unique(path, openb.NODE_COLUMNS, parse, "node_id", "nodes"))
    return tuple(_load_unique(path, NODE_COLUMNS, lambda r: _node(r, models), "node_id", "nodes"))


def _milli(raw: str) -> int:
    value = to_int(raw)
    if not 1 <= value <= 1000:
        raise ValueError("expected a GPU share in 1..1000 milli")
    return value


def gpu_milli_of(row: Row, num_gpus: int, column: str = "num_gpus") -> int:
    """The per-GPU share; a CPU-only job writes 0 or nothing there (as the public traces do)."""
    if num_gpus == 0:  # 1000 too: this reader's default, written by earlier versions
        if row.parse("gpu_milli", positive(to_int, strict=False), 0) not in (0, 1000):
            raise row.error("gpu_milli", f"a CPU-only job ({column} 0) takes no GPU share")
        return 1000
    milli = row.parse("gpu_milli", _milli, 1000)
    if milli < 1000 and num_gpus != 1:
        raise row.error("gpu_milli", f"a GPU share needs {column} 1, got {num_gpus}")
    return milli


def passthrough(row: Row) -> tuple[tuple[str, str], ...]:
    return tuple((c, row.get(c)) for c in PASSTHROUGH if c in row.columns)


def _job(row: Row, models: ModelResolver) -> TraceJob:
    if not row.get("job_id"):
        raise row.error("job_id", "is required and empty")
    num_gpus = row.required("num_gpus", positive(to_int, strict=False))
    milli = gpu_milli_of(row, num_gpus)
    cpu = row.parse("cpu_milli", positive(to_int, strict=False), 0)
    memory = row.parse("memory_mib", positive(to_int, strict=False), 0)
    if num_gpus == 0 and not (cpu or memory):
        raise row.error("num_gpus", "a CPU-only job (num_gpus 0) needs cpu_milli or memory_mib")
    allowed = tuple(models(row, "gpu_models", m) for m in to_list(row.get("gpu_models")))
    ref = row.get("reference_model")
    return TraceJob(
        job_id=row.get("job_id"),
        submit_s=row.required("submit_s", positive(to_float, strict=False)),
        num_gpus=num_gpus,
        duration_s=row.required("duration_s", positive(to_float)),
        gpu_milli=1000 if num_gpus == 0 else milli,
        gpu_models=allowed,
        cpu_milli=cpu,
        memory_mib=memory,
        priority=row.parse("priority", to_int, 0),
        preemptible=row.parse("preemptible", to_bool, True),
        tenant=row.get("tenant") or "default",
        job_type=row.get("job_type"),
        reference_model=models(row, "reference_model", ref) if ref else None,
        data_region=row.get("data_region") or None,
        allowed_regions=to_list(row.get("allowed_regions")),
        kind=row.parse("kind", _kind, "TRAINING"),
        checkpoint_interval_s=row.parse("checkpoint_interval_s", positive(to_int, strict=False), 0),
        priority_class=row.get("priority_class") or None,
        checkpointable=row.parse("checkpointable", to_bool, True),
        extra=passthrough(row),
        **_comm_fields(row),
    )


def _precision(raw: str) -> str:
    if raw.upper() not in PRECISIONS:
        raise ValueError(f"expected one of {', '.join(PRECISIONS)}")
    return raw.upper()


def _comm_fields(row: Row) -> dict[str, Any]:
    """The communication shape columns (all optional)."""
    count = positive(to_int)
    return {
        "params_b": row.parse("params_b", positive(to_float, strict=False), 0.0),
        "precision": row.parse("precision", _precision, "FP32"),
        "tensor_parallel": row.parse("tensor_parallel", count, 1),
        "pipeline_parallel": row.parse("pipeline_parallel", count, 1),
        "grad_accum_steps": row.parse("grad_accum_steps", count, 1),
        "micro_batch": row.parse("micro_batch", positive(to_int, strict=False), 0),
        "seq_len": row.parse("seq_len", positive(to_int, strict=False), 0),
        "cross_region_ok": row.parse("cross_region_ok", to_bool, False),
    }


def _kind(raw: str) -> str:
    kind = raw.upper()
    if kind not in KINDS:
        raise ValueError(f"expected one of {', '.join(KINDS)}")
    return kind


def _checked_model(row: Row, column: str, name: str, catalog: Catalog) -> str:
    spec = catalog.get(name)
    if spec is None:
        raise row.error(column, f"unknown GPU model {name!r} (known: {', '.join(catalog.names)})")
    return spec.name


def load_jobs(
    path: str | Path, catalog: Catalog | ModelResolver | None = None
) -> tuple[TraceJob, ...]:
    """jobs.csv, or the Alibaba traces' pod list (recognised by `name`, `num_gpu` and
    `creation_time` without `job_id`)."""
    models = catalog if isinstance(catalog, ModelResolver) else ModelResolver(catalog)
    from agents.replay import openb

    if openb.is_pod_list(path):
        parse: Callable[[Row], TraceJob] = lambda r: openb.job(r, models)  # noqa: E731
        jobs = _load_unique(path, openb.JOB_COLUMNS, parse, "job_id", "jobs")
        return tuple(sorted(jobs, key=lambda j: j.submit_s))
    jobs = _load_unique(path, JOB_COLUMNS, lambda r: _job(r, models), "job_id", "jobs")
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
    links: str | Path | None = None,
) -> Trace:
    """nodes.csv, jobs.csv, an optional throughput table and links file; unknown GPU models
    become opaque models of the trace's catalogue, each with one line in `warnings`."""
    from agents.replay.network import load_links  # the network model's own input

    models = ModelResolver(catalog)
    node_list, job_list = load_nodes(nodes, models), load_jobs(jobs, models)
    table = load_throughputs(throughputs, models.catalog) if throughputs else None
    found = load_links(links) if links else ()
    return Trace(node_list, job_list, table, links=found, catalog=models.catalog,
                 warnings=models.warnings)  # fmt: skip


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
        "checkpointable": job.checkpointable,
        "checkpoint_interval_s": job.checkpoint_interval_s,
        "expected_duration_s": float(job.duration_s),
        "reference_gpu_model": job.reference_model,
        "params_b": job.params_b,
        "precision": job.precision,
        "tensor_parallel": job.tensor_parallel,
        "pipeline_parallel": job.pipeline_parallel,
        "data_parallel": max(1, job.num_gpus // (job.tensor_parallel * job.pipeline_parallel)),
        "grad_accum_steps": job.grad_accum_steps,
        "micro_batch": job.micro_batch,
        "seq_len": job.seq_len,
        "cross_region_ok": job.cross_region_ok,
        "priority_class": job.priority_class,
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
