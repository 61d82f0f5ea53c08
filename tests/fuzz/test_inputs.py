"""Hostile user input: job specs through `gpuflow submit` and trace files through `gpuflow
replay` get one line naming the field (or file:line:column), never a traceback."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from agents.replay.adapters import load_gavel_trace, load_philly_trace
from agents.replay.errors import TraceError
from agents.replay.trace_reader import load_jobs, load_nodes, load_throughputs
from gpuflow.cli import app
from infra.jobspec import JobSpecError, job_record, load_job_file

FUZZ = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
FIELDS = [
    "\x1e",
    "job_id",
    "gpu_count",
    "gpu_milli",
    "kind",
    "precision",
    "params_b",
    "priority",
    "allowed_regions",
    "allowed_gpu_models",
    "expected_duration_s",
    "preemptible",
    "cost_speed_preference",
    "memory_mib",
    "total_steps",
    "deferrable_until_ts",
    "budget_usd",
    "data_region",
    "tenant",
    "event_id",
    "signature",
    "gpus_please",
]
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(("", "x" * 10_240, "nan", "inf", "1e999", "TRAINING", "bf16", "-1")),
)
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=3), st.dictionaries(st.text(), _SCALARS))


def _one_line(result: Any) -> str:
    out = result.output.strip()
    assert result.exit_code == 2, out
    assert len(out.splitlines()) == 1 and "Traceback" not in out, out
    assert result.exception is None or isinstance(result.exception, SystemExit), out
    return out


@FUZZ
@given(st.dictionaries(st.sampled_from(FIELDS), _VALUES, max_size=5))
def test_job_specs_are_valid_records_or_name_the_field(spec: dict[str, Any]) -> None:
    try:
        record = job_record(spec)
    except JobSpecError as exc:
        assert exc.field and str(exc).startswith(f"{exc.field}: ")
        return
    assert record["event_id"] and record["job_id"]


@settings(FUZZ, max_examples=25)  # each example runs the CLI (~0.2 s)
@given(st.one_of(st.dictionaries(st.sampled_from(FIELDS), _VALUES, max_size=4), _VALUES))
def test_gpuflow_submit_answers_a_hostile_spec_file_in_one_line(content: Any) -> None:
    tmp = Path(__import__("tempfile").mkdtemp())
    spec = tmp / "job.yaml"
    spec.write_text(yaml.safe_dump(content))
    out = _one_line(CliRunner().invoke(app, ["submit", str(spec), "--data-dir", str(tmp)]))
    try:
        job_record(load_job_file(spec))
    except JobSpecError as exc:
        assert out.startswith("gpuflow: bad job spec: ") and exc.field in out, out
    else:  # a valid spec, but no broker here: said in one line too
        assert "no broker" in out, out


@pytest.mark.parametrize(
    "raw", [b"\xff\xfe\x00garbage", b"- just\n- a list\n", b"a: [unclosed", b"{" * 200]
)
def test_gpuflow_submit_unreadable_spec_files(tmp_path: Path, raw: bytes) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_bytes(raw)
    out = _one_line(CliRunner().invoke(app, ["submit", str(spec), "--data-dir", str(tmp_path)]))
    assert "bad job spec: file: " in out and str(spec) in out


# ---- trace files ----------------------------------------------------------------------------

_CELL = st.one_of(
    st.sampled_from(("", "0", "-1", "8", "1.5", "nan", "inf", "V100", "H100", "true", "x" * 300)),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=6),
)
_NODE_HEADERS = ("node_id,region,gpu_model,gpu_count", "node_id,region,gpu_model", "")
_JOB_HEADERS = (
    "job_id,submit_s,num_gpus,duration_s",
    "job_id,submit_s,num_gpus,duration_s,gpu_milli,priority,gpu_models",
    "job_id,job_id",
)


@st.composite
def _csv(draw: st.DrawFn, headers: tuple[str, ...]) -> str:
    header = draw(st.sampled_from(headers))
    rows = draw(st.lists(st.lists(_CELL, min_size=0, max_size=8), max_size=6))
    lines = [header, *(",".join(r) for r in rows)]
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.text(max_size=20)))
    return "\n".join(lines)


_WHERE = re.compile(r"^(?P<path>[^:]+)(:(?P<line>\d+)(:(?P<col>\d+))?)?: \S")


def _check(error: TraceError, path: Path, text: str) -> None:
    match = _WHERE.match(str(error))
    assert match and match["path"] == str(path), str(error)
    if error.line is not None:  # the position exists in the file
        assert int(match["line"]) == error.line <= max(1, len(text.splitlines()))
        if error.column is not None:
            assert int(match["col"]) == error.column >= 1


@FUZZ
@given(_csv(_NODE_HEADERS), _csv(_JOB_HEADERS))
def test_trace_files_load_or_name_file_line_and_column(nodes_csv: str, jobs_csv: str) -> None:
    tmp = Path(__import__("tempfile").mkdtemp())
    for name, text, load in (
        ("nodes.csv", nodes_csv, load_nodes),
        ("jobs.csv", jobs_csv, load_jobs),
        ("throughputs.csv", jobs_csv, load_throughputs),
    ):
        path = tmp / name
        path.write_text(text)
        try:
            load(path)
        except TraceError as exc:
            _check(exc, path, text)


@FUZZ
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_gavel_and_philly_traces_load_or_name_the_file(text: str) -> None:
    tmp = Path(__import__("tempfile").mkdtemp())
    nodes = load_nodes(Path(__file__).parents[2] / "examples/trace/nodes.csv")
    path = tmp / "trace"
    path.write_text(text)
    for load in (load_philly_trace, lambda n, p: load_gavel_trace(n, p, None)):
        try:
            load(nodes, path)
        except TraceError as exc:
            _check(exc, path, text)


@pytest.mark.parametrize("which", ["nodes", "jobs", "throughputs"])
def test_gpuflow_replay_names_file_line_and_column(tmp_path: Path, which: str) -> None:
    example = Path(__file__).parents[2] / "examples/trace"
    files = {
        "nodes": example / "nodes.csv",
        "jobs": example / "jobs.csv",
        "throughputs": tmp_path / "tp.csv",
    }
    files["throughputs"].write_text("job_type,gpu_model,num_gpus,steps_per_s\nresnet,V100,1,x\n")
    if which != "throughputs":
        bad = tmp_path / f"{which}.csv"
        lines = files[which].read_text().splitlines()
        column = lines[0].split(",").index("gpu_count" if which == "nodes" else "duration_s")
        cells = lines[2].split(",")
        cells[column] = "nan"  # in the second data row, on line 3
        lines[2] = ",".join(cells)
        bad.write_text("\n".join(lines))
        files[which] = bad
    args = [
        "replay",
        "--nodes",
        str(files["nodes"]),
        "--jobs",
        str(files["jobs"]),
        "--out",
        str(tmp_path / "out"),
    ]
    if which == "throughputs":
        args += ["--throughputs", str(files["throughputs"])]
    out = _one_line(CliRunner().invoke(app, args))
    column = {"nodes": 6, "jobs": 4, "throughputs": 4}[which]
    assert f"{files[which]}:{2 if which == 'throughputs' else 3}:{column}" in out, out


def test_unreadable_trace_files_are_one_line(tmp_path: Path) -> None:
    binary = tmp_path / "tp.csv"
    binary.write_bytes(b"\xff\xfe\xfa")
    example = Path(__file__).parents[2] / "examples/trace"
    for tp in (binary, tmp_path / "missing.csv"):
        args = [
            "replay",
            "--nodes",
            str(example / "nodes.csv"),
            "--jobs",
            str(example / "jobs.csv"),
            "--throughputs",
            str(tp),
            "--out",
            str(tmp_path),
        ]
        assert str(tp) in _one_line(CliRunner().invoke(app, args))
