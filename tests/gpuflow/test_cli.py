"""The `gpuflow` command: one-line errors for bad input, and the embedded stack end to end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuflow.cli import app

runner = CliRunner()


def _one_line_error(result: object, field: str) -> None:
    out = result.output.strip()  # type: ignore[attr-defined]
    assert result.exit_code == 2, out  # type: ignore[attr-defined]
    assert len(out.splitlines()) == 1, out
    assert field in out and "Traceback" not in out


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["submit", "--gpus", "2", "--gpu-milli", "500"], "gpu_milli"),
        (["submit", "--gpus", "0"], "gpu_count"),
        (["submit", "--precision", "FP7"], "precision"),
        (["submit", "--kind", "GAMING"], "kind"),
    ],
)
def test_bad_flags_name_the_field(args: list[str], field: str, tmp_path: Path) -> None:
    _one_line_error(runner.invoke(app, [*args, "--data-dir", str(tmp_path)]), field)


def test_bad_job_files(tmp_path: Path) -> None:
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("gpu_count: [1,\n")
    _one_line_error(runner.invoke(app, ["submit", str(bad_yaml)]), "file")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("gpu_count: 1\ngpus_please: 8\n")
    _one_line_error(runner.invoke(app, ["submit", str(unknown)]), "gpus_please")
    _one_line_error(runner.invoke(app, ["submit", str(tmp_path / "missing.yaml")]), "file")


def test_commands_without_a_broker_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUFLOW_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.chdir(tmp_path)
    for args in (["topics"], ["watch", "placement"], ["submit", "--gpus", "1"]):
        _one_line_error(runner.invoke(app, args), "gpuflow up")


def test_watch_unknown_topic(tmp_path: Path) -> None:
    _one_line_error(
        runner.invoke(app, ["watch", "nonsense", "--data-dir", str(tmp_path)]), "nonsense"
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.integration
def test_up_streams_decisions_and_leaves_nothing_behind(tmp_path: Path) -> None:
    env = {**os.environ, "GPUFLOW_WORKER_WEB_PORT": "0"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuflow",
            "up",
            "--duration",
            "30",
            "--nodes",
            "120",
            "--rate",
            "8",
            "--data-dir",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.count("PLACED") >= 20, proc.stdout[-2000:]
    assert re.search(r"done in \d+s: .*placed \d+", proc.stdout)
    worker_pid = int(re.search(r"worker pid (\d+)", proc.stdout).group(1))  # type: ignore[union-attr]
    broker = re.search(r"broker 127\.0\.0\.1:(\d+)", proc.stdout).group(1)  # type: ignore[union-attr]
    assert not _alive(worker_pid)
    leftovers = subprocess.run(["pgrep", "-f", f"tcp://127.0.0.1:{broker}"], capture_output=True)
    assert leftovers.stdout.strip() == b""
    assert not (tmp_path / "data" / "stack.json").exists()
