"""Hostile producers: records that a scheduler in front of every team must survive.

`HostileRecords` draws, for each topic the worker consumes, a mix of
  - bytes that are not an event: random bytes, truncated and bit-flipped valid records, the
    wrong event type for the topic;
  - schema-valid events with hostile values: negative or huge counts, NaN and infinities,
    empty and 10 kB strings, timestamps far in the past or future;
  - sensible events a sender should not send but may: unknown regions, nodes and jobs,
    duplicated event ids, events out of order, a finish before a start;
  - plain valid events,
seeded, so a run can be repeated. Used by `bench/fuzz.py` and the fuzz tests.
"""

from __future__ import annotations

import math
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from infra.topics import (
    GRID_SIGNALS,
    JOBS_EVENTS,
    JOBS_ROUTED,
    JOBS_SUBMITTED,
    NODE_INVENTORY,
    NODE_TELEMETRY,
)
from schemas import Codec, SingleObjectCodec, default_schemas

__all__ = ["CONSUMED", "CONSUMER_OF", "KINDS", "Hostile", "HostileRecords", "hostile_value"]

# what the worker consumes: topic -> event
CONSUMED: dict[str, str] = {
    JOBS_SUBMITTED: "JobSubmitted",
    JOBS_ROUTED: "RoutedJob",
    JOBS_EVENTS: "JobEvent",
    NODE_INVENTORY: "NodeInventory",
    NODE_TELEMETRY: "NodeTelemetry",
    GRID_SIGNALS: "GridSignal",
}
# topic -> the worker consumer that reads it (the `consumer` of its dead letters, the key of
# its counts on the worker's /metrics/)
CONSUMER_OF: dict[str, str] = {
    JOBS_SUBMITTED: "router",
    JOBS_ROUTED: "placer",
    JOBS_EVENTS: "lifecycle",
    NODE_INVENTORY: "inventory",
    NODE_TELEMETRY: "telemetry",
    GRID_SIGNALS: "grid",
}
KINDS = (  # (kind, weight)
    ("random_bytes", 1),
    ("truncated", 1),
    ("bit_flipped", 1),
    ("wrong_type", 1),
    ("hostile_value", 4),
    ("duplicate_event_id", 1),
    ("old_ts", 1),
    ("future_ts", 1),
    ("unknown_reference", 1),
    ("valid", 3),
)
_DAY_MS = 86_400_000
_STRINGS = ("", " ", "x" * 10_240, "\x00", "région-ü-☃", "../../etc/passwd", "'; DROP TABLE x")
_INTS = (-1, 0, 1, 7, 1000, 1001, 2**31 - 1, -(2**31))
_LONGS = (-1, 0, 2**63 - 1, -(2**63), 2**53 + 1)
_REALS = (math.nan, math.inf, -math.inf, -0.0, -1.0, 1e308, 5e-324, 101.0)


@dataclass(frozen=True)
class Hostile:
    """One record to send: where, its key and bytes, and what kind of hostility it is."""

    topic: str
    key: bytes
    value: bytes
    kind: str


def hostile_value(schema: Any, rng: random.Random, depth: int = 0) -> Any:
    """A value of Avro type `schema` (fastavro's parsed form) chosen to hurt."""
    if isinstance(schema, list):  # a union: any branch
        return hostile_value(rng.choice(schema), rng, depth)
    kind = schema["type"] if isinstance(schema, dict) else schema
    if kind == "null":
        return None
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "int":
        return rng.choice(_INTS)
    if kind == "long":
        return rng.choice(_LONGS)
    if kind in ("float", "double"):
        return rng.choice(_REALS)
    if kind in ("string", "bytes"):  # 10 kB only at the top: 2,000 of them pass 1 MB
        text = rng.choice(_STRINGS if depth == 0 else _STRINGS[:2] + _STRINGS[3:])
        return text.encode() if kind == "bytes" else text
    if kind == "enum":
        return rng.choice(schema["symbols"])
    if kind == "array":
        n = rng.choice((0, 1, 3, 2000) if depth == 0 else (0, 1, 3))
        return [hostile_value(schema["items"], rng, depth + 1) for _ in range(n)]
    if kind == "map":
        n = rng.choice((0, 1, 300) if depth == 0 else (0, 1))
        return {f"k{i}": hostile_value(schema["values"], rng, depth + 1) for i in range(n)}
    if kind == "record":
        return {f["name"]: hostile_value(f["type"], rng, depth + 1) for f in schema["fields"]}
    raise ValueError(f"no hostile value for Avro type {kind!r}")


class HostileRecords:
    """Seeded hostile records for the worker's consumed topics."""

    def __init__(
        self,
        seed: int = 0,
        *,
        regions: tuple[str, ...] = ("us-east", "eu-west"),
        codec: Codec | None = None,
        nodes_per_region: int = 4,
    ) -> None:
        self.rng = random.Random(seed)
        self.codec = codec or SingleObjectCodec()
        self.regions = regions
        self.nodes = [f"{r}-fuzz-{i:02d}" for r in regions for i in range(nodes_per_region)]
        self._schemas = default_schemas()
        self._event_ids: list[str] = []
        self._jobs: list[str] = []
        self._last_ts: dict[str, int] = {}

    # ---- valid records ----------------------------------------------------------------------

    def base(self, event: str, now_ms: int | None = None) -> dict[str, Any]:
        """A valid, sensible record of `event` about this generator's fleet."""
        rng, now = self.rng, now_ms or int(time.time() * 1000)
        region, node = rng.choice(self.regions), rng.choice(self.nodes)
        env = {"event_id": str(uuid.UUID(int=rng.getrandbits(128))), "ts": now}
        if event == "NodeInventory":
            region = node.rsplit("-fuzz-", 1)[0]
            return {**env, "node_id": node, "region": region, "gpu_model": "A100-80",
                    "gpu_count": 8, "gpu_memory_mib": 81920, "nvlink_islands": [list(range(8))],
                    "cpu_milli": 96_000, "memory_mib": 2**20,
                    "price_per_gpu_hour": 2.5}  # fmt: skip
        if event == "NodeTelemetry":
            gpus = [self._gpu(i) for i in range(rng.choice((0, 1, 8)))]
            return {**env, "node_id": node, "region": node.rsplit("-fuzz-", 1)[0], "gpus": gpus,
                    "full_snapshot": len(gpus) == 8, "node_healthy": True}  # fmt: skip
        if event == "GridSignal":
            return {**env, "region": region, "price_per_kwh": 0.12, "carbon_g_per_kwh": 300.0,
                    "renewable_share": 0.4}  # fmt: skip
        if event == "JobSubmitted":
            job_id = f"fuzz-{rng.getrandbits(40):010x}"
            self._jobs.append(job_id)
            return {**env, "job_id": job_id, "gpu_count": rng.choice((1, 2, 8)),
                    "kind": "INFERENCE", "precision": "BF16", "params_b": 7.0,
                    "expected_duration_s": 30.0}  # fmt: skip
        if event == "RoutedJob":
            job = self.base("JobSubmitted", now)
            return {**env, "job": job, "submitted_ts": now, "region": region, "candidates": [],
                    "attempt": 1, "region_score": 50.0, "refusals": {}}  # fmt: skip
        if event == "JobEvent":
            job_id = rng.choice(self._jobs) if self._jobs else "fuzz-unknown"
            kind = rng.choice(("STARTED", "FINISHED", "FAILED", "CHECKPOINTED", "PHASE"))
            return {**env, "job_id": job_id, "region": region, "type": kind,
                    "node_ids": [node], "progress": 0.5}  # fmt: skip
        raise ValueError(f"no base record for {event!r}")

    def _gpu(self, index: int) -> dict[str, Any]:
        return {"index": index, "healthy": True, "util_pct": self.rng.uniform(0, 100),
                "mem_used_mib": 1024, "perf_factor": 1.0, "temperature_c": 60.0,
                "power_w": 300.0}  # fmt: skip

    # ---- hostile records --------------------------------------------------------------------

    def draw(self, topic: str) -> Hostile:
        """One hostile (or plain valid) record for `topic`."""
        kinds, weights = zip(*KINDS, strict=True)
        kind = self.rng.choices(kinds, weights)[0]
        event = CONSUMED[topic]
        record = self.base(event)
        value = getattr(self, f"_{kind}")(event, record)
        if isinstance(value, dict):
            self._event_ids.append(value["event_id"])
            value = self.codec.encode(event, value, topic=topic)
        return Hostile(topic, self._key(event, record), value, kind)

    def stream(self, topic: str, count: int) -> Iterator[Hostile]:
        for _ in range(count):
            yield self.draw(topic)

    def _key(self, event: str, record: dict[str, Any]) -> bytes:
        name = {"NodeInventory": "node_id", "NodeTelemetry": "node_id", "GridSignal": "region"}
        if event == "RoutedJob":
            return str(record["job"]["job_id"]).encode()
        return str(record.get(name.get(event, "job_id"), "")).encode()

    def _valid(self, event: str, record: dict[str, Any]) -> dict[str, Any]:
        return record

    def _random_bytes(self, event: str, record: dict[str, Any]) -> bytes:
        return self.rng.randbytes(self.rng.choice((0, 1, 9, 10, 64, 4096)))

    def _truncated(self, event: str, record: dict[str, Any]) -> bytes:
        data = self.codec.encode(event, record)
        return data[: self.rng.randrange(0, len(data))]

    def _bit_flipped(self, event: str, record: dict[str, Any]) -> bytes:
        data = bytearray(self.codec.encode(event, record))
        for _ in range(self.rng.choice((1, 2, 8))):
            data[self.rng.randrange(len(data))] ^= 1 << self.rng.randrange(8)
        return bytes(data)

    def _wrong_type(self, event: str, record: dict[str, Any]) -> bytes:
        other = self.rng.choice([e for e in CONSUMED.values() if e != event])
        return self.codec.encode(other, self.base(other))

    def _hostile_value(self, event: str, record: dict[str, Any]) -> dict[str, Any]:
        fields = self._schemas.get(event).parsed["fields"]
        for f in self.rng.sample(fields, self.rng.choice((1, 1, 2, 3))):
            if f["name"] != "schema":
                record[f["name"]] = hostile_value(f["type"], self.rng)
        if event == "NodeTelemetry" and record.get("gpus") and self.rng.random() < 0.5:
            gpu_fields = self._schemas.get(event).parsed["fields"]
            item = next(f for f in gpu_fields if f["name"] == "gpus")["type"]["items"]
            target = self.rng.choice(record["gpus"])
            f = self.rng.choice(item["fields"])
            target[f["name"]] = hostile_value(f["type"], self.rng)
        return record

    def _duplicate_event_id(self, event: str, record: dict[str, Any]) -> dict[str, Any]:
        if self._event_ids:
            record["event_id"] = self.rng.choice(self._event_ids[-1000:])
        return record

    def _old_ts(self, event: str, record: dict[str, Any]) -> dict[str, Any]:
        record["ts"] = self.rng.choice((0, 1, record["ts"] - 365 * _DAY_MS, record["ts"] - 60_000))
        return record

    def _future_ts(self, event: str, record: dict[str, Any]) -> dict[str, Any]:
        record["ts"] += self.rng.choice((3 * _DAY_MS, 365 * _DAY_MS, 2**62 - record["ts"]))
        return record

    def _unknown_reference(self, event: str, record: dict[str, Any]) -> dict[str, Any]:
        unknown = f"unknown-{self.rng.getrandbits(32):08x}"
        for name in ("node_id", "region", "job_id"):
            if name in record and self.rng.random() < 0.6:
                record[name] = unknown
        if event == "JobEvent":  # a finish before a start, or twice
            record["type"] = self.rng.choice(("FINISHED", "STARTED", "FINISHED"))
        if event == "RoutedJob":
            record["region"] = unknown
        return record
