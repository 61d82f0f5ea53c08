"""`gpuflow up --workers N`: N workers of one app, each with its own port and data dir; more
workers than partitions is refused with one line; every process stops at the end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuflow.cli import app
from gpuflow.stack import worker_config
from infra.config import load_config

runner = CliRunner()


def test_more_workers_than_partitions_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["up", "--workers", "5", "--data-dir", str(tmp_path)])
    out = result.output.strip()
    assert result.exit_code == 2 and len(out.splitlines()) == 1, out
    assert "workers: 5 workers on 4 partitions" in out


def test_each_worker_gets_its_own_port_and_data_dir_and_one_owns_chdb(tmp_path: Path) -> None:
    cfg = load_config(env={}, data_dir=str(tmp_path))
    first, second = worker_config(cfg, 0), worker_config(cfg, 1)
    assert first == cfg
    assert second.data_dir == tmp_path / "worker-1"
    assert second.worker.web_port != first.worker.web_port
    assert first.store.enabled and not second.store.enabled  # one process per chDB dir
    server = load_config(env={}, data_dir=str(tmp_path), store={"dsn": "http://ch:8123/g"})
    assert worker_config(server, 1).store.enabled  # a ClickHouse server takes every sink


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()  # Linux, like the stack's process handling


@pytest.mark.integration
def test_up_with_two_workers_decides_and_stops_them_all(tmp_path: Path) -> None:
    env = {**os.environ, "GPUFLOW_WORKER_WEB_PORT": "0"}
    argv = ["up", "--workers", "2", "--duration", "40", "--nodes", "80", "--rate", "6",
            "--data-dir", str(tmp_path / "data")]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "gpuflow", *argv],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.count("PLACED") >= 10, proc.stdout[-2000:]
    pids = re.search(r"workers pid (\d+),(\d+)", proc.stdout)
    assert pids, proc.stdout[:500]
    assert not any(_alive(int(p)) for p in pids.groups())
    assert len(re.findall(r"127\.0\.0\.1:\d+/ui/", proc.stdout)) == 2
    logs = tmp_path / "data"
    for name in ("worker.log", "worker-1.log"):
        text = (logs / name).read_text()
        assert "SIGTERM: committing, leaving the group" in text, text[-2000:]
