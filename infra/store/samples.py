"""Valid sample records for every event the store keeps (tests, benchmarks, demos).

Each function returns one Avro-ready dict; fields not given get plausible defaults.
"""

from __future__ import annotations

import uuid
from typing import Any

__all__ = [
    "bandwidth_quota",
    "demand_forecast",
    "grid_signal",
    "job_event",
    "job_submitted",
    "link_telemetry",
    "migration",
    "node_advisory",
    "node_inventory",
    "node_telemetry",
    "placement",
    "preemption",
    "region_summary",
    "routed_job",
    "service_load",
]

Record = dict[str, Any]


def _head(ts: int, event_id: str | None) -> Record:
    return {"event_id": event_id or uuid.uuid4().hex, "ts": ts, "schema": 1}


def node_inventory(
    node_id: str,
    region: str,
    gpu_model: str,
    ts: int,
    *,
    gpu_count: int = 8,
    price: float = 2.5,
    event_id: str | None = None,
) -> Record:
    return _head(ts, event_id) | {
        "node_id": node_id,
        "region": region,
        "zone": f"{region}-a",
        "rack": "r1",
        "cloud": "aws",
        "gpu_model": gpu_model,
        "gpu_count": gpu_count,
        "gpu_memory_mib": 81920,
        "interconnect": "nvlink",
        "nvlink_islands": [list(range(gpu_count))],
        "cpu_milli": 96000,
        "memory_mib": 1 << 20,
        "price_per_gpu_hour": price,
        "compute_capability": "9.0",
        "driver_version": None,
        "mig_enabled": False,
        "labels": {"pool": "default"},
    }


def gpu_sample(index: int, util: float, *, healthy: bool = True, power: float = 400.0) -> Record:
    return {
        "index": index,
        "healthy": healthy,
        "util_pct": util,
        "mem_used_mib": 1024,
        "mem_bw_util_pct": util / 2,
        "nvlink_tx_mbps": 10.0,
        "nvlink_rx_mbps": 10.0,
        "temperature_c": 60.0,
        "power_w": power,
        "sm_clock_mhz": 1800,
        "throttle_reasons": 0,
        "ecc_errors": 0,
        "xid_events": [],
        "perf_factor": 1.0,
    }


def node_telemetry(
    node_id: str, region: str, ts: int, utils: list[float], *, event_id: str | None = None
) -> Record:
    return _head(ts, event_id) | {
        "node_id": node_id,
        "region": region,
        "tier": "REALTIME",
        "full_snapshot": True,
        "node_healthy": True,
        "gpus": [gpu_sample(i, u) for i, u in enumerate(utils)],
        "disk_read_mbps": None,
        "disk_write_mbps": None,
        "net_rx_mbps": 1.0,
        "net_tx_mbps": 1.0,
        "energy_j": None,
        "perf_per_watt": None,
    }


def link_telemetry(src: str, dst: str, ts: int, *, used: float = 10.0) -> Record:
    return _head(ts, None) | {
        "link_id": f"{src}>{dst}",
        "src_region": src,
        "dst_region": dst,
        "rtt_ms": 40.0,
        "capacity_gbps": 100.0,
        "used_gbps": used,
        "loss_pct": 0.0,
    }


def grid_signal(region: str, ts: int, *, carbon: float, price: float = 0.1) -> Record:
    return _head(ts, None) | {
        "region": region,
        "price_per_kwh": price,
        "carbon_g_per_kwh": carbon,
        "renewable_share": 0.4,
    }


def job_submitted(
    job_id: str, tenant: str, ts: int, *, gpu_count: int = 1, priority: int = 0
) -> Record:
    return _head(ts, None) | {
        "job_id": job_id,
        "tenant": tenant,
        "kind": "TRAINING",
        "model_family": "llama",
        "job_type": "pretrain",
        "params_b": 7.0,
        "precision": "BF16",
        "data_parallel": 1,
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "gpu_count": gpu_count,
        "gpu_milli": 0,
        "min_gpu_memory_mib": 0,
        "cpu_milli": 1000,
        "memory_mib": 1024,
        "allowed_gpu_models": [],
        "allowed_regions": [],
        "cross_region_ok": False,
        "data_region": None,
        "priority": priority,
        "preemptible": True,
        "checkpoint_interval_s": 600,
        "deferrable_until_ts": None,
        "budget_usd": None,
        "cost_speed_preference": 0.5,
        "expected_duration_s": 3600.0,
        "reference_gpu_model": None,
        "total_steps": None,
        "grad_accum_steps": 1,
        "micro_batch": 0,
        "seq_len": 0,
    }


def routed_job(job: Record, region: str, ts: int) -> Record:
    return _head(ts, None) | {
        "job": job,
        "submitted_ts": job["ts"],
        "region": region,
        "candidates": [region],
        "attempt": 1,
        "region_score": 50.0,
        "refusals": {},
    }


def placement(
    job_id: str,
    ts: int,
    *,
    submitted_ts: int,
    outcome: str = "PLACED",
    region: str | None = "eu",
    tenant: str = "t",
    priority: int = 0,
    gpu_model: str | None = "H100",
    nodes: tuple[str, ...] = ("n1",),
    gpus_per_node: int = 1,
    price_per_hour: float | None = 2.5,
    worker_us: int = 500,
    event_id: str | None = None,
) -> Record:
    placed = outcome == "PLACED"
    assignments = (
        [
            {"node_id": n, "gpu_indices": list(range(gpus_per_node)), "gpu_milli": 1000}
            for n in nodes
        ]
        if placed
        else []
    )
    return _head(ts, event_id) | {
        "job_id": job_id,
        "outcome": outcome,
        "region": region,
        "tenant": tenant,
        "priority": priority,
        "gpu_model": gpu_model if placed else None,
        "gpu_count": len(nodes) * gpus_per_node,
        "assignments": assignments,
        "expected_throughput": 1.0 if placed else None,
        "expected_duration_s": 3600.0,
        "price_per_hour": price_per_hour if placed else None,
        "score": 70.0,
        "score_breakdown": {"cost": 20.0},
        "reasons": [],
        "refusals": {},
        "attempt": 1,
        "submitted_ts": submitted_ts,
        "worker_us": worker_us,
    }


def job_event(
    job_id: str,
    region: str,
    kind: str,
    ts: int,
    *,
    nodes: tuple[str, ...] = ("n1",),
    event_id: str | None = None,
) -> Record:
    return _head(ts, event_id) | {
        "job_id": job_id,
        "region": region,
        "type": kind,
        "node_ids": list(nodes),
        "phase": None,
        "progress": 1.0 if kind == "FINISHED" else 0.0,
        "detail": "",
    }


def _assign(node: str, gpus: int) -> Record:
    return {"node_id": node, "gpu_indices": list(range(gpus)), "gpu_milli": 1000}


def preemption(job_id: str, for_job_id: str, region: str, ts: int, *, gpus: int = 2) -> Record:
    return _head(ts, None) | {
        "job_id": job_id,
        "for_job_id": for_job_id,
        "region": region,
        "victim_assignments": [_assign("n1", gpus)],
        "checkpoint_first": True,
        "victim_priority": 0,
        "reason": "priority",
    }


def node_advisory(node_id: str, region: str, ts: int, *, action: str = "CHECKPOINT") -> Record:
    return _head(ts, None) | {
        "node_id": node_id,
        "region": region,
        "action": action,
        "reason": "HBM_SATURATION",
        "job_ids": ["j1"],
        "value": 91.0,
        "detail": "HBM bandwidth 91% > 85% over 60s",
    }


def migration(
    job_id: str,
    from_region: str,
    to_region: str,
    ts: int,
    *,
    gpus: int = 2,
    reason: str = "DEFRAGMENTATION",
) -> Record:
    return _head(ts, None) | {
        "job_id": job_id,
        "from_region": from_region,
        "from_assignments": [_assign("n1", gpus)],
        "to_region": to_region,
        "to_assignments": [_assign("n2", gpus)],
        "reason": reason,
        "expected_gain": 0.1,
    }


def bandwidth_quota(job_id: str, link_id: str, ts: int, *, gbps: float = 10.0) -> Record:
    return _head(ts, None) | {
        "job_id": job_id,
        "link_id": link_id,
        "gbps": gbps,
        "valid_until_ts": ts + 60_000,
        "phase": "COMM",
        "src_region": link_id.partition(">")[0],
        "dst_region": link_id.partition(">")[2],
        "tenant": "a",
        "demand_gbps": gbps,
        "weight": 1.0,
        "capacity_gbps": 100.0,
        "reason": "new",
    }


def region_summary(
    region: str,
    ts: int,
    *,
    total: dict[str, int],
    free: dict[str, int],
    queue_depth: int = 0,
    util: float = 50.0,
    carbon: float = 300.0,
    event_id: str | None = None,
) -> Record:
    return _head(ts, event_id) | {
        "region": region,
        "window_start": ts - 10_000,
        "window_end": ts,
        "nodes": 4,
        "healthy_nodes": 4,
        "total_gpus_by_model": total,
        "free_gpus_by_model": free,
        "max_free_per_node_by_model": free,
        "util_mean": util,
        "queue_depth": queue_depth,
        "price_per_gpu_hour_mean": 2.5,
        "carbon_g_per_kwh": carbon,
    }


def demand_forecast(
    region: str,
    gpu_model: str,
    issued_ts: int,
    step_s: int,
    points: list[float],
    *,
    series: str = "gpus_in_use",
    model: str = "HOLT_WINTERS",
    plan: str = "",
    selected: bool = True,
    service: str = "",
) -> Record:
    return _head(issued_ts, None) | {
        "region": region,
        "gpu_model": gpu_model,
        "issued_ts": issued_ts,
        "step_s": step_s,
        "points": points,
        "lower": [p * 0.9 for p in points],
        "upper": [p * 1.1 for p in points],
        "interval": 0.8,
        "model": model,
        "series": series,
        "plan": plan,
        "selected": selected,
        "service": service,
    }


def service_load(
    service: str, ts: int, rps: float, *, zone: str = "", window_s: int = 60
) -> Record:
    return _head(ts, None) | {
        "service": service,
        "window_s": window_s,
        "requests_per_s": rps,
        "p99_ms": None,
        "zone": zone,
    }
