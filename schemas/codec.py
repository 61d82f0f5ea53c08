"""Avro framing for gpuflow events.

Two framings, one interface:

* single-object encoding (embedded default): ``C3 01`` + 8-byte little-endian CRC-64-AVRO
  fingerprint of the writer schema + Avro body. Readers find the writer schema by fingerprint
  and resolve it against their own (latest) schema, so old and new versions interoperate.
* Confluent wire format (``schema_registry_url`` set): ``00`` + 4-byte big-endian schema id +
  body, through ``confluent_kafka.schema_registry``.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping
from typing import Any, Protocol

from fastavro import schemaless_reader, schemaless_writer

from schemas.errors import CodecError, DecodeError, EncodeError, UnknownSchemaError
from schemas.registry import EventSchema, SchemaSet, default_schemas

__all__ = ["MAGIC", "Codec", "ConfluentCodec", "SingleObjectCodec", "make_codec"]

MAGIC = b"\xc3\x01"
_HEADER = len(MAGIC) + 8


class Codec(Protocol):
    """Turns event records into bytes and back. Records are plain dicts at the edge."""

    def encode(self, name: str, record: Mapping[str, Any], *, topic: str = "") -> bytes: ...

    def decode(self, data: bytes | None, *, topic: str = "") -> tuple[str, dict[str, Any]]:
        """Return (event name, record); raise DecodeError for anything unreadable."""
        ...

    def writer(self, data: bytes) -> EventSchema:
        """The schema decodable `data` was written with (to re-encode it exactly)."""
        ...


def _write_body(schema: EventSchema, record: Mapping[str, Any]) -> bytes:
    buf = io.BytesIO()
    try:
        schemaless_writer(buf, schema.parsed, record)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        raise EncodeError(f"{schema.name}: {exc}") from exc
    return buf.getvalue()


def _read_body(writer: EventSchema, reader: EventSchema, body: bytes) -> dict[str, Any]:
    try:
        buf = io.BytesIO(body)
        record = schemaless_reader(buf, writer.parsed, reader.parsed)
    except Exception as exc:  # fastavro raises many types on corrupt bodies
        raise DecodeError(
            f"{writer.name}: corrupt Avro body ({type(exc).__name__}: {exc})"
        ) from exc
    if buf.tell() != len(body):
        raise DecodeError(f"{writer.name}: {len(body) - buf.tell()} trailing bytes after the body")
    if not isinstance(record, dict):
        raise DecodeError(f"{writer.name}: body is not a record")
    return record


class SingleObjectCodec:
    """Avro single-object encoding with schemas from a SchemaSet."""

    def __init__(self, schemas: SchemaSet | None = None) -> None:
        self.schemas = schemas or default_schemas()

    def encode(self, name: str, record: Mapping[str, Any], *, topic: str = "") -> bytes:
        schema = self.schemas.get(name)
        return MAGIC + schema.fingerprint + _write_body(schema, record)

    def decode(self, data: bytes | None, *, topic: str = "") -> tuple[str, dict[str, Any]]:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise DecodeError(f"expected bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < _HEADER or data[:2] != MAGIC:
            raise DecodeError(
                f"not Avro single-object encoding (starts {data[:4].hex() or 'empty'})"
            )
        try:
            writer = self.schemas.by_fp(data[2:_HEADER])
            reader = self.schemas.get(writer.name)
        except UnknownSchemaError as exc:
            raise DecodeError(str(exc)) from exc
        return writer.name, _read_body(writer, reader, data[_HEADER:])

    def writer(self, data: bytes) -> EventSchema:
        """The schema `data` was written with (DecodeError when unknown)."""
        try:
            return self.schemas.by_fp(bytes(data[2:_HEADER]))
        except UnknownSchemaError as exc:
            raise DecodeError(str(exc)) from exc


class ConfluentCodec:
    """Confluent wire format through a Schema Registry (`mock://` works in tests)."""

    def __init__(self, registry_url: str, schemas: SchemaSet | None = None, **conf: Any) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.schemas = schemas or default_schemas()
        self._client = SchemaRegistryClient.new_client({"url": registry_url, **conf})
        self._ids: dict[tuple[str, str], int] = {}
        self._by_id: dict[int, EventSchema] = {}

    def _subject(self, topic: str, name: str) -> str:
        # TopicNameStrategy when a topic is known, else the record name.
        return f"{topic}-value" if topic else f"gpuflow.v1.{name}"

    def _schema_id(self, schema: EventSchema, topic: str) -> int:
        key = (topic, schema.name)
        if key not in self._ids:
            from confluent_kafka.schema_registry import Schema

            try:
                sid = self._client.register_schema(
                    self._subject(topic, schema.name), Schema(schema.expanded_json, "AVRO")
                )
            except Exception as exc:
                raise EncodeError(f"{schema.name}: schema registry refused: {exc}") from exc
            self._ids[key] = sid
            self._by_id[sid] = schema
        return self._ids[key]

    def encode(self, name: str, record: Mapping[str, Any], *, topic: str = "") -> bytes:
        schema = self.schemas.get(name)
        header = b"\x00" + struct.pack(">I", self._schema_id(schema, topic))
        return header + _write_body(schema, record)

    def _writer(self, schema_id: int) -> EventSchema:
        if schema_id in self._by_id:
            return self._by_id[schema_id]
        try:
            text = self._client.get_schema(schema_id).schema_str
        except Exception as exc:
            raise DecodeError(f"schema id {schema_id} unknown to the registry: {exc}") from exc
        import json

        try:
            source = json.loads(text or "{}")
        except ValueError as exc:
            raise DecodeError(f"schema id {schema_id} is not JSON: {exc}") from exc
        name = str(source.get("name", "")) if isinstance(source, dict) else ""
        if name.rsplit(".", 1)[-1] not in self.schemas.latest:
            raise DecodeError(f"schema id {schema_id} is {name!r}, not a gpuflow event")
        try:
            writer = SchemaSet().add(source)
        except Exception as exc:  # fastavro raises many types on a bad schema
            raise DecodeError(f"schema id {schema_id} does not parse: {exc}") from exc
        self._by_id[schema_id] = writer
        return writer

    def decode(self, data: bytes | None, *, topic: str = "") -> tuple[str, dict[str, Any]]:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise DecodeError(f"expected bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < 5 or data[0] != 0:
            raise DecodeError(f"not Confluent wire format (starts {data[:4].hex() or 'empty'})")
        writer = self._writer(struct.unpack(">I", data[1:5])[0])
        return writer.name, _read_body(writer, self.schemas.get(writer.name), data[5:])

    def writer(self, data: bytes) -> EventSchema:
        """The schema `data` was written with (DecodeError when unknown)."""
        return self._writer(struct.unpack(">I", bytes(data[1:5]))[0])


def make_codec(schema_registry_url: str | None = None, **registry_conf: Any) -> Codec:
    """The codec configuration asks for: Confluent when a registry is set, else single-object."""
    if schema_registry_url:
        try:
            return ConfluentCodec(schema_registry_url, **registry_conf)
        except Exception as exc:
            raise CodecError(f"cannot reach schema registry {schema_registry_url}: {exc}") from exc
    return SingleObjectCodec()
