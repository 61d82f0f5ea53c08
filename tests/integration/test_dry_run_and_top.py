"""`gpuflow submit --dry-run` and `gpuflow top` against a running worker on the real broker."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from harness import Running, TopicReader, final_decisions, submit_jobs, wait_for
from typer.testing import CliRunner, Result

from gpuflow.cli import app
from gpuflow.commands.common import write_stack_file
from infra.kafka import end_offsets
from infra.topics import DECISIONS_PLACEMENT, JOBS_ROUTED, JOBS_SUBMITTED

pytestmark = pytest.mark.integration
runner = CliRunner()


def _ready(running: Running) -> bool:
    try:
        state = running.state()
    except httpx.HTTPError:  # the worker's web server is not up yet
        return False
    gpus = sum(sum(r["total_gpus"].values()) for r in state["regions"].values())
    return bool(state["ready"]) and gpus >= sum(n["gpu_count"] for n in running.fleet.nodes)


def _cli(running: Running, *args: str) -> Result:
    return runner.invoke(app, [*args, "--data-dir", str(running.config.data_dir)])


def test_dry_run_sends_nothing_and_top_shows_the_stack(running: Running) -> None:
    write_stack_file(running.config)  # what `gpuflow up` writes: the broker and the web page
    submit_jobs(running.config, [{"job_id": f"warm-{i}", "gpu_count": 1} for i in range(5)], 20)
    decisions = TopicReader(running.config, DECISIONS_PLACEMENT)
    assert wait_for(lambda: len(final_decisions(decisions.poll())) >= 5, 240), (
        running.worker.log_tail()
    )
    assert wait_for(lambda: _ready(running), 180), running.state()
    kafka = running.config.kafka
    before = {t: end_offsets(kafka, t) for t in (JOBS_SUBMITTED, JOBS_ROUTED)}

    fits = _cli(running, "submit", "--dry-run", "--job-id", "dry-fits", "--gpus", "1",
                "--kind", "INFERENCE", "--family", "llama", "--params-b", "7",
                "--precision", "FP16")  # fmt: skip
    out = fits.output
    assert fits.exit_code == 0, out
    lines = out.splitlines()
    assert lines[0] == "DRY RUN dry-fits  (nothing was submitted)"
    # 7e9 x 2 B + KV 2 x 32 x 32 x 128 x 4096 x 2 B + 1.5 GiB = 16.5 GiB
    assert lines[1].startswith("memory    needs 16.5 GiB per GPU (weights 13.0 GiB")
    assert lines[2].startswith("would go  ") and " score " in lines[2] and "TFLOPS FP16" in lines[2]
    assert "/h" in lines[2] and lines[3].lstrip().startswith("on ")
    assert "alternatives" in lines and "  2. " in out and "refused" in lines
    # the demo fleet's T4 and V100-16 (about 15 GiB) cannot hold it: the reason says so
    assert any("memory: needs 16.5 GiB per GPU" in line for line in lines)

    big = _cli(running, "submit", "--dry-run", "--job-id", "dry-big", "--gpus", "8",
               "--gpu-model", "H100", "--kind", "TRAINING", "--params-b", "70",
               "--precision", "BF16")  # fmt: skip
    assert big.exit_code == 1, big.output
    assert "would be REJECTED" in big.output
    assert (
        "needs 139 GiB per GPU, H100 has 79.6 GiB; fits on 16 GPUs, with optimizer offload, "
        "or with LoRA" in big.output
    )

    # nothing was produced: the job topics did not grow and no decision names the jobs
    time.sleep(3)
    assert {t: end_offsets(kafka, t) for t in before} == before
    seen = {d.get("job_id") for d in decisions.poll(1.0)}
    assert not seen & {"dry-fits", "dry-big"}
    decisions.close()

    frame = _cli(running, "top", "--once")
    text = frame.output
    assert frame.exit_code == 0, text
    assert text.startswith("gpuflow top  http://127.0.0.1:") and "ready" in text
    assert "telemetry lag p50" in text and "dead letters 0" in text
    assert "GPUs by region and model" in text and "Last decisions" in text
    for node in running.fleet.nodes:
        assert node["region"] in text and node["gpu_model"] in text
    assert "PLACED" in text and "warm-" in text


def _read(fd: int, done: Callable[[str], bool], timeout_s: float) -> str:
    """Read a terminal's output, as a terminal does, until `done(what was read)` or time is up
    (a pty nobody reads fills, and blocks its writer: rich's refresh thread, and an exit)."""
    seen, deadline = b"", time.monotonic() + timeout_s
    while time.monotonic() < deadline and not done(seen.decode(errors="replace")):
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
    return seen.decode(errors="replace")


def test_top_refreshes_until_ctrl_c(running: Running, tmp_path: Path) -> None:
    """On a real terminal (a pty): frames keep coming; Ctrl-C leaves with status 0."""
    write_stack_file(running.config)
    assert wait_for(lambda: _ready(running), 240), running.worker.log_tail()
    # stderr to a file, not a pipe: a pipe nobody reads until the exit could block the writer
    # and the exit with it; the file is there to read when it does not exit
    err_path = tmp_path / "top.err"
    err_file = err_path.open("wb")
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuflow", "top", "--interval", "0.5",
         "--data-dir", str(running.config.data_dir)],
        stdin=follower, stdout=follower, stderr=err_file,
        env={**os.environ, "COLUMNS": "140", "LINES": "60", "TERM": "xterm"},
    )  # fmt: skip
    os.close(follower)
    try:
        header = "GPUs by region and model"
        screen = _read(leader, lambda seen: seen.count(header) >= 2, timeout_s=240)  # 2 frames
        assert screen.count(header) >= 2, screen[-3000:]  # it refreshed
        proc.send_signal(signal.SIGINT)
        _read(leader, lambda _: proc.poll() is not None, timeout_s=60)
        try:
            rc = proc.wait(timeout=10)  # exited already, or closed its terminal on the way out
        except subprocess.TimeoutExpired:
            said = err_path.read_text(errors="replace")[-2000:]
            pytest.fail(f"top did not exit 70 s after Ctrl-C; stderr: {said}")
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
        err_file.close()
    err = err_path.read_text(errors="replace")
    assert rc == 0, err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    for node in running.fleet.nodes:
        assert node["gpu_model"] in screen
