"""The Alibaba GPU cluster traces as they are written (the FGD paper's input, `openb_pod_list*.csv`
and `openb_node_list*.csv` of its artifact), read into the replay's types (docs/traces.md).

Pods: name -> job_id, num_gpu -> num_gpus, gpu_milli (0 for a CPU-only pod), gpu_spec (`|`-
separated models) -> gpu_models, cpu_milli, memory_mib, creation_time -> submit_s, and
deletion_time - scheduled_time (creation_time when never scheduled) -> duration_s; qos,
pod_phase and the three times are kept as read (`TraceJob.extra`) and written back. Nodes: sn ->
node_id, gpu -> gpu_count, model -> gpu_model (V100M16/V100M32 are catalogue aliases; the
anonymised G1/G2/G3 become opaque models), cpu_milli, memory_mib; region `default`.
"""

from __future__ import annotations

from pathlib import Path

from agents.replay.csvio import Row, positive, to_float, to_int, to_list
from agents.replay.trace import TraceJob, TraceNode
from agents.replay.trace_fields import ModelResolver, gpu_milli_of, passthrough

__all__ = ["JOB_COLUMNS", "NODE_COLUMNS", "is_node_list", "is_pod_list", "job", "node"]

JOB_COLUMNS = ("name", "num_gpu", "creation_time")
NODE_COLUMNS = ("sn", "gpu")
OPEN_S = 86_400.0  # a pod with no deletion_time ran at least this long
REGION = "default"  # the pod and node lists name no region


def is_pod_list(path: str | Path) -> bool:
    header = _header(path)
    return "job_id" not in header and set(JOB_COLUMNS) <= header


def is_node_list(path: str | Path) -> bool:
    header = _header(path)
    return "node_id" not in header and set(NODE_COLUMNS) <= header


def _header(path: str | Path) -> set[str]:
    """The column names of a CSV file's header line (empty when it cannot be read: the
    reader then reports why)."""
    try:
        lines = Path(path).read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    first = next((ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")), "")
    return {c.strip().lower().replace(" ", "_") for c in first.split(",")}


def node(row: Row, models: ModelResolver) -> TraceNode:
    """A row of the Alibaba traces' node list (`sn, cpu_milli, memory_mib, gpu, model`)."""
    if not row.get("sn"):
        raise row.error("sn", "is required and empty")
    count = row.required("gpu", positive(to_int, strict=False))
    model = models(row, "model", row.get("model")) if count else ""
    spec = models.catalog[model] if count else None
    return TraceNode(
        node_id=row.get("sn"),
        region=REGION,
        gpu_model=model,
        gpu_count=count,
        cpu_milli=row.parse("cpu_milli", positive(to_int, strict=False), 0),
        memory_mib=row.parse("memory_mib", positive(to_int, strict=False), 0),
        price_per_gpu_hour=spec.price_per_gpu_hour if spec else 0.0,
        interconnect=spec.interconnect if spec else "none",
        gpu_memory_mib=spec.memory_mib if spec else 0,
    )


def job(row: Row, models: ModelResolver) -> TraceJob:
    """A row of the Alibaba GPU traces' pod list (`openb_pod_list*.csv`, FGD's input)."""
    if not row.get("name"):
        raise row.error("name", "is required and empty")
    num_gpus = row.required("num_gpu", positive(to_int, strict=False))
    cpu = row.parse("cpu_milli", positive(to_int, strict=False), 0)
    memory = row.parse("memory_mib", positive(to_int, strict=False), 0)
    created = row.required("creation_time", positive(to_float, strict=False))
    started = row.parse("scheduled_time", positive(to_float, strict=False), created)
    ended = row.parse("deletion_time", positive(to_float, strict=False), started + OPEN_S)
    if num_gpus == 0 and not (cpu or memory):
        raise row.error("num_gpu", "a CPU-only pod (num_gpu 0) needs cpu_milli or memory_mib")
    milli = gpu_milli_of(row, num_gpus, "num_gpu")
    return TraceJob(
        job_id=row.get("name"),
        submit_s=created,
        num_gpus=num_gpus,
        duration_s=max(1.0, ended - started),  # a pod deleted as it started still ran
        gpu_milli=milli,
        gpu_models=tuple(models(row, "gpu_spec", m) for m in to_list(row.get("gpu_spec"))),
        cpu_milli=cpu,
        memory_mib=memory,
        kind="INFERENCE" if num_gpus and milli < 1000 else "TRAINING",
        extra=passthrough(row),
    )
