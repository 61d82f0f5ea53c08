"""Decoded events -> table rows. Pure: no ClickHouse, no Kafka.

Nested arrays flatten where a row per element is what analysts query (NodeTelemetry -> one
row per GPU) and stay arrays with derived columns where the event is the unit (decisions keep
`nodes`, `assignment_gpu_indices` plus `node_count`, `queue_wait_ms`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from schemas import timestamp_ms

__all__ = ["CONVERTERS", "TABLE_FOR_EVENT", "ConversionError", "RowContext", "to_rows"]

Row = dict[str, Any]


class ConversionError(ValueError):
    """An event decoded but cannot become rows (unknown type, missing field)."""


class RowContext:
    """State the conversion needs across events: each node's latest GPU model."""

    def __init__(self, node_models: Mapping[str, str] | None = None) -> None:
        self.node_models: MutableMapping[str, str] = dict(node_models or {})


def _base(rec: Mapping[str, Any]) -> Row:
    return {"ts": timestamp_ms(rec["ts"]), "event_id": rec["event_id"], "schema": rec["schema"]}


def _assignments(items: list[Mapping[str, Any]]) -> tuple[list[str], list[list[int]], list[int]]:
    nodes = [a["node_id"] for a in items]
    return nodes, [list(a["gpu_indices"]) for a in items], [a["gpu_milli"] for a in items]


def _inventory(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
    ctx.node_models[rec["node_id"]] = rec["gpu_model"]
    keep = (
        "node_id",
        "region",
        "zone",
        "rack",
        "cloud",
        "gpu_model",
        "gpu_count",
        "gpu_memory_mib",
        "interconnect",
        "nvlink_islands",
        "cpu_milli",
        "memory_mib",
        "price_per_gpu_hour",
        "compute_capability",
        "driver_version",
        "mig_enabled",
        "labels",
    )
    return [_base(rec) | {k: rec[k] for k in keep}]


_NODE_FIELDS = (
    "disk_read_mbps",
    "disk_write_mbps",
    "net_rx_mbps",
    "net_tx_mbps",
    "energy_j",
    "perf_per_watt",
)
_GPU_FIELDS = (
    "healthy",
    "util_pct",
    "mem_used_mib",
    "mem_bw_util_pct",
    "nvlink_tx_mbps",
    "nvlink_rx_mbps",
    "temperature_c",
    "power_w",
    "sm_clock_mhz",
    "throttle_reasons",
    "ecc_errors",
    "xid_events",
    "perf_factor",
)


def _telemetry(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
    node = (
        _base(rec)
        | {
            "node_id": rec["node_id"],
            "region": rec["region"],
            "gpu_model": ctx.node_models.get(rec["node_id"], ""),
            "tier": rec["tier"],
            "full_snapshot": rec["full_snapshot"],
            "node_healthy": rec["node_healthy"],
        }
        | {k: rec.get(k) for k in _NODE_FIELDS}
    )
    return [node | {"gpu_index": g["index"]} | {k: g[k] for k in _GPU_FIELDS} for g in rec["gpus"]]


def _copy(*fields: str) -> Callable[[Mapping[str, Any], RowContext], list[Row]]:
    def convert(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
        return [_base(rec) | {k: rec[k] for k in fields}]

    return convert


def _submitted(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
    skip = {"event_id", "ts", "schema"}
    row = _base(rec) | {k: v for k, v in rec.items() if k not in skip}
    row["deferrable_until_ts"] = timestamp_ms(rec.get("deferrable_until_ts"))
    return [row]


def _job_event(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
    row = _copy("job_id", "region", "type", "node_ids", "progress", "detail")(rec, ctx)[0]
    tenancy = {"epoch": int(rec.get("epoch") or 0), "lost_gpu_s": float(rec.get("lost_gpu_s") or 0)}
    code = rec.get("exit_code")
    ended = {  # issue 31: how the attempt ended (older events: NULL / "")
        "exit_code": None if code is None else int(code),
        "cause": str(rec.get("cause") or ""),
        "stderr_tail": str(rec.get("stderr_tail") or ""),
    }
    return [row | {"phase": rec.get("phase") or ""} | tenancy | ended]


def _region_state(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
    keep = (
        "region",
        "nodes",
        "healthy_nodes",
        "total_gpus_by_model",
        "free_gpus_by_model",
        "max_free_per_node_by_model",
        "util_mean",
        "queue_depth",
        "price_per_gpu_hour_mean",
        "carbon_g_per_kwh",
    )
    return [
        _base(rec)
        | {k: rec[k] for k in keep}
        | {
            "window_start": timestamp_ms(rec["window_start"]),
            "window_end": timestamp_ms(rec["window_end"]),
        }
    ]


def _routed(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
    job = rec["job"]
    return [
        _base(rec)
        | {
            "job_id": job["job_id"],
            "tenant": job["tenant"],
            "priority": job["priority"],
            "gpu_count": job["gpu_count"],
            "submitted_ts": timestamp_ms(rec["submitted_ts"]),
            "region": rec["region"],
            "candidates": rec["candidates"],
            "attempt": rec["attempt"],
            "region_score": rec["region_score"],
            "refusals": rec["refusals"],
        }
    ]


def _placement(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
    nodes, indices, milli = _assignments(rec["assignments"])
    keep = (
        "job_id",
        "outcome",
        "tenant",
        "priority",
        "gpu_count",
        "expected_throughput",
        "expected_duration_s",
        "price_per_hour",
        "score",
        "score_breakdown",
        "reasons",
        "refusals",
        "attempt",
        "worker_us",
    )
    ts, submitted = timestamp_ms(rec["ts"]), timestamp_ms(rec["submitted_ts"])
    queued = timestamp_ms(rec.get("queued_ts")) or submitted
    return [
        _base(rec)
        | {k: rec[k] for k in keep}
        | {
            "region": rec.get("region") or "",
            "gpu_model": rec.get("gpu_model") or "",
            "nodes": nodes,
            "assignment_gpu_indices": indices,
            "assignment_gpu_milli": milli,
            "node_count": len(set(nodes)),
            "submitted_ts": submitted,
            "queue_wait_ms": (ts or 0) - (queued or 0),
            "epoch": int(rec.get("epoch") or 0),
            "priority_class": rec.get("priority_class") or "",
            "queued_ts": queued,
            "wait_reason": rec.get("wait_reason") or "",
        }
    ]


def _preemption(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
    nodes, indices, milli = _assignments(rec["victim_assignments"])
    row = _copy("job_id", "for_job_id", "region", "checkpoint_first", "victim_priority", "reason")(
        rec, ctx
    )[0]
    return [
        row
        | {
            "victim_nodes": nodes,
            "victim_gpu_indices": indices,
            "victim_gpu_milli": milli,
            "victim_gpu_count": sum(map(len, indices)),
            "victim_epoch": int(rec.get("victim_epoch") or 0),
            "victim_tenant": rec.get("victim_tenant") or "",
            "for_tenant": rec.get("for_tenant") or "",
            "for_priority": int(rec.get("for_priority") or 0),
            "cause": rec.get("cause") or "PRIORITY",
            "grace_period_s": float(rec.get("grace_period_s") or 0.0),
            "deadline_ts": timestamp_ms(rec.get("deadline_ts")),
            "expected_lost_gpu_s": float(rec.get("expected_lost_gpu_s") or 0.0),
        }
    ]


def _migration(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
    from_nodes, from_idx, _ = _assignments(rec["from_assignments"])
    to_nodes, to_idx, _ = _assignments(rec["to_assignments"])
    row = _copy("job_id", "from_region", "to_region", "reason", "expected_gain")(rec, ctx)[0]
    return [
        row
        | {
            "from_nodes": from_nodes,
            "from_gpu_indices": from_idx,
            "to_nodes": to_nodes,
            "to_gpu_indices": to_idx,
            "gpu_count": sum(map(len, to_idx)),
            "cross_region": rec["from_region"] != rec["to_region"],
        }
    ]


_QUOTA_EXTRA = {
    "src_region": "",
    "dst_region": "",
    "tenant": "",
    "demand_gbps": 0.0,
    "weight": 1.0,
    "capacity_gbps": 0.0,
    "reason": "",
}


def _bandwidth(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
    row = _copy("job_id", "link_id", "gbps", "phase")(rec, ctx)[0]
    extra = {k: rec.get(k, default) for k, default in _QUOTA_EXTRA.items()}
    return [row | extra | {"valid_until_ts": timestamp_ms(rec["valid_until_ts"])}]


def _link(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
    row = _copy("link_id", "src_region", "dst_region", "rtt_ms", "capacity_gbps", "used_gbps")
    return [row(rec, ctx)[0] | {"loss_pct": rec.get("loss_pct", 0.0)}]


def _forecast(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
    row = _copy("region", "gpu_model", "step_s", "points", "lower", "upper", "interval", "model")(
        rec, ctx
    )[0]
    v2 = {  # fields DemandForecast v2 added; a decoded v1 record has them filled already
        "series": rec.get("series", "gpus_in_use"),
        "plan": rec.get("plan", ""),
        "selected": bool(rec.get("selected", True)),
        "service": rec.get("service", ""),  # v3: a service's rate names the service
    }
    return [row | {"issued_ts": timestamp_ms(rec["issued_ts"])} | v2]


def _dead_letter(rec: Mapping[str, Any], ctx: RowContext) -> list[Row]:
    row = _copy("source_topic", "partition", "offset", "error", "consumer")(rec, ctx)[0]
    return [
        row
        | {
            k: None if rec.get(k) is None else rec[k].decode("utf-8", "replace")
            for k in ("key", "value")
        }
    ]


Converter = Callable[[Mapping[str, Any], RowContext], list[Row]]

CONVERTERS: dict[str, tuple[str, Converter]] = {
    "NodeInventory": ("node_inventory", _inventory),
    "NodeTelemetry": ("node_telemetry", _telemetry),
    "LinkTelemetry": ("link_telemetry", _link),
    "GridSignal": (
        "grid_signals",
        _copy("region", "price_per_kwh", "carbon_g_per_kwh", "renewable_share"),
    ),
    "JobSubmitted": ("jobs_submitted", _submitted),
    "JobEvent": ("job_events", _job_event),
    "RegionSummary": ("region_state", _region_state),
    "RoutedJob": ("jobs_routed", _routed),
    "PlacementDecision": ("placement_decisions", _placement),
    "PreemptionDecision": ("preemption_decisions", _preemption),
    "MigrationDecision": ("migration_decisions", _migration),
    "NodeAdvisory": (
        "node_advisories",
        _copy("node_id", "region", "action", "reason", "job_ids", "value", "detail"),
    ),
    "BandwidthQuota": ("bandwidth_quotas", _bandwidth),
    "DemandForecast": ("demand_forecasts", _forecast),
    "ServiceLoad": (
        "service_load",
        _copy("service", "zone", "window_s", "requests_per_s", "p99_ms"),
    ),
    "DeadLetter": ("dead_letters", _dead_letter),
}

TABLE_FOR_EVENT: dict[str, str] = {event: table for event, (table, _) in CONVERTERS.items()}


def to_rows(event: str, record: Mapping[str, Any], ctx: RowContext) -> tuple[str, list[Row]]:
    """The table an event goes to and its rows; ConversionError when it cannot be converted."""
    try:
        table, convert = CONVERTERS[event]
    except KeyError:
        raise ConversionError(f"no table for event {event!r}") from None
    try:
        return table, convert(record, ctx)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ConversionError(f"{event}: {type(exc).__name__}: {exc}") from exc
