"""The event schemas: one `.avsc` per event, parsed once, indexed by name and fingerprint.

A schema is found by two fingerprints (CRC-64-AVRO of a parsing canonical form):

- the specification's form, which fastavro and Java compute, and gpuflow writes;
- the form Apache Avro's Python library (`avro`, 1.12) computes: it keeps a primitive that
  carries other attributes (a `logicalType`) as `{"type":"long"}` where the specification says
  `"long"`, so every schema with a timestamp gets another fingerprint from that library.

Earlier versions of a schema live in `avro/previous/<Name>.<fingerprint>.avsc` (self-contained,
references inlined) and stay readable: a reader resolves them against the latest version, whose
new fields all have defaults.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from fastavro.schema import expand_schema, parse_schema, to_parsing_canonical_form

from schemas.errors import UnknownSchemaError

__all__ = [
    "EVENT_NAMES",
    "NAMESPACE",
    "EventSchema",
    "SchemaSet",
    "canonical_form",
    "crc64_avro",
    "default_schemas",
]

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
    "NodeAdvisory",
    "BandwidthQuota",
    "DemandForecast",
    "DeadLetter",
    "ReplanTick",
    "CancelRequest",
    "JobLog",
    "ServiceSpec",
    "ServiceLoad",
    "ScalingDecision",
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


_PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
_CANONICAL_KEYS = ("name", "type", "fields", "symbols", "items", "values", "size")


def canonical_form(schema: Any, *, annotated_primitives: bool = False) -> str:
    """Parsing canonical form of a self-contained schema (the specification's rules).

    With `annotated_primitives`, a primitive written as an object with other attributes stays
    `{"type": "<primitive>"}`, as Apache Avro's Python library writes it.
    """
    node = _canonical(schema, "", set(), annotated_primitives)
    return json.dumps(node, separators=(",", ":"))


def _full_name(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _canonical(node: Any, namespace: str, seen: set[str], annotated: bool) -> Any:
    if isinstance(node, list):
        return [_canonical(n, namespace, seen, annotated) for n in node]
    if isinstance(node, str):
        return node if node in _PRIMITIVES else _full_name(node, namespace)
    kind = node["type"]
    if not isinstance(kind, str):  # {"type": {...}} wraps a schema
        return _canonical(kind, namespace, seen, annotated)
    if kind in _PRIMITIVES:
        return {"type": kind} if annotated and len(node) > 1 else kind
    out: dict[str, Any] = {}
    if kind in ("record", "error", "enum", "fixed"):
        full = _full_name(node["name"], node.get("namespace", namespace))
        if full in seen:
            return full
        seen.add(full)
        namespace = full.rsplit(".", 1)[0] if "." in full else ""
        out["name"] = full
    for key in _CANONICAL_KEYS[1:]:
        if key == "type":
            out["type"] = "record" if kind == "error" else kind
        elif key == "fields" and "fields" in node:
            out["fields"] = [
                {"name": f["name"], "type": _canonical(f["type"], namespace, seen, annotated)}
                for f in node["fields"]
            ]
        elif key in ("items", "values") and key in node:
            out[key] = _canonical(node[key], namespace, seen, annotated)
        elif key in node:
            out[key] = node[key]
    return out


def _define_once(node: Any, namespace: str, seen: set[str]) -> Any:
    """The schema with each named type defined at its first use and named afterwards."""
    if isinstance(node, list):
        return [_define_once(n, namespace, seen) for n in node]
    if not isinstance(node, dict):
        return node
    if node.get("type") in ("record", "error", "enum", "fixed") and "name" in node:
        full = _full_name(node["name"], node.get("namespace", namespace))
        if full in seen:
            return full
        seen.add(full)
        namespace = full.rsplit(".", 1)[0] if "." in full else ""
    out = dict(node)
    if "fields" in node:
        out["fields"] = [
            {**f, "type": _define_once(f["type"], namespace, seen)} for f in node["fields"]
        ]
    for key in ("type", "items", "values"):
        if key in node and isinstance(node[key], dict | list):
            out[key] = _define_once(node[key], namespace, seen)
    return out


def _fingerprint(canonical: str) -> bytes:
    """CRC-64-AVRO, 8 bytes little-endian, as single-object encoding writes it."""
    return struct.pack("<Q", crc64_avro(canonical.encode()))


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
    # every fingerprint the schema is found by: the specification's, Apache Avro Python's, and
    # the one gpuflow 0.1 wrote for a schema using a named type twice (fastavro's expanded form)
    fingerprints: tuple[bytes, ...] = ()

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
        parsed = parse_schema(_strip_timestamp_logical_types(dict(source)), named)
        expanded = expand_schema(parsed)
        # A registry hands back the full name ("gpuflow.v1.X"); index by the short event name.
        name = str(source["name"]).rsplit(".", 1)[-1]
        named_as_written = dict(self._named_as_written)
        as_written = parse_schema(dict(source), named_as_written, expand=True)
        assert isinstance(as_written, dict)
        # Drop fastavro's private markers, which embed every other named schema; fastavro
        # inlines a named type at every use, Avro allows one definition: later uses by name.
        self_contained = _define_once(
            {k: v for k, v in as_written.items() if not k.startswith("__")}, "", set()
        )
        canonical = canonical_form(self_contained)
        fingerprints = tuple(
            dict.fromkeys(
                _fingerprint(form)
                for form in (
                    canonical,
                    canonical_form(self_contained, annotated_primitives=True),
                    to_parsing_canonical_form(expanded),
                )
            )
        )
        schema = EventSchema(
            name, version, source, expanded, canonical, fingerprints[0], self_contained,
            fingerprints,
        )  # fmt: skip
        for fp in fingerprints:
            if fp == schema.fingerprint or fp not in self.by_fingerprint:
                self.by_fingerprint[fp] = schema
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


_OLDER = re.compile(r"^([A-Za-z]+)\.v(\d+)\.avsc$")


@cache
def default_schemas() -> SchemaSet:
    """The schemas shipped in `schemas/avro/`, and the older versions in `avro/history/`.

    Older versions (`Name.vN.avsc`) are readable, never written: events a previous release
    produced still decode, into the latest schema with its defaults filled.
    """
    out = SchemaSet()
    root = resources.files("schemas").joinpath("avro")
    older = root.joinpath("history")
    if older.is_dir():
        for entry in sorted(older.iterdir(), key=lambda e: e.name):
            match = _OLDER.match(entry.name)
            if match and match[1] in EVENT_NAMES:
                out.add(json.loads(entry.read_text()), version=int(match[2]), writable=False)
    for name in EVENT_NAMES:
        out.add(json.loads(root.joinpath(f"{name}.avsc").read_text()))
    previous = root.joinpath("previous")
    for item in sorted(previous.iterdir(), key=lambda p: p.name) if previous.is_dir() else ():
        if item.name.endswith(".avsc"):
            out.add(json.loads(item.read_text()), version=0, writable=False)
    return out
