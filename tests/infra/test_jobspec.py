"""Job specs: coercion, validation field by field, YAML files; valid specs always encode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.errors import InfraError
from infra.jobspec import (
    JOB_KINDS,
    PRECISIONS,
    JobSpecError,
    job_problems,
    job_record,
    load_job_file,
)
from schemas import SingleObjectCodec, default_schemas

CODEC = SingleObjectCodec()
NOW = 1_700_000_000_000

FULL = {
    "job_id": "llama-ft-1",
    "tenant": "research",
    "kind": "training",  # upper-cased
    "model_family": "llama",
    "job_type": "LM (batch size 80)",
    "params_b": "70",  # strings from CLI flags are coerced
    "precision": "bf16",
    "data_parallel": 2,
    "tensor_parallel": 8,
    "pipeline_parallel": 1,
    "gpu_count": 16,
    "gpu_milli": 1000,
    "min_gpu_memory_mib": 81920,
    "cpu_milli": 64000,
    "memory_mib": 2**33,  # Avro long
    "allowed_gpu_models": ["H100", "H200"],
    "allowed_regions": "eu-west, eu-central",  # comma list
    "cross_region_ok": "no",
    "data_region": "eu-west",
    "priority": 10,
    "preemptible": "yes",
    "checkpoint_interval_s": 600.0,  # integral float is fine
    "deferrable_until_ts": NOW + 3_600_000,
    "budget_usd": 1500,
    "cost_speed_preference": 0.25,
    "expected_duration_s": 7200,
    "reference_gpu_model": "A100",
    "total_steps": 10_000,
}


def test_minimal_spec_gets_an_id_and_defaults() -> None:
    record = job_record({}, now_ms=NOW)
    assert record["job_id"].startswith("job-") and len(record["job_id"]) == 16
    assert record["ts"] == NOW and record["event_id"]
    _, decoded = CODEC.decode(CODEC.encode("JobSubmitted", record))
    assert (decoded["kind"], decoded["precision"], decoded["gpu_count"]) == ("BATCH", "FP32", 1)
    assert decoded["gpu_milli"] == 1000 and decoded["preemptible"] is True


def test_full_spec_is_coerced() -> None:
    record = job_record(FULL, now_ms=NOW)
    assert (record["kind"], record["precision"]) == ("TRAINING", "BF16")
    assert record["params_b"] == 70.0 and isinstance(record["params_b"], float)
    assert record["checkpoint_interval_s"] == 600 and isinstance(
        record["checkpoint_interval_s"], int
    )
    assert record["allowed_regions"] == ["eu-west", "eu-central"]
    assert record["allowed_gpu_models"] == ["H100", "H200"]
    assert (record["preemptible"], record["cross_region_ok"]) == (True, False)
    assert record["budget_usd"] == 1500.0
    _, decoded = CODEC.decode(CODEC.encode("JobSubmitted", record))
    assert decoded["memory_mib"] == 2**33
    assert decoded["job_id"] == "llama-ft-1" and decoded["ts"] == NOW


@pytest.mark.parametrize(
    ("spec", "field", "value"),
    [
        ({"gpu-count": "4"}, "gpu_count", 4),  # CLI-style hyphens
        ({"allowed_regions": " eu , ,us "}, "allowed_regions", ["eu", "us"]),
        ({"allowed_regions": ""}, "allowed_regions", []),
        ({"allowed_zones": "eu/a, b"}, "allowed_zones", ["eu/a", "b"]),  # a job file's list
        ({"allowed_gpu_models": ("A100", 100)}, "allowed_gpu_models", ["A100", "100"]),
        ({"preemptible": "TRUE"}, "preemptible", True),
        ({"preemptible": 0}, "preemptible", False),
        ({"preemptible": False}, "preemptible", False),
        ({"budget_usd": None}, "budget_usd", None),  # nullable: None means no cap
        ({"gpu_milli": 250}, "gpu_milli", 250),
        ({"expected_duration_s": "1.5"}, "expected_duration_s", 1.5),
        ({"priority": -5}, "priority", -5),
        ({"job_id": 42}, "job_id", "42"),
        # memory model and software stack (issue 16): names normalised as the scorer does
        ({"sharding": "zero-3"}, "sharding", "ZERO3"),
        ({"sharding": "fsdp"}, "sharding", "FSDP"),
        ({"finetune": "qlora"}, "finetune", "QLORA"),
        ({"optimizer": "adam-8bit"}, "optimizer", "ADAM_8BIT"),
        ({"optimizer_offload": "yes"}, "optimizer_offload", True),
        ({"activation_checkpointing": "false"}, "activation_checkpointing", False),
        ({"activation_checkpointing": None}, "activation_checkpointing", None),  # auto
        ({"micro_batch": "4"}, "micro_batch", 4),
        ({"seq_len": 8192}, "seq_len", 8192),
        ({"software_stack": "CUDA-12.1"}, "software_stack", "cuda-12.1"),
    ],
)
def test_coercion(spec: dict[str, Any], field: str, value: Any) -> None:
    assert job_record(spec, now_ms=NOW)[field] == value


INVALID: list[tuple[dict[str, Any], str]] = [
    # coercion
    ({"gpu_count": "four"}, "gpu_count"),
    ({"gpu_count": 1.5}, "gpu_count"),
    ({"gpu_count": True}, "gpu_count"),
    ({"gpu_count": None}, "gpu_count"),  # YAML "gpu_count:" with no value
    ({"priority": 2**31}, "priority"),  # Avro int
    ({"memory_mib": 2**63}, "memory_mib"),  # Avro long
    ({"total_steps": "lots"}, "total_steps"),
    ({"deferrable_until_ts": 1.5}, "deferrable_until_ts"),
    ({"params_b": "big"}, "params_b"),
    ({"params_b": "nan"}, "params_b"),
    ({"expected_duration_s": float("inf")}, "expected_duration_s"),
    ({"budget_usd": [1]}, "budget_usd"),
    ({"allowed_regions": 5}, "allowed_regions"),
    ({"preemptible": "maybe"}, "preemptible"),
    ({"cross_region_ok": 2}, "cross_region_ok"),
    ({"tenant": None}, "tenant"),
    # unknown and reserved fields
    ({"gpus": 2}, "gpus"),
    ({"event_id": "x"}, "event_id"),
    ({"ts": 1}, "ts"),
    ({"schema": 2}, "schema"),
    # semantic checks (job_problems)
    ({"job_id": "  "}, "job_id"),
    ({"kind": "gaming"}, "kind"),
    ({"precision": "fp4"}, "precision"),
    ({"gpu_count": 0}, "gpu_count"),
    ({"gpu_milli": 0}, "gpu_milli"),
    ({"gpu_milli": 1001}, "gpu_milli"),
    ({"gpu_milli": 500, "gpu_count": 2}, "gpu_milli"),  # a share is of exactly one GPU
    ({"data_parallel": 0}, "data_parallel"),
    ({"tensor_parallel": -1}, "tensor_parallel"),
    ({"pipeline_parallel": 0}, "pipeline_parallel"),
    ({"cost_speed_preference": 1.5}, "cost_speed_preference"),
    ({"cost_speed_preference": -0.1}, "cost_speed_preference"),
    ({"params_b": -1}, "params_b"),
    ({"min_gpu_memory_mib": -1}, "min_gpu_memory_mib"),
    ({"cpu_milli": -1}, "cpu_milli"),
    ({"memory_mib": -1}, "memory_mib"),
    ({"expected_duration_s": 0}, "expected_duration_s"),
    # communication shape (issue 13)
    ({"grad_accum_steps": 0}, "grad_accum_steps"),
    ({"grad_accum_steps": "many"}, "grad_accum_steps"),
    ({"seq_len": -2048}, "seq_len"),
    ({"sharding": "zero4"}, "sharding"),
    ({"finetune": "dora"}, "finetune"),
    ({"optimizer": "lion"}, "optimizer"),
    ({"micro_batch": -1}, "micro_batch"),
    ({"seq_len": "long"}, "seq_len"),
    ({"software_stack": "cuda 12"}, "software_stack"),
]


def test_a_decoded_record_with_bad_memory_fields_lists_them() -> None:
    record = {"job_id": "j", "sharding": "ZERO9", "seq_len": -1, "software_stack": "??"}
    assert [p.split(":")[0] for p in job_problems(record)] == [
        "sharding",
        "seq_len",
        "software_stack",
    ]


def test_communication_shape_round_trips_to_the_scorer() -> None:
    from scorer import JobSpec

    record = job_record(
        {"job_id": "j", "kind": "training", "gpu_count": 16, "grad_accum_steps": "32",
         "micro_batch": 2, "seq_len": 4096},
        now_ms=NOW,
    )  # fmt: skip
    spec = JobSpec.from_record(record)
    assert (spec.grad_accum_steps, spec.micro_batch, spec.seq_len) == (32, 2, 4096)
    assert JobSpec.from_record(job_record({"job_id": "k"}, now_ms=NOW)).grad_accum_steps == 1


@pytest.mark.parametrize(("spec", "field"), INVALID)
def test_invalid_spec_names_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(JobSpecError) as err:
        job_record(spec, now_ms=NOW)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")
    assert "\n" not in str(err.value)
    assert isinstance(err.value, InfraError) and isinstance(err.value, ValueError)


def test_job_problems_lists_every_problem() -> None:
    bad = {"job_id": "", "kind": "X", "precision": "Y", "gpu_count": 0, "gpu_milli": 0}
    assert [p.split(":")[0] for p in job_problems(bad)] == [
        "job_id", "kind", "precision", "gpu_count", "gpu_milli",
    ]  # fmt: skip
    assert job_problems({"job_id": "j"}) == []
    assert f"one of {', '.join(JOB_KINDS)}" in job_problems({"job_id": "j", "kind": "X"})[0]
    assert ", ".join(PRECISIONS) in job_problems({"job_id": "j", "precision": "X"})[0]


def test_job_problems_accepts_a_decoded_record() -> None:
    record = job_record(FULL, now_ms=NOW)
    _, decoded = CODEC.decode(CODEC.encode("JobSubmitted", record))
    assert job_problems(decoded) == []


# --- YAML files --------------------------------------------------------------------------


def test_load_job_file(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("job_id: j1\nkind: inference\nallowed_regions: [eu, us]\ngpu-count: 2\n")
    spec = load_job_file(path)
    assert spec == {"job_id": "j1", "kind": "inference", "allowed_regions": ["eu", "us"],
                    "gpu-count": 2}  # fmt: skip
    assert job_record(spec, now_ms=NOW)["gpu_count"] == 2


def test_load_job_file_reads_json(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text('{"job_id": "j2", "gpu_count": 4}')
    assert load_job_file(path) == {"job_id": "j2", "gpu_count": 4}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("job_id: [unclosed\n", "not valid YAML"),
        ("key: value\n  bad indent: here\n", "not valid YAML"),
        ("- a\n- b\n", "must hold a mapping"),
        ("just a string\n", "must hold a mapping"),
        ("", "must hold a mapping"),
        (b"\xff\xfe\x00job", "not UTF-8"),
    ],
)
def test_job_file_errors_name_the_file(
    tmp_path: Path, content: str | bytes | None, message: str
) -> None:
    path = tmp_path / "job.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(JobSpecError, match=message) as err:
        load_job_file(path)
    assert err.value.field == "file"
    assert str(err.value).startswith("file: ") and "\n" not in str(err.value)


def test_a_directory_is_not_a_job_file(tmp_path: Path) -> None:
    with pytest.raises(JobSpecError, match="cannot read") as err:
        load_job_file(tmp_path)
    assert err.value.field == "file"


# --- properties --------------------------------------------------------------------------

JOB_FIELDS = sorted(f["name"] for f in default_schemas().get("JobSubmitted").source["fields"])
FIELDS = [*JOB_FIELDS, "gpus", "event_id"]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from([*JOB_KINDS, *PRECISIONS, "eu,us", "yes", "no", "1000"]),
    st.lists(st.text(max_size=5), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(spec=st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=6))
def test_any_spec_is_refused_with_a_field_or_encodes(spec: dict[str, Any]) -> None:
    try:
        record = job_record(spec, now_ms=NOW)
    except JobSpecError as exc:
        assert exc.field and "\n" not in str(exc)
        return
    assert job_problems(record) == []
    _, decoded = CODEC.decode(CODEC.encode("JobSubmitted", record))
    assert decoded["job_id"] == record["job_id"]
