"""NodeTelemetry reports as columns: what the worker applies, for one report or thousands.

`Reports` holds N reports (node id, region, time, node health) and their GPU rows (the report
each belongs to, GPU index, health, speed, utilisation, HBM bandwidth, ECC count, critical
XIDs). A decoded record becomes a one-report batch (`from_records`); a poll of messages
decoded column by column (`infra.store.telemetry.decode_telemetry`) becomes one batch
(`from_columns`), without a dict per event or per GPU. `FleetTracker.on_reports` applies
either, so one code path decides what a report does to the fleet.

`acceptable` is `streams.validation`'s NodeTelemetry check over columns: a row it passes
would pass `problems("NodeTelemetry", ...)`; a row it does not pass (or one it is not sure
of, such as the first report of a region) goes the generic way, which words the error or
accepts it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from infra.store.telemetry import TelemetryBatch
from scorer.protection import CRITICAL_XIDS
from streams.scheduler.validation import (
    GPU_REALS,
    MAX_ID_CHARS,
    MAX_LIST,
    MAX_NODE_GPUS,
    NODE_READINGS,
    Rules,
)

__all__ = ["Reports", "acceptable"]

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]

_CRITICAL = np.array(sorted(CRITICAL_XIDS), np.int64)


@dataclass
class Reports:
    """N telemetry reports and their GPU rows (`owner`: the report of each row)."""

    node_id: list[str]
    region: list[str]
    ts: Ints
    node_healthy: Bools
    owner: Ints
    index: Ints
    healthy: Bools
    perf: Floats
    util: Floats
    bw: Floats
    ecc: Ints
    critical: Ints  # critical XIDs in this report, per GPU row

    def __len__(self) -> int:
        return len(self.node_id)

    def gpu_counts(self) -> Ints:
        """GPU rows of each report."""
        return np.bincount(self.owner, minlength=len(self)).astype(np.int64)

    def gpu_rows(self) -> list[tuple[int, int]]:
        """(first, end) of each report's GPU rows (rows are grouped by report, in order)."""
        ends = np.cumsum(self.gpu_counts())
        starts = np.concatenate(([0], ends[:-1]))
        return list(zip(starts.tolist(), ends.tolist(), strict=True))

    def take(self, reports: Ints) -> Reports:
        """The given reports (in the given order), with their GPU rows."""
        keep = np.zeros(len(self), bool)
        keep[reports] = True
        position = np.full(len(self), -1, np.int64)
        position[reports] = np.arange(len(reports))
        rows = np.flatnonzero(keep[self.owner])
        rows = rows[np.argsort(position[self.owner[rows]], kind="stable")]
        return Reports(
            node_id=[self.node_id[i] for i in reports.tolist()],
            region=[self.region[i] for i in reports.tolist()],
            ts=self.ts[reports],
            node_healthy=self.node_healthy[reports],
            owner=position[self.owner[rows]],
            index=self.index[rows],
            healthy=self.healthy[rows],
            perf=self.perf[rows],
            util=self.util[rows],
            bw=self.bw[rows],
            ecc=self.ecc[rows],
            critical=self.critical[rows],
        )

    def rounds(self) -> Iterator[Reports]:
        """The reports in rounds in which no node appears twice, each node's in their order
        (a batch read behind a backlog can hold several reports of one node)."""
        seen: dict[str, int] = {}
        turn = np.empty(len(self), np.int64)
        for i, node_id in enumerate(self.node_id):
            turn[i] = seen.get(node_id, 0)
            seen[node_id] = turn[i] + 1
        if not len(self) or int(turn.max()) == 0:
            yield self
            return
        for k in range(int(turn.max()) + 1):
            yield self.take(np.flatnonzero(turn == k))

    @classmethod
    def from_records(cls, records: Sequence[Mapping[str, Any]]) -> Reports:
        """Decoded NodeTelemetry records (validated) as a batch."""
        owner: list[int] = []
        columns: dict[str, list[Any]] = {k: [] for k in ("index", "healthy", "perf", "util")}
        bw: list[float] = []
        ecc: list[int] = []
        critical: list[int] = []
        for i, record in enumerate(records):
            for g in record.get("gpus") or ():
                owner.append(i)
                columns["index"].append(int(g["index"]))
                columns["healthy"].append(bool(g["healthy"]))
                columns["perf"].append(float(g["perf_factor"]))
                columns["util"].append(float(g["util_pct"]))
                bw.append(float(g.get("mem_bw_util_pct") or 0.0))
                ecc.append(int(g.get("ecc_errors") or 0))
                critical.append(
                    sum(1 for x in g.get("xid_events") or () if int(x) in CRITICAL_XIDS)
                )
        return cls(
            node_id=[str(r["node_id"]) for r in records],
            region=[str(r["region"]) for r in records],
            ts=np.array([int(r.get("ts") or 0) for r in records], np.int64),
            node_healthy=np.array([bool(r.get("node_healthy", True)) for r in records], bool),
            owner=np.array(owner, np.int64),
            index=np.array(columns["index"], np.int64),
            healthy=np.array(columns["healthy"], bool),
            perf=np.array(columns["perf"], np.float64),
            util=np.array(columns["util"], np.float64),
            bw=np.array(bw, np.float64),
            ecc=np.array(ecc, np.int64),
            critical=np.array(critical, np.int64),
        )

    @classmethod
    def from_columns(cls, batch: TelemetryBatch, keep: Bools) -> Reports:
        """The kept events of a decoded poll (every kept event must be `batch.ok`)."""
        rows = np.repeat(keep, batch.gpu_count)
        counts = batch.gpu_count[keep]
        gpus = batch.gpus
        return cls(
            node_id=batch.text("node_id", keep).to_pylist(),
            region=batch.text("region", keep).to_pylist(),
            ts=batch.events["ts"][keep].astype(np.int64),
            node_healthy=batch.events["node_healthy"][keep].astype(bool),
            owner=np.repeat(np.arange(len(counts)), counts),
            index=gpus["gpu_index"][rows].astype(np.int64),
            healthy=gpus["healthy"][rows].astype(bool),
            perf=gpus["perf_factor"][rows].astype(np.float64),
            util=gpus["util_pct"][rows].astype(np.float64),
            bw=gpus["mem_bw_util_pct"][rows].astype(np.float64),
            ecc=gpus["ecc_errors"][rows].astype(np.int64),
            critical=_critical_xids(batch)[rows],
        )


def _critical_xids(batch: TelemetryBatch) -> Ints:
    """Critical XID codes per GPU row of the batch."""
    offsets = batch.xid_offsets
    row = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    hit = np.isin(batch.xid_values, _CRITICAL)
    return np.bincount(row[hit], minlength=len(offsets) - 1).astype(np.int64)


def acceptable(batch: TelemetryBatch, rules: Rules) -> Bools:
    """Events of a decoded poll that `problems("NodeTelemetry", ...)` would pass (a subset:
    anything unsure goes the generic way, which decides and words the error)."""
    ok = batch.ok.copy()
    ts = batch.events["ts"]
    ok &= (ts >= 0) & (ts - rules.clock_ms() <= rules.max_future_ms)
    count = batch.gpu_count
    ok &= count <= MAX_NODE_GPUS
    owner = np.repeat(np.arange(len(count)), count)
    bad_rows = ~_gpu_rows_fine(batch, owner)
    ok &= np.bincount(owner[bad_rows], minlength=len(count)) == 0
    for name in NODE_READINGS:
        value = batch.events[name].astype(np.float64)
        fine = batch.nulls[name] | (np.isfinite(value) & (value >= 0.0))
        ok &= fine
    for name in ("event_id", "node_id", "region"):
        ok = _id_fine(batch, name, ok)
    known = rules.known_regions
    regions = batch.text("region", ok).to_pylist()
    for i, region in zip(np.flatnonzero(ok).tolist(), regions, strict=True):
        if region not in known:  # a new region counts against max_regions: generic path
            ok[i] = False
    return ok


def _gpu_rows_fine(batch: TelemetryBatch, owner: Ints) -> Bools:
    gpus = batch.gpus
    index = gpus["gpu_index"].astype(np.int64)
    fine = (index >= 0) & (index < MAX_NODE_GPUS)
    for name, (low, high) in GPU_REALS.items():  # the bounds validation checks, as columns
        value = gpus[name].astype(np.float64)
        fine &= np.isfinite(value)
        fine &= (value >= (-np.inf if low is None else low)) & (
            value <= (np.inf if high is None else high)
        )
    for name in ("mem_used_mib", "sm_clock_mhz", "ecc_errors"):
        fine &= gpus[name].astype(np.int64) >= 0
    fine &= np.diff(batch.xid_offsets) <= MAX_LIST
    if len(index):  # indices distinct within a report
        order = np.lexsort((index, owner))
        same = (np.diff(owner[order]) == 0) & (np.diff(index[order]) == 0)
        dup = np.zeros(len(index), bool)
        dup[order[1:][same]] = True
        fine &= ~dup
    return fine


def _id_fine(batch: TelemetryBatch, name: str, candidates: Bools) -> Bools:
    """Identifiers that are not empty (or blank) and at most MAX_ID_CHARS characters (in
    bytes here: more bytes than that may still be few enough characters; generic path)."""
    start, size = batch.strings[name]
    fine = candidates & (size > 0) & (size <= MAX_ID_CHARS)
    first = batch.buf[np.minimum(start, max(len(batch.buf) - 1, 0))] if len(batch.buf) else start
    alnum = (
        ((first >= 0x30) & (first <= 0x39))
        | ((first >= 0x41) & (first <= 0x5A))
        | ((first >= 0x61) & (first <= 0x7A))
    )
    unsure = fine & ~alnum  # may be whitespace only: look at the text
    for i, text in zip(
        np.flatnonzero(unsure).tolist(), batch.text(name, unsure).to_pylist(), strict=True
    ):
        if not text.strip():
            fine[i] = False
    return np.asarray(fine)
