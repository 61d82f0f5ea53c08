"""Builders for NodeTelemetry records (plain dicts with the Avro field names)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["GPU_FIELDS", "SCHEMA", "gpu_sample", "telemetry_event"]

SCHEMA = 1  # the `schema` field every NodeTelemetry carries

GPU_FIELDS = (
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
    "perf_factor",
)


def gpu_sample(
    index: int, row: int, cols: Mapping[str, Sequence[Any]], xids: list[int]
) -> dict[str, Any]:
    """One GpuSample from row `row` of column lists (see `GPU_FIELDS`)."""
    return {
        "index": index,
        "healthy": cols["healthy"][row],
        "util_pct": cols["util_pct"][row],
        "mem_used_mib": cols["mem_used_mib"][row],
        "mem_bw_util_pct": cols["mem_bw_util_pct"][row],
        "nvlink_tx_mbps": cols["nvlink_tx_mbps"][row],
        "nvlink_rx_mbps": cols["nvlink_rx_mbps"][row],
        "temperature_c": cols["temperature_c"][row],
        "power_w": cols["power_w"][row],
        "sm_clock_mhz": cols["sm_clock_mhz"][row],
        "throttle_reasons": cols["throttle_reasons"][row],
        "ecc_errors": cols["ecc_errors"][row],
        "xid_events": xids,
        "perf_factor": cols["perf_factor"][row],
    }


def telemetry_event(
    node_id: str,
    region: str,
    now_ms: int,
    tier: str,
    full_snapshot: bool,
    gpus: list[dict[str, Any]],
    *,
    node_healthy: bool = True,
    disk_read_mbps: float | None = None,
    disk_write_mbps: float | None = None,
    net_rx_mbps: float | None = None,
    net_tx_mbps: float | None = None,
    energy_j: float | None = None,
    perf_per_watt: float | None = None,
) -> dict[str, Any]:
    """A NodeTelemetry record; event_id is node:ts:tier, unique per node, instant and tier."""
    return {
        "event_id": f"{node_id}:{now_ms}:{tier[0]}",
        "ts": now_ms,
        "schema": SCHEMA,
        "node_id": node_id,
        "region": region,
        "tier": tier,
        "full_snapshot": full_snapshot,
        "node_healthy": node_healthy,
        "gpus": gpus,
        "disk_read_mbps": disk_read_mbps,
        "disk_write_mbps": disk_write_mbps,
        "net_rx_mbps": net_rx_mbps,
        "net_tx_mbps": net_tx_mbps,
        "energy_j": energy_j,
        "perf_per_watt": perf_per_watt,
    }
