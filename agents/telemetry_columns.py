"""NodeTelemetry from the fleet's per-GPU columns, written many bodies per numpy step.

A fleet of 10,000 nodes reporting every GPU every second is ~11,000 events a second. Built as
dicts and written by fastavro, each costs ~100 µs of the publisher's CPU (a dict per GPU, then
a field-by-field walk), so one core cannot keep up. `SimulatedFleet.telemetry_tick` returns a
`TelemetryTick` instead: which nodes report which GPUs, over the fleet's column arrays. Its
`events()` are the same dicts as before; `TelemetryWriter.bodies` writes the same bytes as
fastavro would (single-object encoding, tested byte for byte), each field of every sampled GPU
at once.

The writer takes only the plain form: events without XIDs or NEARLINE/SLOW readings, written
with the NodeTelemetry schema it was made for. Those others (a few per node per minute) stay in
`TelemetryTick.extra` as dicts and go through the codec.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from agents.telemetry import GPU_FIELDS, SCHEMA, gpu_sample, telemetry_event
from schemas.codec import MAGIC
from schemas.registry import EventSchema

__all__ = ["TelemetryTick", "TelemetryWriter", "fits"]

Ints = npt.NDArray[np.int64]
Bytes = npt.NDArray[np.uint8]

TIERS = ("REALTIME", "NEARLINE", "SLOW", "HEARTBEAT")
_NULLABLE = ("disk_read_mbps", "disk_write_mbps", "net_rx_mbps", "net_tx_mbps", "energy_j",
             "perf_per_watt")  # fmt: skip
# (name, type) of every field the writer writes, in order: a schema that differs is not
# written here (the fleet's events then go through the codec)
_EVENT_FIELDS = (
    ("event_id", "string"), ("ts", "long"), ("schema", "int"), ("node_id", "string"),
    ("region", "string"), ("tier", "enum:" + ",".join(TIERS)), ("full_snapshot", "boolean"),
    ("node_healthy", "boolean"), ("gpus", "array"), ("disk_read_mbps", "null|float"),
    ("disk_write_mbps", "null|float"), ("net_rx_mbps", "null|float"),
    ("net_tx_mbps", "null|float"), ("energy_j", "null|double"), ("perf_per_watt", "null|float"),
)  # fmt: skip
_GPU_FIELDS = (
    ("index", "int"), ("healthy", "boolean"), ("util_pct", "float"), ("mem_used_mib", "int"),
    ("mem_bw_util_pct", "float"), ("nvlink_tx_mbps", "float"), ("nvlink_rx_mbps", "float"),
    ("temperature_c", "float"), ("power_w", "float"), ("sm_clock_mhz", "int"),
    ("throttle_reasons", "long"), ("ecc_errors", "long"), ("xid_events", "array"),
    ("perf_factor", "float"),
)  # fmt: skip
_FLOATS = ("mem_bw_util_pct", "nvlink_tx_mbps", "nvlink_rx_mbps", "temperature_c", "power_w")
# (tier, full_snapshot, node_healthy) -> the enum index and the two booleans, as written
_FLAGS = {(t, f, h): bytes([2 * TIERS.index(t), f, h])
          for t in TIERS for f in (False, True) for h in (False, True)}  # fmt: skip


@dataclass
class TelemetryTick:
    """The NodeTelemetry one tick of a fleet sends: columnar events first, then `extra` dicts.

    Columnar event e is node `node[e]` reporting `count[e]` GPUs; their device indices and
    rows in `columns` are the next `count[e]` entries of `gpu_index` and `gpu_row`.
    """

    now_ms: int
    nodes: Sequence[Mapping[str, Any]]  # the fleet's inventory records (node_id, region)
    columns: Mapping[str, np.ndarray]  # per fleet GPU, see agents.telemetry.GPU_FIELDS
    node: list[int] = field(default_factory=list)
    tier: list[str] = field(default_factory=list)
    full: list[bool] = field(default_factory=list)
    healthy: list[bool] = field(default_factory=list)
    count: list[int] = field(default_factory=list)
    gpu_index: list[int] = field(default_factory=list)
    gpu_row: list[int] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.node) + len(self.extra)

    def add(self, node: int, tier: str, full: bool, healthy: bool, base: int,
            gpu_indices: Sequence[int]) -> None:  # fmt: skip
        self.node.append(node)
        self.tier.append(tier)
        self.full.append(full)
        self.healthy.append(healthy)
        self.count.append(len(gpu_indices))
        self.gpu_index.extend(gpu_indices)
        self.gpu_row.extend(base + k for k in gpu_indices)

    def columnar_events(self) -> list[dict[str, Any]]:
        """The columnar events as NodeTelemetry dicts (what the writer's bodies decode to)."""
        cols = {f: self.columns[f][self.gpu_row].tolist() for f in GPU_FIELDS}
        out, at = [], 0
        for e, i in enumerate(self.node):
            n = self.count[e]
            gpus = [gpu_sample(self.gpu_index[at + j], at + j, cols, []) for j in range(n)]
            at += n
            nd = self.nodes[i]
            out.append(
                telemetry_event(
                    nd["node_id"],
                    nd["region"],
                    self.now_ms,
                    self.tier[e],
                    self.full[e],
                    gpus,
                    node_healthy=self.healthy[e],
                )
            )
        return out

    def events(self) -> list[dict[str, Any]]:
        """Every event of the tick as a NodeTelemetry dict."""
        return self.columnar_events() + self.extra


def _type_tag(avro_type: Any) -> str:
    if isinstance(avro_type, list):
        return "|".join(_type_tag(t) for t in avro_type)
    if isinstance(avro_type, dict):
        if avro_type.get("type") == "enum":
            return "enum:" + ",".join(avro_type.get("symbols", ()))
        return str(avro_type.get("type"))
    return str(avro_type)


def fits(schema: EventSchema) -> bool:
    """Whether `schema` lays NodeTelemetry out exactly as the writer writes it."""
    fields = schema.self_contained.get("fields", ())
    if tuple((f["name"], _type_tag(f["type"])) for f in fields) != _EVENT_FIELDS:
        return False
    gpus = next(f["type"] for f in fields if f["name"] == "gpus")
    items = gpus.get("items", {}) if isinstance(gpus, dict) else {}
    if not isinstance(items, dict):
        return False
    found = tuple((f["name"], _type_tag(f["type"])) for f in items.get("fields", ()))
    return found == _GPU_FIELDS and _type_tag(items["fields"][12]["type"]["items"]) == "int"


def _varints(values: Ints) -> tuple[Bytes, Ints]:
    """Zigzag varints (Avro int and long) of `values`: one row of bytes each, and its length."""
    z = ((values << 1) ^ (values >> 63)).view(np.uint64)
    lengths = np.ones(len(z), np.int64)
    for k in range(1, 10):
        lengths += z >= np.uint64(1 << (7 * k))
    width = int(lengths.max()) if len(z) else 1
    shifts = (7 * np.arange(width)).astype(np.uint64)
    rows = ((z[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    more = np.arange(width) < (lengths[:, None] - 1)
    rows |= more.astype(np.uint8) << 7
    return rows, lengths


def _varint(value: int) -> bytes:
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _string(text: str) -> bytes:
    raw = text.encode()
    return _varint(len(raw)) + raw


def _join(parts: Sequence[tuple[Bytes, Ints | None]], n: int) -> tuple[bytes, Ints]:
    """Lay rows of several parts side by side: part by part within a row, row after row.

    A part is a byte matrix with one row per output row and the number of its bytes each row
    uses (None: all of them). Returns the bytes and where each row starts (n + 1 offsets).
    """
    row_len = np.zeros(n, np.int64)
    for rows, used in parts:
        row_len += rows.shape[1] if used is None else used
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(row_len, out=starts[1:])
    out = np.empty(int(starts[-1]), np.uint8)
    at = starts[:-1].copy()
    for rows, used in parts:
        cols = np.arange(rows.shape[1])
        where = at[:, None] + cols
        if used is None:
            out[where] = rows
            at += rows.shape[1]
        else:
            keep = cols < used[:, None]
            out[where[keep]] = rows[keep]
            at += used
    return out.tobytes(), starts


def _bytes_of(values: np.ndarray, dtype: str) -> Bytes:
    """Each row of `values` (one value, or one per column) as little-endian bytes."""
    typed = np.ascontiguousarray(values.astype(dtype))
    width = typed.itemsize * (typed.shape[1] if typed.ndim == 2 else 1)
    return typed.view(np.uint8).reshape(len(values), width)


class TelemetryWriter:
    """Writes a tick's columnar events as single-object-encoded NodeTelemetry bodies."""

    def __init__(self, schema: EventSchema) -> None:
        if not fits(schema):
            raise ValueError(f"NodeTelemetry v{schema.version} is not the layout this writer knows")
        self.header = MAGIC + schema.fingerprint
        self._node_part: dict[tuple[str, str], bytes] = {}
        self._tail = b"\x00" * len(_NULLABLE)  # every nullable reading null

    def _gpu_samples(self, tick: TelemetryTick) -> tuple[bytes, Ints]:
        rows = np.asarray(tick.gpu_row, np.int64)
        col = {name: np.asarray(values)[rows] for name, values in tick.columns.items()}
        n = len(rows)
        floats = np.stack([col[f] for f in _FLOATS], axis=1) if n else np.zeros((0, 5))
        parts: list[tuple[Bytes, Ints | None]] = [
            _varints(np.asarray(tick.gpu_index, np.int64)),
            (col["healthy"].astype(np.uint8).reshape(n, 1), None),
            (_bytes_of(col["util_pct"], "<f4"), None),
            _varints(col["mem_used_mib"].astype(np.int64)),
            (_bytes_of(floats, "<f4"), None),
            _varints(col["sm_clock_mhz"].astype(np.int64)),
            _varints(col["throttle_reasons"].astype(np.int64)),
            _varints(col["ecc_errors"].astype(np.int64)),
            (np.zeros((n, 1), np.uint8), None),  # no XIDs
            (_bytes_of(col["perf_factor"], "<f4"), None),
        ]
        return _join(parts, n)

    def _node(self, node_id: str, region: str) -> bytes:
        part = self._node_part.get((node_id, region))
        if part is None:
            part = self._node_part[node_id, region] = _string(node_id) + _string(region)
        return part

    def bodies(self, tick: TelemetryTick) -> list[bytes]:
        """One encoded NodeTelemetry per columnar event of `tick`, in order."""
        samples, offsets = self._gpu_samples(tick)
        starts = offsets.tolist()
        ts = _varint(tick.now_ms) + _varint(SCHEMA)  # the ts field, then the schema field
        header, tail, now = self.header, self._tail, tick.now_ms
        out, at = [], 0
        for e, i in enumerate(tick.node):
            n, tier = tick.count[e], tick.tier[e]
            node_id, region = tick.nodes[i]["node_id"], tick.nodes[i]["region"]
            parts = [header, _string(f"{node_id}:{now}:{tier[0]}"), ts, self._node(node_id, region),
                     _FLAGS[tier, tick.full[e], tick.healthy[e]]]  # fmt: skip
            if n:
                parts += [_varint(n), samples[starts[at] : starts[at + n]], b"\x00"]
                at += n
            else:
                parts.append(b"\x00")
            parts.append(tail)
            out.append(b"".join(parts))
        return out
