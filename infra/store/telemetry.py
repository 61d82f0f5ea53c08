"""NodeTelemetry bodies -> node_telemetry columns, many events at once (the sink's hot path).

`decode_telemetry` reads Avro bodies written with the latest NodeTelemetry schema field by
field across all of them (`_avro_columns`), and `TelemetryBatch.table` builds the same Arrow
table that `to_rows` + `Store.arrow` build from decoded dicts (one row per GPU, node fields
repeated, the GPU model from the node's inventory), without a dict per event or per GPU.
Bodies it cannot read plainly (`TelemetryBatch.ok` false) go the generic way, which decodes
them or dead-letters them with the reason; so do values a column cannot hold (a negative
memory reading), leaving the generic path to word the error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from infra.store._arrow import arrow_type
from infra.store._avro_columns import BodyReader, Ints, Selection, string_array, subset

__all__ = ["TIERS", "TelemetryBatch", "decode_telemetry"]

# the TelemetryTier enum's symbols, in schema order (a test pins them to the .avsc)
TIERS = ("REALTIME", "NEARLINE", "SLOW", "HEARTBEAT")
_MAX_GPUS = 4096
_MAX_XIDS = 4096
_MIN_GPU_BYTES = 35  # a GpuSample: at least 7 one-byte varints/booleans and 7 floats
_UINT32 = 2**32 - 1
_UINT16 = 2**16 - 1
_INT32 = 2**31
# timestamps fastavro turns into datetimes and back exactly; outside, the generic path decides
_TS_RANGE = (0, 4_102_444_800_000)  # 1970 .. 2100
_GPU_FLOATS = ("mem_bw_util_pct", "nvlink_tx_mbps", "nvlink_rx_mbps", "temperature_c", "power_w")
_NODE_OPTIONAL = (
    ("disk_read_mbps", "<f4"),
    ("disk_write_mbps", "<f4"),
    ("net_rx_mbps", "<f4"),
    ("net_tx_mbps", "<f4"),
    ("energy_j", "<f8"),
    ("perf_per_watt", "<f4"),
)

Column = npt.NDArray[Any]
_GPU_NAMES = (
    "gpu_index", "healthy", "util_pct", "mem_used_mib", *_GPU_FLOATS,
    "sm_clock_mhz", "throttle_reasons", "ecc_errors", "perf_factor",
)  # fmt: skip


@dataclass
class TelemetryBatch:
    """Decoded columns of N events: event-level arrays (N) and GPU rows (sum of gpu counts)."""

    buf: npt.NDArray[np.uint8]
    ok: npt.NDArray[np.bool_]  # decoded plainly; the others go the generic way
    gpu_count: Ints
    events: dict[str, Column]  # ts, schema, full_snapshot, node_healthy, tier, optionals
    nulls: dict[str, npt.NDArray[np.bool_]]
    strings: dict[str, tuple[Ints, Ints]]  # event_id, node_id, region: (start, size) in buf
    gpus: dict[str, Column]
    xid_offsets: npt.NDArray[np.int32]  # per GPU row, into xid_values
    xid_values: npt.NDArray[np.int32]

    def text(self, name: str, keep: npt.NDArray[np.bool_]) -> pa.Array:
        start, size = self.strings[name]
        return string_array(self.buf, start[keep], size[keep])

    def table(
        self,
        keep: npt.NDArray[np.bool_],
        gpu_models: Sequence[str],
        columns: Sequence[tuple[str, str]],
    ) -> pa.Table:
        """The node_telemetry rows of the kept events (`gpu_models`: one per kept event)."""
        counts = self.gpu_count[keep]
        owner = np.repeat(np.arange(len(counts)), counts)  # kept event of each row
        rows = np.repeat(keep, self.gpu_count)

        def per_row(values: Column) -> Column:
            return values[keep][owner]

        def lookup(strings: pa.Array) -> pa.Array:
            return strings.dictionary_encode().take(pa.array(owner))

        data: dict[str, pa.Array | Column] = {
            "ts": pa.array(per_row(self.events["ts"]), pa.int64()).cast(
                arrow_type("DateTime64(3)")
            ),
            "event_id": self.text("event_id", keep).take(pa.array(owner)),
            "node_id": self.text("node_id", keep).take(pa.array(owner)),
            "region": lookup(self.text("region", keep)),
            "gpu_model": lookup(pa.array(gpu_models, pa.string())),
            "tier": pa.DictionaryArray.from_arrays(
                pa.array(per_row(self.events["tier"]).astype(np.int32)), pa.array(TIERS)
            ),
            "xid_events": _xid_lists(self.xid_offsets, self.xid_values, rows),
        }
        for name in ("schema", "full_snapshot", "node_healthy"):
            data[name] = per_row(self.events[name])
        for name, values in self.gpus.items():
            data[name] = values[rows]
        for name, _ in _NODE_OPTIONAL:
            data[name] = pa.array(per_row(self.events[name]), mask=per_row(self.nulls[name]))
        arrays = []
        for name, ch_type in columns:
            kind = arrow_type(ch_type)
            value = data[name]
            array = value if isinstance(value, pa.Array) else pa.array(value, kind)
            if array.type != kind and not pa.types.is_dictionary(array.type):
                array = array.cast(kind)
            if ch_type == "LowCardinality(String)" and not pa.types.is_dictionary(array.type):
                array = array.dictionary_encode()
            arrays.append(array)
        return pa.Table.from_arrays(arrays, names=[name for name, _ in columns])


def _xid_lists(
    offsets: npt.NDArray[np.int32], values: npt.NDArray[np.int32], rows: npt.NDArray[np.bool_]
) -> pa.Array:
    lists = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.int32()))
    return lists.filter(pa.array(rows))


def decode_telemetry(bodies: Sequence[bytes], skip: int = 0) -> TelemetryBatch:
    """Decode NodeTelemetry bodies (latest schema) into columns; `skip`: framing bytes before
    each body."""
    r = BodyReader(bodies, skip)
    every = slice(None)
    strings: dict[str, tuple[Ints, Ints]] = {"event_id": r.string(every)}
    events: dict[str, Column] = {"ts": r.varint(every), "schema": r.varint(every)}
    strings["node_id"] = r.string(every)
    strings["region"] = r.string(every)
    events["tier"] = r.varint(every)
    events["full_snapshot"] = r.boolean(every)
    events["node_healthy"] = r.boolean(every)
    count = r.block_count(every, _MAX_GPUS, _MIN_GPU_BYTES)
    gpus, xids = _read_gpus(r, count)
    r.block_end(every, count)
    nulls = {}
    for name, dtype in _NODE_OPTIONAL:
        events[name], nulls[name] = r.optional(every, dtype)
    ok = r.done()
    ok &= (events["tier"] >= 0) & (events["tier"] < len(TIERS))
    ok &= (events["schema"] >= 0) & (events["schema"] <= _UINT16)
    ok &= (events["ts"] >= _TS_RANGE[0]) & (events["ts"] < _TS_RANGE[1])
    rows_fit = _gpus_fit(gpus) & _xids_fit(xids, len(gpus["gpu_index"]))
    owner = np.repeat(np.arange(len(count)), count)
    ok &= np.bincount(owner[~rows_fit], minlength=len(count)) == 0
    batch = TelemetryBatch(
        r.buf, ok, count, events, nulls, strings, gpus, *_xid_layout(xids, len(rows_fit))
    )
    _check_utf8(batch)
    return batch


_Xids = tuple[Ints, Ints, Ints]  # (row, position in its list, value)


def _read_gpus(r: BodyReader, count: Ints) -> tuple[dict[str, Column], _Xids]:
    """GPU k of every event that has one, k = 0, 1, ...; returned in row order (event, k)."""
    width = int(count.max()) if len(count) else 0
    slot = np.arange(width)[None, :] < count[:, None]  # (event, k) that hold a GPU
    row_of = np.zeros(slot.shape, np.int64)
    row_of[slot] = np.arange(int(slot.sum()))
    grid: dict[str, list[Column]] = {name: [] for name in _GPU_NAMES}
    xid_parts: list[_Xids] = []
    for k in range(width):
        has = count > k
        sel: Selection = slice(None) if has.all() else np.flatnonzero(has)
        fields: dict[str, Column] = {
            "gpu_index": r.varint(sel),
            "healthy": r.boolean(sel),
            "util_pct": r.fixed(sel, "<f4"),
            "mem_used_mib": r.varint(sel),
        }
        floats = r.fixed(sel, "<f4", len(_GPU_FLOATS))
        for i, name in enumerate(_GPU_FLOATS):
            fields[name] = floats[:, i]
        fields["sm_clock_mhz"] = r.varint(sel)
        fields["throttle_reasons"] = r.varint(sel)
        fields["ecc_errors"] = r.varint(sel)
        xid_parts.append(_read_xids(r, sel, row_of[sel, k]))
        fields["perf_factor"] = r.fixed(sel, "<f4")
        for name, values in fields.items():
            column = np.zeros(len(count), values.dtype)
            column[sel] = values
            grid[name].append(column)
    full = bool(slot.all())  # every event has `width` GPUs: a reshape, not a mask
    gpus = {
        name: (np.stack(parts, axis=1).reshape(-1) if full else np.stack(parts, axis=1)[slot])
        if parts
        else np.zeros(0, np.int64)
        for name, parts in grid.items()
    }
    return gpus, _concat(xid_parts)


def _concat(parts: Sequence[_Xids]) -> _Xids:
    if not parts:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    row, at, value = (np.concatenate(p) for p in zip(*parts, strict=True))
    return row, at, value


def _read_xids(r: BodyReader, sel: Selection, rows: Ints) -> _Xids:
    """The xid_events arrays of one GPU slot: (row, position, value) for every code."""
    count = r.block_count(sel, _MAX_XIDS, 1)
    parts: list[_Xids] = []
    for j in range(int(count.max()) if len(count) else 0):
        has = count > j
        parts.append((rows[has], np.full(int(has.sum()), j), r.varint(subset(sel, has))))
    r.block_end(sel, count)
    return _concat(parts)


def _xid_layout(xids: _Xids, n_rows: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """List offsets per GPU row and the codes in row order."""
    row, at, value = xids
    order = np.lexsort((at, row))
    offsets = np.zeros(n_rows + 1, np.int32)
    np.cumsum(np.bincount(row, minlength=n_rows)[:n_rows], out=offsets[1:])
    return offsets, value[order].astype(np.int32)


def _gpus_fit(gpus: Mapping[str, Column]) -> npt.NDArray[np.bool_]:
    """GPU rows whose integers fit their columns (UInt16, UInt32, UInt64)."""
    fits = (gpus["gpu_index"] >= 0) & (gpus["gpu_index"] <= _UINT16)
    for name in ("mem_used_mib", "sm_clock_mhz"):
        fits &= (gpus[name] >= 0) & (gpus[name] <= _UINT32)
    for name in ("throttle_reasons", "ecc_errors"):
        fits &= gpus[name] >= 0
    return np.asarray(fits)


def _xids_fit(xids: _Xids, n_rows: int) -> npt.NDArray[np.bool_]:
    row, _, value = xids
    bad = row[(value < -_INT32) | (value >= _INT32)]
    fits = np.ones(n_rows, bool)
    fits[bad] = False
    return fits


def _check_utf8(batch: TelemetryBatch) -> None:
    """Refuse (leave to the generic path) events with a string that is not UTF-8."""
    for name in batch.strings:
        try:
            batch.text(name, batch.ok).validate(full=True)
        except pa.ArrowInvalid:
            start, size = batch.strings[name]
            for i in np.flatnonzero(batch.ok):
                try:
                    batch.buf[start[i] : start[i] + size[i]].tobytes().decode("utf-8")
                except UnicodeDecodeError:
                    batch.ok[i] = False
