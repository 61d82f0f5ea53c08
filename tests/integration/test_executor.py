"""The node executor on the real broker and worker, with real processes (issue 31): output read
back with `gpuflow logs`, exit codes, time limits, launch errors, the visibility variables, a
cancel stopping the whole process group, the double-booking guard."""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from executor_nodes import (
    ExecutorNode,
    ended,
    events_reader,
    executor_stack,
    free_l4,
    submit,
    wait_event,
)
from harness import CODEC, Running, TopicReader, wait_for
from typer.testing import CliRunner

from agents.execution.driver import group_alive
from gpuflow.cli import app
from infra.config import Config
from infra.kafka import producer
from infra.topics import DECISIONS_PLACEMENT, DECISIONS_PREEMPTION

pytestmark = pytest.mark.integration
PY = sys.executable


@pytest.fixture
def stack(config: Config, tmp_path: Path) -> Iterator[tuple[Running, list[ExecutorNode]]]:
    with executor_stack(config, tmp_path, "exec") as started:
        yield started


def _logs(run: Running, job_id: str, monkeypatch: pytest.MonkeyPatch, *more: str) -> Any:
    monkeypatch.setenv("GPUFLOW_KAFKA_BOOTSTRAP_SERVERS", run.config.kafka.bootstrap_servers)
    return CliRunner().invoke(app, ["logs", job_id, *more])


def test_output_exit_codes_time_limit_and_launch_errors(
    stack: tuple[Running, list[ExecutorNode]], monkeypatch: pytest.MonkeyPatch
) -> None:
    run, _ = stack
    events = events_reader(run.config)
    script = (
        "import os,sys; print('hello from', os.environ['GPUFLOW_JOB_ID']); "
        "print('visible', os.environ['CUDA_VISIBLE_DEVICES']); print('to stderr', file=sys.stderr)"
    )
    ok = submit(run.config, command=[PY, "-c", script])
    bad = submit(
        run.config, command=[PY, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"]
    )
    slow = submit(run.config, command=[PY, "-c", "import time; time.sleep(60)"], time_limit_s=1)
    missing = submit(run.config, command=["no-such-command-gpuflow"])
    boxed = submit(run.config, command=["true"], image="ubuntu:24.04")
    started = wait_event(events, ok, "STARTED", 60)
    assert started["pid"] > 0
    done = wait_event(events, ok, "FINISHED", 30)
    assert done["exit_code"] == 0 and done["progress"] == 1.0
    failed = wait_event(events, bad, "FAILED", 30)
    assert failed["exit_code"] == 3 and failed["cause"] == "EXIT"
    assert "boom" in failed["stderr_tail"]
    timeout = wait_event(events, slow, "TIMEOUT", 30)
    assert timeout["exit_code"] == -15, timeout  # SIGTERM ended it
    for job, why in ((missing, "command not found"), (boxed, "no container runtime")):
        launch = wait_event(events, job, "FAILED", 30)
        assert launch["cause"] == "LAUNCH_ERROR" and why in launch["detail"], launch
    out = _logs(run, ok, monkeypatch)
    assert out.exit_code == 0, out.output
    assert f"hello from {ok}" in out.output and "to stderr" in out.output
    gpus = [int(g) for g in out.output.split("visible ")[1].split()[0].split(",")]
    assert len(gpus) == 1 and 0 <= gpus[0] < 4
    events.close()


def _forge(config: Config, topic: str, name: str, record: dict[str, Any]) -> None:
    p = producer(config.kafka)
    value = CODEC.encode(
        name, {**record, "event_id": uuid.uuid4().hex, "ts": int(time.time() * 1000)}
    )
    p.produce(
        topic,
        key=record["job_id"].encode(),
        value=value,
        partition=config.kafka.partitioner()(record["region"]),
    )
    p.flush(10)


def test_cancel_stops_the_process_group_and_busy_gpus_are_refused(
    stack: tuple[Running, list[ExecutorNode]],
) -> None:
    run, _ = stack
    events, decisions = events_reader(run.config), TopicReader(run.config, DECISIONS_PLACEMENT)
    # the job leaves a grandchild behind that ignores SIGTERM: only the group's SIGKILL ends it
    shell = "trap '' TERM; sleep 60 & sleep 60; wait"
    job = submit(run.config, command=["sh", "-c", shell])
    pid = wait_event(events, job, "STARTED", 60)["pid"]
    assert group_alive(pid)
    [placed] = [d for d in decisions.poll(1) if d["job_id"] == job and d["outcome"] == "PLACED"]
    # another placement on the same GPUs (a stale decision, say): refused, the job runs on
    other = submit(run.config, command=["true"], allowed_gpu_models=["K80"])  # never placed
    _forge(run.config, DECISIONS_PLACEMENT, "PlacementDecision", {**placed, "job_id": other})
    refused = wait_event(events, other, "FAILED", 30)
    assert refused["cause"] == "REFUSED" and job in refused["detail"], refused
    assert group_alive(pid)
    cancel = {
        "job_id": job,
        "for_job_id": "",
        "region": placed["region"],
        "cause": "CANCEL",
        "victim_assignments": placed["assignments"],
        "checkpoint_first": False,
        "victim_priority": 0,
        "reason": "cancelled by its tenant",
        "victim_epoch": 0,
        "grace_period_s": 1.0,
    }
    asked = time.monotonic()
    _forge(run.config, DECISIONS_PREEMPTION, "PreemptionDecision", cancel)
    cancelled = wait_event(events, job, "CANCELLED", 30)
    assert time.monotonic() - asked < 10
    assert cancelled["exit_code"] is not None and cancelled["exit_code"] < 0, cancelled
    assert not group_alive(pid), "a process of the cancelled job's group is still alive"
    assert [e["type"] for e in ended(events, job)] == ["CANCELLED"]
    events.close()
    decisions.close()


def test_gpuflow_cancel_of_a_running_job_end_to_end(
    stack: tuple[Running, list[ExecutorNode]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gpuflow cancel` -> the worker's CANCEL decision -> the node executor stops the whole
    group -> CANCELLED with the exit status -> the worker frees the GPU (issue 31 item 4)."""
    run, _ = stack
    events = events_reader(run.config)
    free = free_l4(run)
    job = submit(run.config, command=["sh", "-c", "sleep 120 & sleep 120; wait"])
    pid = wait_event(events, job, "STARTED", 60)["pid"]
    assert group_alive(pid)
    assert wait_for(lambda: free_l4(run) == free - 1, 30)
    monkeypatch.setenv("GPUFLOW_KAFKA_BOOTSTRAP_SERVERS", run.config.kafka.bootstrap_servers)
    url = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}"
    out = CliRunner().invoke(app, ["cancel", job, "--reason", "e2e", "--url", url])
    assert out.exit_code == 0 and "cancel requested (RUNNING" in out.output, out.output
    cancelled = wait_event(events, job, "CANCELLED", 30)
    # the executor's own report (the worker's fallback after the grace carries no exit status)
    assert cancelled["exit_code"] is not None and cancelled["exit_code"] < 0, cancelled
    assert wait_for(lambda: not group_alive(pid), 10), "the cancelled job's group lives on"
    assert wait_for(lambda: free_l4(run) == free, 30), "the GPU did not come back"
    view = CliRunner().invoke(app, ["jobs", "--state", "CANCELLED", "--json", "--url", url])
    assert job in [j["job_id"] for j in json.loads(view.output)["jobs"]], view.output
    assert [e["type"] for e in ended(events, job)] == ["CANCELLED"]
    events.close()
