"""The history sink's telemetry lane: NodeTelemetry messages of a poll decoded together.

Telemetry is nearly all of what the sink stores (a fleet of 10,000 nodes at 1 Hz is 80,000
GPU rows a second). Decoding it one message at a time (fastavro, a dict per GPU, then a row
dict per GPU and Arrow from those) cost ~150 µs of CPU per event; the lane reads the Avro
bodies of a whole poll column by column (`infra.store.telemetry`) and hands the batcher one
Arrow chunk of rows, ~7 µs per event. It takes only messages written with the latest
NodeTelemetry schema in the codec's framing; everything else, and every body it cannot read
plainly, goes the generic way (`HistorySink._convert`), so errors and dead letters are worded
as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from infra.store import RowError, Store
from infra.store.batching import Batch, split_bad_rows
from infra.store.telemetry import TelemetryBatch, decode_telemetry
from schemas import MAGIC, Codec, ConfluentCodec, DecodeError, SingleObjectCodec

__all__ = ["TelemetryLane", "offsets_of", "table_block", "telemetry_chunk"]

_EVENT = "NodeTelemetry"
_KNOWN_HEADERS = 1024  # distinct framing headers remembered (schema ids, fingerprints)


class TelemetryLane:
    """Picks the latest-schema NodeTelemetry messages of a poll and decodes them together."""

    def __init__(self, codec: Codec) -> None:
        self._codec = codec
        # bytes before the Avro body: magic + fingerprint, or magic byte + schema id
        self._header: int | None = None
        self._magic = b""
        if isinstance(codec, SingleObjectCodec | ConfluentCodec):
            single = isinstance(codec, SingleObjectCodec)
            self._header, self._magic = (10, MAGIC) if single else (5, b"\x00")
            self._latest = codec.schemas.get(_EVENT).fingerprint
        self._takes: dict[bytes, bool] = {}

    def takes(self, value: bytes | None) -> bool:
        """Whether a message's value is NodeTelemetry in the latest schema (by its header)."""
        size = self._header
        if size is None or value is None or len(value) <= size:
            return False
        head = value[:size]
        taken = self._takes.get(head)
        if taken is None:
            taken = self._learn(value, head)
        return taken

    def _learn(self, value: bytes, head: bytes) -> bool:
        taken = False
        if head.startswith(self._magic):
            try:
                writer = self._codec.writer(value)
            except (DecodeError, ValueError, KeyError):
                return False  # not remembered: the registry may answer next time
            taken = writer.name == _EVENT and writer.fingerprint == self._latest
        if len(self._takes) >= _KNOWN_HEADERS:
            self._takes.clear()
        self._takes[head] = taken
        return taken

    def decode(self, values: Sequence[bytes]) -> TelemetryBatch:
        """Columns of the messages' bodies (`ok` false where the generic path must look)."""
        return decode_telemetry(values, skip=self._header or 0)


def offsets_of(messages: Sequence[Any]) -> dict[tuple[str, int], int]:
    """The last offset read per topic-partition (a poll's offsets rise per partition)."""
    return {(m.topic(), m.partition()): m.offset() for m in messages}


def telemetry_chunk(
    batch: TelemetryBatch,
    fresh: Sequence[bool],
    node_models: Mapping[str, str],
    columns: Sequence[tuple[str, str]],
) -> pa.Table:
    """node_telemetry rows of the decoded events the batcher claimed (`fresh`, one per ok
    event), with each node's GPU model as known now ('' when not yet)."""
    keep: npt.NDArray[np.bool_] = batch.ok.copy()
    keep[batch.ok] = np.asarray(fresh, bool)
    models = [node_models.get(node, "") for node in batch.text("node_id", keep).to_pylist()]
    return batch.table(keep, models, columns)


def table_block(
    store: Store, table: str, batch: Batch, dead_letter: Callable[[Any, str], None]
) -> pa.Table | None:
    """A table's generic rows and ready chunks as one Arrow block (None when nothing is left);
    events whose rows do not fit the table are dead-lettered (`dead_letter(message, error)`)."""
    rows = batch.rows.get(table, [])
    parts: list[pa.Table] = list(batch.chunks.get(table, []))
    if rows:
        try:
            parts.append(store.arrow(table, rows))
        except RowError:
            sources = batch.sources.get(table, [])
            rows, bad = split_bad_rows(rows, sources, lambda r: store.arrow(table, r))
            for message, error in bad:
                dead_letter(message, f"{table}: {error}")
            if rows:
                parts.append(store.arrow(table, rows))
    if len(parts) <= 1:
        return parts[0] if parts else None
    # one block, one dictionary per LowCardinality column
    return pa.concat_tables(parts).unify_dictionaries().combine_chunks()
