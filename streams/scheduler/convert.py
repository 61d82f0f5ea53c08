"""The edge between Avro records (plain dicts) and the decision core's domain types.

Converted once, here: processors hand the scorer frozen dataclasses and turn its results back
into records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from scorer import Assignment, JobSpec, NodeSpec, PlacementResult

__all__ = ["assignment_records", "decision_record", "job_spec", "node_spec", "parse_assignments"]

_JOB_FIELDS = {f.name for f in dataclasses.fields(JobSpec)}
_NODE_FIELDS = {f.name for f in dataclasses.fields(NodeSpec)}
_SPECS: dict[tuple[tuple[Any, ...], tuple[type, ...]], JobSpec] = {}
_SPECS_KEPT = 8192


def job_spec(record: Mapping[str, Any]) -> JobSpec:
    """The record's JobSpec; specs of records alike (field by field, types too) are shared:
    the re-planner asks again for every running job on each pass, and a JobSpec is frozen."""
    values = {k: v for k, v in record.items() if k in _JOB_FIELDS}
    for key in ("allowed_gpu_models", "allowed_regions", "allowed_zones"):
        values[key] = tuple(values.get(key) or ())
    try:
        alike = (tuple(values.items()), tuple(map(type, values.values())))
        spec = _SPECS.get(alike)
    except TypeError:  # a value that is not hashable: no sharing
        return JobSpec(**values)
    if spec is None:
        if len(_SPECS) >= _SPECS_KEPT:
            _SPECS.clear()  # running jobs ask again and come back at once
        spec = _SPECS[alike] = JobSpec(**values)
    return spec


def node_spec(record: Mapping[str, Any]) -> NodeSpec:
    values = {k: v for k, v in record.items() if k in _NODE_FIELDS}
    values["nvlink_islands"] = tuple(tuple(i) for i in values.get("nvlink_islands") or ())
    return NodeSpec(**values)


def assignment_records(assignments: tuple[Assignment, ...]) -> list[dict[str, Any]]:
    return [
        {
            "node_id": a.node_id,
            "gpu_indices": list(a.gpu_indices),
            "gpu_milli": a.gpu_milli,
            "cpu_milli": a.cpu_milli,
            "memory_mib": a.memory_mib,
        }
        for a in assignments
    ]


def parse_assignments(records: Any) -> tuple[Assignment, ...]:
    return tuple(
        Assignment(
            r["node_id"],
            tuple(r["gpu_indices"]),
            int(r.get("gpu_milli", 1000)),
            int(r.get("cpu_milli") or 0),
            int(r.get("memory_mib") or 0),
        )
        for r in records or ()
    )


def decision_record(
    job: Mapping[str, Any],
    outcome: str,
    *,
    event_id: str,
    ts: int,
    submitted_ts: int,
    attempt: int,
    worker_us: int,
    result: PlacementResult | None = None,
    region: str | None = None,
    reasons: list[str] | None = None,
    refusals: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """A PlacementDecision record for `job` (a JobSubmitted record)."""
    record: dict[str, Any] = {
        "event_id": event_id,
        "ts": ts,
        "job_id": job["job_id"],
        "outcome": outcome,
        "region": region,
        "tenant": job.get("tenant", "default"),
        "priority": int(job.get("priority", 0)),
        "gpu_count": int(job.get("gpu_count", 1)),
        "reasons": list(reasons or ()),
        "refusals": {k: int(v) for k, v in (refusals or {}).items()},
        "attempt": attempt,
        "submitted_ts": submitted_ts,
        "worker_us": worker_us,
    }
    if result is not None and result.placed:
        record.update(
            region=result.region or region,
            gpu_model=result.gpu_model,
            assignments=assignment_records(result.assignments),
            expected_throughput=result.expected_throughput,
            expected_duration_s=result.expected_duration_s,
            price_per_hour=result.price_per_hour,
            score=float(result.score),
            score_breakdown={k: float(v) for k, v in result.breakdown.items()},
        )
    return record
