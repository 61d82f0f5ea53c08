"""Events from Apache Avro's Python library (`avro`) and back, in single-object framing.

That library computes a schema's parsing canonical form with a logical-typed primitive kept as
`{"type":"long"}` (the specification, fastavro and Java write `"long"`), so its fingerprints
differ for every schema with a timestamp. gpuflow registers both per schema.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import avro.io
import avro.schema
import pytest
from fastavro.schema import to_parsing_canonical_form
from fastavro.utils import generate_many

from schemas import EVENT_NAMES, MAGIC, SingleObjectCodec, default_schemas
from schemas.registry import canonical_form

PREVIOUS = Path(__file__).resolve().parents[2] / "schemas" / "avro" / "previous"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_MS = 4_102_444_800_000  # 2100-01-01: generated longs wrap into what a datetime can hold


def avro_schema(name: str) -> avro.schema.Schema:
    return avro.schema.parse(json.dumps(default_schemas().get(name).self_contained))


def to_avro_values(value: Any, schema: avro.schema.Schema, *, as_datetime: bool = True) -> Any:
    """fastavro-generated data with timestamps in range: as datetimes (what the avro library
    wants) or as the milliseconds gpuflow reads."""
    if isinstance(schema, avro.schema.TimestampMillisSchema):
        ms = value % MAX_MS
        return EPOCH + timedelta(milliseconds=ms) if as_datetime else ms
    if isinstance(schema, avro.schema.RecordSchema):
        return {f.name: to_avro_values(value[f.name], f.type, as_datetime=as_datetime)
                for f in schema.fields}  # fmt: skip
    if isinstance(schema, avro.schema.ArraySchema):
        return [to_avro_values(v, schema.items, as_datetime=as_datetime) for v in value]
    if isinstance(schema, avro.schema.MapSchema):
        return {k: to_avro_values(v, schema.values, as_datetime=as_datetime)
                for k, v in value.items()}  # fmt: skip
    if isinstance(schema, avro.schema.UnionSchema):
        branch = next(b for b in schema.schemas if _matches(value, b))
        return to_avro_values(value, branch, as_datetime=as_datetime)
    return value


def _matches(value: Any, schema: avro.schema.Schema) -> bool:
    if isinstance(schema, avro.schema.TimestampMillisSchema):
        return isinstance(value, int)
    return schema.validate(value) is not None


def avro_encode(schema: avro.schema.Schema, record: dict[str, Any]) -> bytes:
    """Single-object encoding the way a user of the avro package writes it."""
    buf = io.BytesIO()
    avro.io.DatumWriter(schema).write(record, avro.io.BinaryEncoder(buf))
    return MAGIC + schema.fingerprint("CRC-64-AVRO") + buf.getvalue()


def avro_decode(schema: avro.schema.Schema, data: bytes) -> Any:
    reader = avro.io.DatumReader(schema)
    return reader.read(avro.io.BinaryDecoder(io.BytesIO(data[10:])))


def as_millis(value: Any) -> Any:
    if isinstance(value, datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, dict):
        return {k: as_millis(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_millis(v) for v in value]
    return value


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_canonical_forms_match_each_library(name: str) -> None:
    schema = default_schemas().get(name)
    assert canonical_form(schema.self_contained) == schema.canonical
    assert to_parsing_canonical_form(dict(schema.self_contained)) == schema.canonical
    library = avro_schema(name)
    assert canonical_form(schema.self_contained, annotated_primitives=True) == (
        library.canonical_form
    )
    assert library.fingerprint("CRC-64-AVRO") in schema.fingerprints


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_avro_library_records_decode_with_gpuflow(name: str) -> None:
    library, codec = avro_schema(name), SingleObjectCodec()
    for generated in generate_many(default_schemas().get(name).parsed, 10):
        record = to_avro_values(generated, library, as_datetime=False)
        data = avro_encode(library, to_avro_values(generated, library))
        decoded_name, decoded = codec.decode(data)
        assert decoded_name == name
        # the same record, byte for byte, once gpuflow writes it (float fields are 32-bit)
        assert codec.encode(name, decoded)[10:] == data[10:]
        assert codec.encode(name, decoded) == codec.encode(name, record)


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_gpuflow_records_decode_with_the_avro_library(name: str) -> None:
    library, codec = avro_schema(name), SingleObjectCodec()
    known = {f for s in default_schemas().latest.values() for f in s.fingerprints}
    for generated in generate_many(default_schemas().get(name).parsed, 10):
        record = to_avro_values(generated, library, as_datetime=False)
        data = codec.encode(name, record)
        assert data[:2] == MAGIC and data[2:10] in known
        decoded = as_millis(avro_decode(library, data))
        assert codec.encode(name, decoded) == data  # same record, byte for byte


def test_the_issues_dead_lettered_fingerprint_is_known() -> None:
    # an avro-library JobSubmitted of the first schema version was dead-lettered with it
    schema = default_schemas().by_fp(bytes.fromhex("0d602f2efc1ab50f"))
    assert schema.name == "JobSubmitted" and schema.version == 0


def test_records_of_a_previous_version_decode_with_defaults() -> None:
    old = json.loads(next(PREVIOUS.glob("JobSubmitted.*.avsc")).read_text())
    library = avro.schema.parse(json.dumps(old))
    record = {"event_id": "e", "ts": datetime(2025, 1, 1, tzinfo=UTC), "job_id": "old-1"}
    record = {**_defaults(old), **record}
    name, decoded = SingleObjectCodec().decode(avro_encode(library, record))
    assert name == "JobSubmitted" and decoded["job_id"] == "old-1"
    # fields added since take their defaults
    assert decoded["finetune"] == "FULL" and decoded["software_stack"] == "portable"
    assert decoded["activation_checkpointing"] is None


def _defaults(schema: dict[str, Any]) -> dict[str, Any]:
    return {f["name"]: f["default"] for f in schema["fields"] if "default" in f}


def test_a_job_written_before_the_network_fields_decodes_with_their_defaults() -> None:
    # issue 13 added grad_accum_steps; a JobSubmitted of the version before still decodes
    old = json.loads((PREVIOUS / "JobSubmitted.ef9440f3431f684a.avsc").read_text())
    assert "grad_accum_steps" not in {f["name"] for f in old["fields"]}
    library = avro.schema.parse(json.dumps(old))
    record = {"event_id": "e", "ts": datetime(2025, 1, 1, tzinfo=UTC), "job_id": "old-2"}
    record = {**_defaults(old), **record, "micro_batch": 2, "seq_len": 4096}
    name, decoded = SingleObjectCodec().decode(avro_encode(library, record))
    assert name == "JobSubmitted" and decoded["job_id"] == "old-2"
    assert (decoded["grad_accum_steps"], decoded["micro_batch"], decoded["seq_len"]) == (1, 2, 4096)


def test_a_move_written_before_cheaper_and_greener_decodes_and_new_reasons_round_trip() -> None:
    # issue 10 added CHEAPER and GREENER to MigrationReason; the version before still decodes
    old = json.loads((PREVIOUS / "MigrationDecision.d3e08c4e91a08cb0.avsc").read_text())
    reason = next(f for f in old["fields"] if f["name"] == "reason")["type"]
    assert "GREENER" not in reason["symbols"]
    library = avro.schema.parse(json.dumps(old))
    record = {**_defaults(old), "event_id": "m", "ts": datetime(2025, 1, 1, tzinfo=UTC),
              "job_id": "x", "from_region": "a", "to_region": "a", "reason": "BETTER_MATCH",
              "hold_until_ts": datetime(2025, 1, 1, 0, 5, tzinfo=UTC)}  # fmt: skip
    codec = SingleObjectCodec()
    name, decoded = codec.decode(avro_encode(library, record))
    assert name == "MigrationDecision"
    assert (decoded["job_id"], decoded["reason"]) == ("x", "BETTER_MATCH")
    # a GREENER move round-trips through the current version
    greener = {**decoded, "reason": "GREENER", "to_region": "b"}
    assert codec.decode(codec.encode("MigrationDecision", greener))[1]["reason"] == "GREENER"
    # a reader still on the old version reads a new symbol as the enum's default
    from fastavro import parse_schema, schemaless_reader, schemaless_writer

    buf = io.BytesIO()
    schemaless_writer(buf, default_schemas().get("MigrationDecision").parsed, greener)
    buf.seek(0)
    as_old = schemaless_reader(buf, default_schemas().get("MigrationDecision").parsed,
                               parse_schema(old))  # fmt: skip
    assert as_old["reason"] == "DEFRAGMENTATION"  # type: ignore[call-overload,index]
