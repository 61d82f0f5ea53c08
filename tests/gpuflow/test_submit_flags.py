"""`gpuflow submit`'s issue-31 flags: the command after `--`, K=V environment, time limits in
Slurm's forms, the checkpoint signal with its grace (no broker: the spec is checked first)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import gpuflow.commands.jobs as jobs
from gpuflow.cli import app


@pytest.fixture
def spec(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The validated record `submit` would send (it stops right after validation)."""
    seen: dict[str, Any] = {}
    real = jobs._spec_from

    def stop_after(job_file: Path | None, flags: dict[str, Any]) -> dict[str, Any]:
        seen.update(real(job_file, flags))
        raise SystemExit(0)

    monkeypatch.setattr(jobs, "_spec_from", stop_after)
    return seen


def test_the_command_after_the_double_dash_and_the_run_flags(spec: dict[str, Any]) -> None:
    args = ["submit", "--gpus", "1", "--env", "A=1", "--env", "B=x=y", "--time-limit",
            "1-00:00:00", "--retries", "2", "--signal", "USR2@20", "--workdir", "/tmp",
            "--", "python", "train.py", "--lr", "3"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert spec["command"] == ["python", "train.py", "--lr", "3"]
    assert spec["env"] == {"A": "1", "B": "x=y"} and spec["time_limit_s"] == 86400
    assert spec["retries"] == 2 and spec["workdir"] == "/tmp"
    assert (spec["checkpoint_signal"], spec["checkpoint_grace_s"]) == ("SIGUSR2", 20.0)


def test_a_job_file_then_a_command(spec: dict[str, Any], tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("gpu_count: 2\ntime_limit_s: '90:00'\n")
    result = CliRunner().invoke(app, ["submit", str(job), "--", "sh", "-c", "echo hi"])
    assert result.exit_code == 0, result.output
    assert spec["command"] == ["sh", "-c", "echo hi"] and spec["time_limit_s"] == 5400
    assert spec["gpu_count"] == 2


def test_command_string_is_split_as_a_shell_would(spec: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["submit", "--command", "python -c 'print(1)'"])
    assert result.exit_code == 0, result.output
    assert spec["command"] == ["python", "-c", "print(1)"]


@pytest.mark.parametrize(
    ("args", "field"),
    [(["--time-limit", "soon"], "time_limit_s"), (["--env", "NOEQUALS"], "env"),
     (["--signal", "SIGFOO"], "checkpoint_signal"), (["--command", "a", "--", "b"], "command")],
)  # fmt: skip
def test_bad_run_flags_name_the_field(args: list[str], field: str) -> None:
    result = CliRunner().invoke(app, ["submit", *args])
    assert result.exit_code == 2 and field in result.output, result.output
