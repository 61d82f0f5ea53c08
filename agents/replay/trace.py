"""The replay trace's types (docs/traces.md): nodes, jobs, the trace, and their records.

A trace is parsed once (`agents.replay.trace_reader`) into these frozen dataclasses;
`job_record` / `node_record` turn them into the JobSubmitted / NodeInventory records both
engines feed the scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scorer import Catalog, ThroughputModel, default_catalog
from scorer.network import Link

__all__ = ["PASSTHROUGH", "Trace", "TraceJob", "TraceNode", "by_id", "job_record", "node_record"]

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
