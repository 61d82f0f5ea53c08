"""What a decoded event must satisfy before a processor acts on it, with every reason it fails.

Avro guarantees types, not sense: a schema-valid record can still carry NaN speeds, negative
or huge GPU counts, 10 kB identifiers, GPU indices outside the node or a timestamp days in the
future. Such a record is dead-lettered with all its problems (`Runtime.decode`) instead of
reaching the decision core. Records that are sensible but unexpected (telemetry for an unknown
node, an event for an unknown job, a duplicate, a finish before a start) are valid: the
processors handle them (and count them), they are not errors of the sender's format.

One checker per event in `CHECKERS`; each returns "field: why" strings, empty when fine.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuflow_errors import GpuflowError
from infra.jobspec import job_problems
from streams.scheduler.convert import job_spec, node_spec

__all__ = [
    "CHECKERS",
    "GPU_REALS",
    "MAX_GANG_GPUS",
    "MAX_NODE_GPUS",
    "NODE_READINGS",
    "Rules",
    "joined",
    "problems",
]

MAX_ID_CHARS = 256  # identifiers: job, node, region, tenant, GPU model, zone, rack, ...
MAX_TEXT_CHARS = 4096  # free text: model family, job type, event detail
MAX_LIST = 1024  # list fields (GPUs of a node, node ids of a job, allowed regions, ...)
MAX_NODE_GPUS = 128  # GPUs of one node (an NVL72 rack is 72)
MAX_GANG_GPUS = 65_536  # GPUs of one job
MAX_CANDIDATES = 64  # spill-over regions a routed job may still try
MAX_ATTEMPTS = 2 * MAX_CANDIDATES + 2  # hops of one job between placers

Problems = list[str]


@dataclass(frozen=True)
class Rules:
    """What `problems` checks against besides the record: the clock and the admission mode."""

    max_future_ms: int = 300_000  # a ts further ahead of our clock than this is refused
    verified_required: bool = False  # tenant keys configured: routed jobs must be verified
    max_regions: int = 64  # regions the worker will ever track: more would grow it forever
    known_regions: set[str] = field(default_factory=set)  # regions of valid events so far
    clock_ms: Callable[[], int] = field(default=lambda: int(time.time() * 1000))


def problems(event: str, record: Mapping[str, Any], rules: Rules | None = None) -> Problems:
    """Every problem of a decoded `event` record (empty: valid)."""
    rules = rules or Rules()
    out = _envelope(record, rules)
    checker = CHECKERS.get(event)
    if checker is not None:
        out += checker(record, rules)
    if not out:
        _remember_regions(event, record, rules)
    return out


# ---- helpers --------------------------------------------------------------------------------


def _ids(record: Mapping[str, Any], *names: str, required: bool = True) -> Problems:
    out = []
    for name in names:
        value = record.get(name)
        if value is None and not required:
            continue
        text = "" if value is None else str(value)
        if required and not text.strip():
            out.append(f"{name}: must not be empty")
        elif len(text) > MAX_ID_CHARS:
            out.append(f"{name}: longer than {MAX_ID_CHARS} characters ({len(text)})")
    return out


def _texts(record: Mapping[str, Any], *names: str) -> Problems:
    return [
        f"{n}: longer than {MAX_TEXT_CHARS} characters"
        for n in names
        if len(str(record.get(n) or "")) > MAX_TEXT_CHARS
    ]


def _real(
    name: str,
    value: Any,
    low: float | None = 0.0,
    high: float | None = None,
    *,
    optional: bool = False,
) -> Problems:
    if value is None:
        return [] if optional else [f"{name}: missing"]
    number = float(value)
    if _within(number, low, high):  # the one definition of an accepted value
        return []
    if not math.isfinite(number):
        return [f"{name}: must be finite, got {number}"]
    if low is not None and number < low:
        return [f"{name}: must be >= {low:g}, got {number:g}"]
    return [f"{name}: must be <= {high:g}, got {number:g}"]


def _within(number: float, low: float | None, high: float | None) -> bool:
    """What `_real` accepts, without building a message (NaN fails every comparison)."""
    return (
        math.isfinite(number)
        and (low is None or number >= low)
        and (high is None or number <= high)
    )


def _count(name: str, value: Any, low: int = 0, high: int | None = None) -> Problems:
    number = int(value if value is not None else low)
    if number < low or (high is not None and number > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        return [f"{name}: must be {bound}, got {number}"]
    return []


def _list(
    record: Mapping[str, Any], name: str, limit: int = MAX_LIST, *, ids: bool = True
) -> Problems:
    items = list(record.get(name) or ())
    if len(items) > limit:
        return [f"{name}: more than {limit} entries ({len(items)})"]
    if not ids:
        return []
    out = []
    for i, item in enumerate(items):
        out += _ids({f"{name}[{i}]": item}, f"{name}[{i}]")
    return out[:3]  # the first few say enough


def _regions(rules: Rules, *values: Any) -> Problems:
    """New regions past `max_regions`: each one would grow the worker's state for good."""
    new = {str(v) for v in values if v} - rules.known_regions
    if len(rules.known_regions) + len(new) <= rules.max_regions:
        return []
    return [f"region: {sorted(new)[0][:60]!r} would be region {len(rules.known_regions) + 1}; "
            f"worker.max_regions is {rules.max_regions}"]  # fmt: skip


def _remember_regions(event: str, record: Mapping[str, Any], rules: Rules) -> None:
    if event in ("RoutedJob", "NodeInventory", "NodeTelemetry", "GridSignal", "JobEvent"):
        named = [
            record.get("region"),
            record.get("queue_region"),
            *(record.get("candidates") or ()),
        ]
        rules.known_regions.update(str(r) for r in named if r)


def _envelope(record: Mapping[str, Any], rules: Rules) -> Problems:
    out = _ids(record, "event_id")
    ts = int(record.get("ts", 0))
    ahead = ts - rules.clock_ms()
    if ts < 0:
        out.append(f"ts: negative ({ts})")
    elif ahead > rules.max_future_ms:
        out.append(f"ts: {ahead / 1000:.0f}s in the future")
    return out


# ---- one checker per event ------------------------------------------------------------------


def _job(record: Mapping[str, Any], rules: Rules) -> Problems:
    out = _ids(record, "job_id", "tenant") + _texts(record, "model_family", "job_type")
    out += _ids(record, "data_region", "reference_gpu_model", required=False)
    out += [p for p in job_problems(record) if not p.startswith("job_id")]
    out += _count("gpu_count", record.get("gpu_count", 1), 0, MAX_GANG_GPUS)  # 0: CPU-only
    for degree in ("data_parallel", "tensor_parallel", "pipeline_parallel"):
        out += _count(degree, record.get(degree, 1), 1, MAX_GANG_GPUS)
    out += _count("checkpoint_interval_s", record.get("checkpoint_interval_s", 0))
    out += _count("total_steps", record.get("total_steps"))
    out += _real("params_b", record.get("params_b", 0.0), 0.0, 1e6)
    out += _real("cost_speed_preference", record.get("cost_speed_preference", 0.5), 0.0, 1.0)
    out += _real("budget_usd", record.get("budget_usd"), 0.0, optional=True)
    out += _real("expected_duration_s", record.get("expected_duration_s"), 0.0, optional=True)
    for name in ("allowed_gpu_models", "allowed_regions", "allowed_zones"):
        out += _list(record, name, MAX_ID_CHARS)
    out = sorted(set(out), key=out.index)
    return out or _domain(job_spec, record)


def _domain(convert: Callable[[Mapping[str, Any]], Any], record: Mapping[str, Any]) -> Problems:
    """What the decision core's own types refuse (e.g. a software stack it cannot parse)."""
    try:
        convert(record)
    except (GpuflowError, TypeError, ValueError) as exc:
        return [str(exc).splitlines()[0][:300]]
    return []


def _routed(record: Mapping[str, Any], rules: Rules) -> Problems:
    job = record.get("job") or {}
    out = [f"job.{p}" for p in _job(job, rules)]
    out += _ids(record, "region") + _ids(record, "queue_region", required=False)
    out += _list(record, "candidates", MAX_CANDIDATES)
    out += _regions(rules, record.get("region"), record.get("queue_region"),
                    *(record.get("candidates") or ()))  # fmt: skip
    out += _count("attempt", record.get("attempt", 1), 1, MAX_ATTEMPTS)
    out += _count("worker_us", record.get("worker_us", 0), 0, 3_600_000_000)  # < 1 h of work
    out += _real("region_score", record.get("region_score", 0.0), None)
    refusals = record.get("refusals") or {}
    if len(refusals) > MAX_LIST or any(not 0 <= int(v) <= 10**9 for v in refusals.values()):
        out.append("refusals: more than 1024 entries, or a count outside 0..1e9")
    if rules.verified_required and record.get("verified_tenant") != job.get("tenant"):
        out.append("verified_tenant: tenant keys are configured and this job was not verified")
    return out


def _inventory(record: Mapping[str, Any], rules: Rules) -> Problems:
    count = int(record.get("gpu_count", 0))
    out = _ids(record, "node_id", "region") + _regions(rules, record.get("region"))
    out += _ids(record, "gpu_model", required=count > 0)  # a CPU-only node names no model
    out += _ids(record, "zone", "rack", "cloud", "interconnect", required=False)
    out += _count("gpu_count", count, 0, MAX_NODE_GPUS)
    for name in ("gpu_memory_mib", "cpu_milli", "memory_mib"):
        out += _count(name, record.get(name, 0))
    out += _real("price_per_gpu_hour", record.get("price_per_gpu_hour", 0.0), 0.0, 1e6)
    out += _list(record, "nvlink_islands", MAX_NODE_GPUS, ids=False)
    members = [i for island in record.get("nvlink_islands") or () for i in island]
    if any(not 0 <= i < count for i in members) or len(members) != len(set(members)):
        out.append(f"nvlink_islands: GPU indices must be distinct and within 0..{count - 1}")
    if len(record.get("labels") or {}) > 256:
        out.append("labels: more than 256 entries")
    return out or _domain(node_spec, record)


NODE_READINGS = ("disk_read_mbps", "disk_write_mbps", "net_rx_mbps", "net_tx_mbps", "energy_j")
GPU_REALS = {  # field: (low, high); None = unbounded
    "util_pct": (0.0, 100.0),
    "mem_bw_util_pct": (0.0, 100.0),
    "nvlink_tx_mbps": (0.0, None),
    "nvlink_rx_mbps": (0.0, None),
    "temperature_c": (-100.0, 500.0),
    "power_w": (0.0, None),
    "perf_factor": (0.0, 10.0),
}


def _telemetry(record: Mapping[str, Any], rules: Rules) -> Problems:
    out = _ids(record, "node_id", "region") + _regions(rules, record.get("region"))
    gpus = list(record.get("gpus") or ())
    if len(gpus) > MAX_NODE_GPUS:
        return [*out, f"gpus: more than {MAX_NODE_GPUS} entries ({len(gpus)})"]
    indices = [int(g.get("index", -1)) for g in gpus]
    if any(not 0 <= i < MAX_NODE_GPUS for i in indices) or len(set(indices)) != len(indices):
        out.append(f"gpus: indices must be distinct and within 0..{MAX_NODE_GPUS - 1}")
    for i, g in enumerate(gpus):  # names are formatted only for a value that fails
        for name, (low, high) in GPU_REALS.items():
            value = g.get(name)
            if value is not None and not _within(float(value), low, high):
                out += _real(f"gpus[{i}].{name}", value, low, high)
        for name in ("mem_used_mib", "sm_clock_mhz", "ecc_errors"):
            value = g.get(name, 0)
            if value is not None and int(value) < 0:
                out += _count(f"gpus[{i}].{name}", value)
        if len(g.get("xid_events") or ()) > MAX_LIST:
            out.append(f"gpus[{i}].xid_events: more than {MAX_LIST} entries")
    for name in NODE_READINGS:
        out += _real(name, record.get(name), 0.0, optional=True)
    return out[:8]


def _grid(record: Mapping[str, Any], rules: Rules) -> Problems:
    out = _ids(record, "region") + _regions(rules, record.get("region"))
    out += _real("price_per_kwh", record.get("price_per_kwh"), -1e4, 1e4)  # can go negative
    out += _real("carbon_g_per_kwh", record.get("carbon_g_per_kwh"), 0.0, 1e5)
    out += _real("renewable_share", record.get("renewable_share", 0.0), 0.0, 1.0)
    return out


def _job_event(record: Mapping[str, Any], rules: Rules) -> Problems:
    out = _ids(record, "job_id", "region") + _texts(record, "detail")
    out += _regions(rules, record.get("region"))
    out += _list(record, "node_ids")
    out += _real("progress", record.get("progress", 0.0), 0.0, 1.0)
    return out


CHECKERS: dict[str, Callable[[Mapping[str, Any], Rules], Problems]] = {
    "JobSubmitted": _job,
    "RoutedJob": _routed,
    "NodeInventory": _inventory,
    "NodeTelemetry": _telemetry,
    "GridSignal": _grid,
    "JobEvent": _job_event,
}


def joined(found: Iterable[str]) -> str:
    """Problems as one dead-letter reason."""
    return "; ".join(found)
