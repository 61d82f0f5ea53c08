"""Codec tests: exact bytes per framing, round trips of every schema, evolution, errors."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema
from fastavro.schema import fingerprint as fastavro_fingerprint
from fastavro.utils import generate_many
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import (
    EVENT_NAMES,
    Codec,
    CodecError,
    ConfluentCodec,
    DecodeError,
    EncodeError,
    SchemaSet,
    SingleObjectCodec,
    default_schemas,
    make_codec,
)
from schemas.errors import GpuflowError
from schemas.registry import crc64_avro

GRID = {
    "event_id": "e1",
    "ts": 1000,
    "schema": 1,
    "region": "eu",
    "price_per_kwh": 0.5,
    "carbon_g_per_kwh": 100.0,
    "renewable_share": 0.25,
}
GRID_BODY = bytes.fromhex(
    "04 6531"  # event_id: zigzag length 2 -> 04, then "e1"
    "d0 0f"  # ts: 1000 -> zigzag 2000 -> varint d0 0f
    "02"  # schema: 1 -> zigzag 2
    "04 6575"  # region: length 2, "eu"
    "000000000000e03f"  # price_per_kwh: 0.5 as little-endian IEEE double
    "0000000000005940"  # carbon_g_per_kwh: 100.0 as little-endian double
    "0000803e"  # renewable_share: 0.25 as little-endian IEEE float
)
GRID_FINGERPRINT = 0x3F1D367A4A6B8F56  # CRC-64-AVRO of GridSignal's parsing canonical form


def mock_codec(schemas: SchemaSet | None = None) -> ConfluentCodec:
    return ConfluentCodec(f"mock://{uuid.uuid4().hex}", schemas)


def sharing_registry(writer: ConfluentCodec, schemas: SchemaSet) -> ConfluentCodec:
    """A second codec on the writer's registry: the Python mock keeps one store per client."""
    reader = mock_codec(schemas)
    reader._client = writer._client
    return reader


# --- exact bytes -------------------------------------------------------------------------


def test_single_object_bytes_are_pinned() -> None:
    expected = (
        bytes.fromhex(
            "c301"  # single-object magic
            "568f6b4a7a361d3f"  # GRID_FINGERPRINT, 8 bytes little-endian
        )
        + GRID_BODY
    )
    data = SingleObjectCodec().encode("GridSignal", GRID)
    assert data == expected
    assert SingleObjectCodec().decode(data) == ("GridSignal", GRID)


def test_confluent_bytes_are_pinned() -> None:
    expected = (
        bytes.fromhex(
            "00"  # Confluent magic
            "00000001"  # schema id 1, 4 bytes big-endian: first id of a fresh mock registry
        )
        + GRID_BODY
    )
    codec = mock_codec()
    data = codec.encode("GridSignal", GRID)
    assert data == expected
    assert codec.decode(data) == ("GridSignal", GRID)


def test_mock_registry_ids_count_from_one_per_client_not_per_url() -> None:
    url = f"mock://{uuid.uuid4().hex}"
    first = ConfluentCodec(url)
    assert first.encode("GridSignal", GRID)[1:5] == b"\x00\x00\x00\x01"
    assert first.encode("GridSignal", GRID)[1:5] == b"\x00\x00\x00\x01"  # cached, not re-registered
    job = {"event_id": "e", "ts": 1, "job_id": "j"}
    assert first.encode("JobSubmitted", job)[1:5] == b"\x00\x00\x00\x02"
    # confluent_kafka's Python mock keeps its store per client: the same URL starts over at 1.
    again = ConfluentCodec(url)
    assert again.encode("JobSubmitted", job)[1:5] == b"\x00\x00\x00\x01"


def test_crc64_avro_matches_the_spec_and_fastavro() -> None:
    assert crc64_avro(b'"null"') == 7195948357588979594  # Avro spec / Java SchemaNormalization
    grid = default_schemas().get("GridSignal")
    assert crc64_avro(grid.canonical.encode()) == GRID_FINGERPRINT


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_fingerprint_equals_fastavros(name: str) -> None:
    schema = default_schemas().get(name)
    # fastavro prints the 8 fingerprint bytes in little-endian order, as single-object writes them
    assert schema.fingerprint.hex() == fastavro_fingerprint(schema.canonical, "CRC-64-AVRO")
    assert schema.fingerprint == crc64_avro(schema.canonical.encode()).to_bytes(8, "little")


# --- round trips -------------------------------------------------------------------------

CODECS: dict[str, Callable[[], Codec]] = {
    "single-object": SingleObjectCodec,
    "confluent": mock_codec,
}


@pytest.mark.parametrize("framing", CODECS)
@pytest.mark.parametrize("name", EVENT_NAMES)
def test_every_schema_round_trips_generated_data(name: str, framing: str) -> None:
    codec = CODECS[framing]()
    for record in generate_many(default_schemas().get(name).parsed, 25):
        data = codec.encode(name, record, topic="t")
        decoded_name, decoded = codec.decode(data, topic="t")
        assert decoded_name == name
        assert isinstance(decoded["ts"], int)  # timestamps are not turned into datetimes
        # floats lose precision once; after that encoding is a fixed point
        assert codec.encode(name, decoded, topic="t") == data


def test_confluent_reader_resolves_writer_from_the_registry() -> None:
    writer = mock_codec()
    job = {"event_id": "e", "ts": 5, "job_id": "j", "allowed_regions": ["eu"]}
    routed = {"event_id": "r", "ts": 6, "job": job, "submitted_ts": 5, "region": "eu"}
    data = writer.encode("RoutedJob", routed, topic="gpuflow.jobs.routed")
    reader = sharing_registry(writer, default_schemas())  # empty id cache: asks the registry
    name, record = reader.decode(data)
    assert name == "RoutedJob"
    assert record["job"]["allowed_regions"] == ["eu"]
    assert record["job"]["kind"] == "BATCH"


def test_registered_schema_is_self_contained_and_keeps_logical_types() -> None:
    writer = mock_codec()
    writer.encode("RoutedJob", {"event_id": "r", "ts": 6, "job": {"event_id": "e", "ts": 5,
                  "job_id": "j"}, "submitted_ts": 5, "region": "eu"})  # fmt: skip
    text = writer._client.get_schema(1).schema_str or ""
    schema = json.loads(text)
    assert "__" not in text  # no fastavro private markers (they embedded every schema)
    assert len(text) < 20_000
    assert schema["name"] == "gpuflow.v1.RoutedJob"
    job_field = next(f for f in schema["fields"] if f["name"] == "job")
    assert job_field["type"]["name"] == "gpuflow.v1.JobSubmitted"  # reference inlined
    assert schema["fields"][1]["type"] == {"type": "long", "logicalType": "timestamp-millis"}


def test_make_codec_picks_framing_from_configuration() -> None:
    assert isinstance(make_codec(None), SingleObjectCodec)
    assert isinstance(make_codec(""), SingleObjectCodec)
    assert isinstance(make_codec(f"mock://{uuid.uuid4().hex}"), ConfluentCodec)


# --- schema evolution --------------------------------------------------------------------

NOTE = {"name": "note", "type": ["null", "string"], "default": None, "doc": "Added in v2."}


def grid_versions() -> tuple[dict[str, Any], dict[str, Any]]:
    v1 = dict(default_schemas().get("GridSignal").source)
    v2 = copy.deepcopy(v1)
    v2["fields"].append(NOTE)
    return v1, v2


def new_reader_set() -> SchemaSet:
    v1, v2 = grid_versions()
    out = SchemaSet()
    out.add(v1, version=1, writable=False)
    out.add(v2, version=2)
    return out


def old_reader_set(*, knows_v2: bool) -> SchemaSet:
    v1, v2 = grid_versions()
    out = SchemaSet()
    out.add(v1)
    if knows_v2:
        out.add(v2, version=2, writable=False)
    return out


def test_single_object_new_reader_fills_the_default() -> None:
    data = SingleObjectCodec(old_reader_set(knows_v2=False)).encode("GridSignal", GRID)
    expected = ("GridSignal", {**GRID, "note": None})
    assert SingleObjectCodec(new_reader_set()).decode(data) == expected


def test_single_object_old_reader_drops_the_new_field() -> None:
    data = SingleObjectCodec(new_reader_set()).encode("GridSignal", {**GRID, "note": "hi"})
    reader = SingleObjectCodec(old_reader_set(knows_v2=True))
    assert reader.decode(data) == ("GridSignal", GRID)


def test_single_object_old_reader_without_the_writer_schema_refuses() -> None:
    data = SingleObjectCodec(new_reader_set()).encode("GridSignal", {**GRID, "note": "hi"})
    with pytest.raises(DecodeError, match="fingerprint"):
        SingleObjectCodec(old_reader_set(knows_v2=False)).decode(data)


def test_confluent_new_reader_fills_the_default() -> None:
    writer = mock_codec(old_reader_set(knows_v2=False))
    data = writer.encode("GridSignal", GRID, topic="gpuflow.grid.signals")
    reader = sharing_registry(writer, new_reader_set())
    assert reader.decode(data) == ("GridSignal", {**GRID, "note": None})


def test_confluent_old_reader_drops_the_new_field() -> None:
    writer = mock_codec(new_reader_set())
    data = writer.encode("GridSignal", {**GRID, "note": "hi"}, topic="gpuflow.grid.signals")
    reader = sharing_registry(writer, old_reader_set(knows_v2=False))  # v2 comes from the registry
    assert reader.decode(data) == ("GridSignal", GRID)


# --- errors ------------------------------------------------------------------------------

SINGLE = SingleObjectCodec().encode("GridSignal", GRID)
UNKNOWN_FP = b"\xc3\x01" + b"\x00" * 8 + GRID_BODY

SINGLE_OBJECT_GARBAGE = {
    "empty": b"",
    "garbage": b"\xde\xad\xbe\xef" * 8,
    "header only": SINGLE[:10],
    "short header": SINGLE[:5],
    "truncated body": SINGLE[:-1],
    "trailing bytes": SINGLE + b"\x00",
    "unknown fingerprint": UNKNOWN_FP,
    "wrong magic": b"\xc3\x02" + SINGLE[2:],
    "confluent framing": b"\x00\x00\x00\x00\x01" + GRID_BODY,
    "not bytes": "c301",
}


@pytest.mark.parametrize("case", SINGLE_OBJECT_GARBAGE)
def test_single_object_refuses_bad_bytes(case: str) -> None:
    with pytest.raises(DecodeError) as err:
        SingleObjectCodec().decode(SINGLE_OBJECT_GARBAGE[case])  # type: ignore[arg-type]
    assert isinstance(err.value, CodecError) and isinstance(err.value, GpuflowError)


def confluent_bad_bytes(codec: ConfluentCodec) -> dict[str, Any]:
    good = codec.encode("GridSignal", GRID)
    not_ours = codec._client.register_schema("other", Schema('{"type": "string"}', "AVRO"))
    broken = codec._client.register_schema("broken", Schema(
        '{"type": "record", "name": "gpuflow.v1.GridSignal", '
        '"fields": [{"name": "a", "type": "nope"}]}', "AVRO"))  # fmt: skip
    return {
        "empty": b"",
        "garbage": b"\xde\xad\xbe\xef" * 8,
        "header only": good[:5],
        "short header": good[:3],
        "truncated body": good[:-1],
        "trailing bytes": good + b"\x00",
        "unknown id": b"\x00\x00\x00\x00\x63" + GRID_BODY,
        "wrong magic": b"\x01" + good[1:],
        "single-object framing": SINGLE,
        "schema of another app": b"\x00" + not_ours.to_bytes(4, "big") + b"\x02a",
        "schema that does not parse": b"\x00" + broken.to_bytes(4, "big") + b"\x02a",
        "not bytes": "00",
    }


def test_confluent_refuses_bad_bytes() -> None:
    codec = mock_codec()
    for case, data in confluent_bad_bytes(codec).items():
        with pytest.raises(DecodeError):
            codec.decode(data)
            pytest.fail(case)


ENCODE_ERRORS: dict[str, Any] = {
    "missing required field": {k: v for k, v in GRID.items() if k != "region"},
    "string for double": {**GRID, "price_per_kwh": "cheap"},
    "int for string": {**GRID, "region": 5},
    "None for string": {**GRID, "event_id": None},
    "string for long": {**GRID, "ts": "12"},
    "long out of range": {**GRID, "ts": 2**70},
    "not a mapping": None,
}


@pytest.mark.parametrize("framing", CODECS)
@pytest.mark.parametrize("case", ENCODE_ERRORS)
def test_encoding_a_bad_record_is_an_encode_error(case: str, framing: str) -> None:
    with pytest.raises(EncodeError, match="GridSignal"):
        CODECS[framing]().encode("GridSignal", ENCODE_ERRORS[case])


def test_encoding_a_bad_enum_symbol_is_an_encode_error() -> None:
    with pytest.raises(EncodeError, match="JobSubmitted"):
        SingleObjectCodec().encode(
            "JobSubmitted", {"event_id": "e", "ts": 1, "job_id": "j", "kind": "GAMING"}
        )


@pytest.mark.parametrize("framing", CODECS)
def test_encoding_an_unknown_event_is_a_codec_error(framing: str) -> None:
    with pytest.raises(CodecError, match="Nope"):
        CODECS[framing]().encode("Nope", GRID)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.binary(max_size=64), cut=st.integers(min_value=0, max_value=len(SINGLE)))
def test_single_object_never_raises_anything_but_decode_error(body: bytes, cut: int) -> None:
    codec = SingleObjectCodec()
    for data in (SINGLE[:10] + body, SINGLE[:cut], SINGLE[:cut] + body):
        try:
            name, record = codec.decode(data)
        except DecodeError:
            continue
        assert name == "GridSignal" and isinstance(record, dict)
