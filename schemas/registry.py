"""The event schemas: one `.avsc` per event, parsed once, indexed by name and fingerprint."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from fastavro.schema import expand_schema, parse_schema, to_parsing_canonical_form

from schemas.errors import UnknownSchemaError

__all__ = ["EVENT_NAMES", "NAMESPACE", "EventSchema", "SchemaSet", "crc64_avro", "default_schemas"]

NAMESPACE = "gpuflow.v1"
# Parse order matters only for references: RoutedJob embeds JobSubmitted.
EVENT_NAMES: tuple[str, ...] = (
    "NodeInventory",
    "NodeTelemetry",
    "LinkTelemetry",
    "GridSignal",
    "JobSubmitted",
    "JobEvent",
    "RegionSummary",
    "RoutedJob",
    "PlacementDecision",
    "PreemptionDecision",
    "MigrationDecision",
    "BandwidthQuota",
    "DemandForecast",
    "DeadLetter",
    "ReplanTick",
)

_EMPTY = 0xC15D213AA4D7A795  # CRC-64-AVRO seed, from the Avro specification


@cache
def _crc64_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (_EMPTY & -(fp & 1))
        table.append(fp)
    return tuple(table)


def crc64_avro(data: bytes) -> int:
    """The Rabin fingerprint Avro uses for single-object encoding."""
    table = _crc64_table()
    fp = _EMPTY
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


def _strip_timestamp_logical_types(node: Any) -> Any:
    # Timestamps travel as plain ms ints inside gpuflow; logicalType stays in the .avsc for other
    # readers. The parsing canonical form ignores logicalType, so fingerprints do not change.
    if isinstance(node, dict):
        out = {k: _strip_timestamp_logical_types(v) for k, v in node.items()}
        if out.get("logicalType") in ("timestamp-millis", "timestamp-micros"):
            del out["logicalType"]
        return out
    if isinstance(node, list):
        return [_strip_timestamp_logical_types(v) for v in node]
    return node


@dataclass(frozen=True)
class EventSchema:
    """One parsed event schema."""

    name: str
    version: int
    source: Mapping[str, Any]  # the .avsc as written
    parsed: Any  # fastavro's parsed, self-contained form
    canonical: str
    fingerprint: bytes  # 8 bytes, little-endian, as single-object encoding writes it
    self_contained: Mapping[str, Any] = field(
        default_factory=dict
    )  # refs inlined, logicalTypes kept

    @property
    def expanded_json(self) -> str:
        """Self-contained schema text (references inlined), e.g. for a Schema Registry."""
        return json.dumps(self.self_contained)


@dataclass
class SchemaSet:
    """Every schema a codec can write (latest per name) and read (any known version)."""

    latest: dict[str, EventSchema] = field(default_factory=dict)
    by_fingerprint: dict[bytes, EventSchema] = field(default_factory=dict)
    _named: dict[str, Any] = field(default_factory=dict)
    _named_as_written: dict[str, Any] = field(default_factory=dict)  # logicalTypes kept

    def add(
        self, source: Mapping[str, Any], *, version: int = 1, writable: bool = True
    ) -> EventSchema:
        """Parse and index one schema; older versions are added with writable=False."""
        named = dict(self._named)  # other versions of the same name must not collide
        stripped = _strip_timestamp_logical_types(dict(source))
        parsed = parse_schema(stripped, named)
        expanded = expand_schema(parsed)
        canonical = to_parsing_canonical_form(expanded)
        fingerprint = struct.pack("<Q", crc64_avro(canonical.encode()))
        # A registry hands back the full name ("gpuflow.v1.X"); index by the short event name.
        name = str(source["name"]).rsplit(".", 1)[-1]
        named_as_written = dict(self._named_as_written)
        as_written = parse_schema(dict(source), named_as_written, expand=True)
        assert isinstance(as_written, dict)
        # Drop fastavro's private markers, which embed every other named schema.
        self_contained = {k: v for k, v in as_written.items() if not k.startswith("__")}
        schema = EventSchema(
            name, version, source, expanded, canonical, fingerprint, self_contained
        )
        self.by_fingerprint[fingerprint] = schema
        if writable:
            self.latest[name] = schema
            self._named[f"{NAMESPACE}.{name}"] = parsed
            self._named_as_written[f"{NAMESPACE}.{name}"] = named_as_written[f"{NAMESPACE}.{name}"]
        return schema

    def get(self, name: str) -> EventSchema:
        try:
            return self.latest[name]
        except KeyError:
            raise UnknownSchemaError(f"no schema named {name!r}") from None

    def by_fp(self, fingerprint: bytes) -> EventSchema:
        try:
            return self.by_fingerprint[fingerprint]
        except KeyError:
            raise UnknownSchemaError(f"no schema with fingerprint {fingerprint.hex()}") from None

    @classmethod
    def from_dir(cls, directory: Path, names: Iterable[str] = EVENT_NAMES) -> SchemaSet:
        out = cls()
        for name in names:
            out.add(json.loads((directory / f"{name}.avsc").read_text()))
        return out


@cache
def default_schemas() -> SchemaSet:
    """The schemas shipped in `schemas/avro/`."""
    out = SchemaSet()
    root = resources.files("schemas").joinpath("avro")
    for name in EVENT_NAMES:
        out.add(json.loads(root.joinpath(f"{name}.avsc").read_text()))
    return out
