"""The `.avsc` files: one per event, namespace gpuflow.v1, documented, evolvable."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schemas import (
    EVENT_NAMES,
    NAMESPACE,
    CodecError,
    SchemaSet,
    UnknownSchemaError,
    default_schemas,
)
from schemas.errors import GpuflowError

AVRO_DIR = Path(__file__).resolve().parents[2] / "schemas" / "avro"
SOURCES = {p.stem: json.loads(p.read_text()) for p in sorted(AVRO_DIR.glob("*.avsc"))}
OLDER: dict[str, list[dict[str, Any]]] = {}  # avro/history/Name.vN.avsc, readable only
for _path in sorted((AVRO_DIR / "history").glob("*.avsc")):
    OLDER.setdefault(_path.name.split(".")[0], []).append(json.loads(_path.read_text()))
PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}

# DESIGN "Workload features on JobSubmitted", field by field.
WORKLOAD_FEATURES = {
    "kind": "enum",
    "model_family": "string",
    "params_b": "double",
    "precision": "enum",
    "data_parallel": "int",
    "tensor_parallel": "int",
    "pipeline_parallel": "int",
    "gpu_count": "int",
    "gpu_milli": "int",
    "min_gpu_memory_mib": "int",
    "allowed_gpu_models": "array",
    "allowed_regions": "array",
    "data_region": "union",
    "priority": "int",
    "preemptible": "boolean",
    "checkpoint_interval_s": "int",
    "deferrable_until_ts": "union",
    "budget_usd": "union",
    "cost_speed_preference": "float",
    "expected_duration_s": "union",
}


def named_types(node: Any) -> Iterator[dict[str, Any]]:
    """Every record and enum defined anywhere inside a schema."""
    if isinstance(node, list):
        for item in node:
            yield from named_types(item)
    elif isinstance(node, dict):
        if node.get("type") in ("record", "enum"):
            yield node
        for key in ("fields", "items", "values"):
            if key in node:
                yield from named_types(node[key])
        if isinstance(node.get("type"), dict | list):
            yield from named_types(node["type"])


def kind_of(avro_type: Any) -> str:
    if isinstance(avro_type, list):
        return "union"
    if isinstance(avro_type, dict):
        return (
            str(avro_type["type"])
            if avro_type["type"] in ("enum", "array", "map")
            else kind_of(avro_type["type"])
        )
    return str(avro_type)


def test_one_file_per_event() -> None:
    assert set(SOURCES) == set(EVENT_NAMES)
    assert (
        len(EVENT_NAMES) == len(set(EVENT_NAMES)) == 21
    )  # DESIGN's 14, four more, three for services
    assert set(default_schemas().latest) == set(EVENT_NAMES)


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_envelope(name: str) -> None:
    source = SOURCES[name]
    assert source["type"] == "record"
    assert source["name"] == name
    assert source["namespace"] == NAMESPACE == "gpuflow.v1"
    assert source.get("doc")
    event_id, ts, schema = source["fields"][:3]
    assert (event_id["name"], event_id["type"]) == ("event_id", "string")
    assert ts["name"] == "ts"
    assert ts["type"] == {"type": "long", "logicalType": "timestamp-millis"}
    version = 1 + len(OLDER.get(name, []))  # v1, or the next after the kept older versions
    assert (schema["name"], schema["type"], schema["default"]) == ("schema", "int", version)


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_every_field_has_a_doc_and_every_enum_a_default(name: str) -> None:
    for named in named_types(SOURCES[name]):
        if named["type"] == "enum":
            assert named.get("default") in named["symbols"], f"{name}: enum {named['name']}"
        else:
            assert named.get("doc"), f"{name}: record {named['name']} has no doc"
            for f in named["fields"]:
                assert f.get("doc"), f"{name}: {named['name']}.{f['name']} has no doc"


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_field_names_are_unique_snake_case(name: str) -> None:
    for named in named_types(SOURCES[name]):
        if named["type"] == "record":
            names = [f["name"] for f in named["fields"]]
            assert len(names) == len(set(names))
            assert all(n == n.lower() and " " not in n for n in names), names


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_optional_fields_default_to_null(name: str) -> None:
    for named in named_types(SOURCES[name]):
        if named["type"] != "record":
            continue
        for f in named["fields"]:
            if isinstance(f["type"], list) and "null" in f["type"]:
                assert f["type"][0] == "null" and f.get("default", "missing") is None, f["name"]


def test_job_submitted_carries_the_design_workload_features() -> None:
    fields = {f["name"]: f for f in SOURCES["JobSubmitted"]["fields"]}
    got = {name: kind_of(fields[name]["type"]) for name in WORKLOAD_FEATURES if name in fields}
    assert got == WORKLOAD_FEATURES
    kind = fields["kind"]["type"]
    assert {"TRAINING", "INFERENCE", "BATCH"} <= set(kind["symbols"])
    assert fields["precision"]["type"]["symbols"] == ["FP32", "TF32", "BF16", "FP16", "FP8", "INT8"]
    # Every feature but the job's identity has a default, so a minimal job encodes.
    required = [f["name"] for f in fields.values() if "default" not in f]
    assert required == ["event_id", "ts", "job_id"]


def test_routed_job_embeds_job_submitted_by_reference() -> None:
    job = next(f for f in SOURCES["RoutedJob"]["fields"] if f["name"] == "job")
    assert job["type"] == "JobSubmitted"
    assert EVENT_NAMES.index("JobSubmitted") < EVENT_NAMES.index("RoutedJob")


def test_logical_types_are_stripped_for_reading_but_not_for_the_registry() -> None:
    schema = default_schemas().get("JobSubmitted")
    assert "logicalType" not in json.dumps(schema.parsed)
    assert "timestamp-millis" in schema.expanded_json
    assert "__" not in schema.expanded_json


def test_from_dir_matches_the_packaged_schemas() -> None:
    loaded = SchemaSet.from_dir(AVRO_DIR)
    for name in EVENT_NAMES:
        assert loaded.get(name).fingerprint == default_schemas().get(name).fingerprint


def test_fingerprints_are_unique_and_indexed() -> None:
    schemas = default_schemas()
    prints = {schemas.get(n).fingerprint for n in EVENT_NAMES}
    assert len(prints) == len(EVENT_NAMES)
    for name in EVENT_NAMES:
        schema = schemas.get(name)
        assert len(schema.fingerprint) == 8
        assert schemas.by_fp(schema.fingerprint) is schema


def test_schema_set_add_accepts_a_registry_full_name() -> None:
    source = {**SOURCES["GridSignal"], "name": "gpuflow.v1.GridSignal"}
    source.pop("namespace")
    schema = SchemaSet().add(source)
    assert schema.name == "GridSignal"
    assert schema.fingerprint == default_schemas().get("GridSignal").fingerprint


def test_an_older_version_is_readable_but_not_writable() -> None:
    v2 = json.loads(json.dumps(SOURCES["GridSignal"]))
    v2["fields"].append({"name": "note", "type": ["null", "string"], "default": None, "doc": "x"})
    out = SchemaSet()
    v1_schema = out.add(SOURCES["GridSignal"], version=1, writable=False)
    v2_schema = out.add(v2, version=2)
    assert out.get("GridSignal") is v2_schema
    assert out.by_fp(v1_schema.fingerprint) is v1_schema
    assert v1_schema.fingerprint != v2_schema.fingerprint


@pytest.mark.parametrize("lookup", ["get", "by_fp"])
def test_unknown_schemas_are_codec_errors(lookup: str) -> None:
    schemas = default_schemas()
    with pytest.raises(UnknownSchemaError) as err:
        schemas.get("Nope") if lookup == "get" else schemas.by_fp(b"\x00" * 8)
    assert isinstance(err.value, CodecError) and isinstance(err.value, GpuflowError)


def test_only_primitive_or_known_named_types_are_referenced() -> None:
    known = PRIMITIVES | set(EVENT_NAMES)
    for name, source in SOURCES.items():
        defined = {n["name"] for n in named_types(source)}
        for named in named_types(source):
            for f in named.get("fields", []):
                refs = f["type"] if isinstance(f["type"], list) else [f["type"]]
                for ref in refs:
                    if isinstance(ref, str):
                        assert ref in known | defined, f"{name}.{f['name']}: {ref}"


def test_a_type_defined_in_several_files_is_defined_the_same_way() -> None:
    # Assignment is inlined in three decision schemas; one reader sees them all as gpuflow.v1.*.
    definitions: dict[str, set[str]] = {}
    for name, source in SOURCES.items():
        for named in named_types(source):
            if named["name"] != name:
                definitions.setdefault(named["name"], set()).add(json.dumps(named, sort_keys=True))
    assert {n: len(d) for n, d in definitions.items() if len(d) > 1} == {}


def test_older_versions_are_readable_never_written() -> None:
    from schemas import SingleObjectCodec

    schemas = default_schemas()
    assert OLDER, "expected at least one kept older version"
    for name, versions in OLDER.items():
        assert schemas.get(name).source == SOURCES[name]  # the latest is what is written
        for old in versions:
            older = SchemaSet()
            older.add(old)
            record = {"event_id": "e1", "ts": 1_700_000_000_000, "schema": 1}
            if name == "DemandForecast":  # v2 added series, plan, selected; v3 service
                record |= {
                    "region": "eu",
                    "gpu_model": "*",
                    "issued_ts": 1_700_000_000_000,
                    "step_s": 3600,
                    "points": [1.0],
                    "lower": [0.5],
                    "upper": [1.5],
                    "interval": 0.5,
                    "model": "LSTM",
                }
            data = SingleObjectCodec(older).encode(name, record)
            decoded_name, decoded = SingleObjectCodec().decode(data)
            assert decoded_name == name
            assert {k: decoded[k] for k in record} == record
            if name == "DemandForecast":
                assert (decoded["series"], decoded["plan"], decoded["selected"]) == (
                    "gpus_in_use",
                    "",
                    True,
                )
                assert decoded["service"] == ""  # a region's series, as before v3
