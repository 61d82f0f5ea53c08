"""Reading a replay trace (docs/traces.md): nodes.csv, jobs.csv, optional throughputs.csv
and links.csv; the Alibaba node and pod lists and Gavel's throughput table are recognised by
their columns. Every row is checked once; a bad one is a one-line error naming its field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from agents.replay import openb
from agents.replay.csvio import Row, positive, read_rows, to_bool, to_float, to_int, to_list
from agents.replay.errors import TraceError
from agents.replay.network import load_links
from agents.replay.trace import Trace, TraceJob, TraceNode
from agents.replay.trace_fields import ModelResolver, gpu_milli_of, passthrough
from scorer import Catalog, ThroughputModel, default_catalog
from scorer.types import KINDS, PRECISIONS

__all__ = ["load_jobs", "load_nodes", "load_throughputs", "load_trace"]

_T = TypeVar("_T")

NODE_COLUMNS = ("node_id", "region", "gpu_model", "gpu_count")
JOB_COLUMNS = ("job_id", "submit_s", "num_gpus", "duration_s")
THROUGHPUT_COLUMNS = ("job_type", "gpu_model", "num_gpus", "steps_per_s")


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
    if openb.is_node_list(path):
        parse: Callable[[Row], TraceNode] = lambda r: openb.node(r, models)  # noqa: E731
        return tuple(_load_unique(path, openb.NODE_COLUMNS, parse, "node_id", "nodes"))
    return tuple(_load_unique(path, NODE_COLUMNS, lambda r: _node(r, models), "node_id", "nodes"))


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
    models = ModelResolver(catalog)
    node_list, job_list = load_nodes(nodes, models), load_jobs(jobs, models)
    table = load_throughputs(throughputs, models.catalog) if throughputs else None
    found = load_links(links) if links else ()
    return Trace(node_list, job_list, table, links=found, catalog=models.catalog,
                 warnings=models.warnings)  # fmt: skip
