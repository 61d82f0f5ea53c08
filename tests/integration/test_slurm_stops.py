"""Stopping Slurm jobs through the bridge, on a real Slurm on this host: a preemption
signals before the kill, a cancel, a drained node sends its job back, and the worker's own
preemption for an inference job runs through Slurm."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from harness import TopicReader
from slurm_cluster import (
    REGION,
    bridge,
    events_of,
    preempt,
    readers,
    slurm_cluster,
    slurm_config,
    slurm_tags,
    submit,
    until,
    worker,
)

from infra.config import Config
from infra.topics import JOBS_EVENTS, JOBS_LOGS

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("slurm")]


STUBBORN = [
    "bash",
    "-c",
    "trap 'echo got-USR1' USR1; trap 'echo got-TERM; exit 143' TERM; "
    "echo running; while true; do sleep 0.2; done",
]


def _started(events: TopicReader, job_id: str) -> dict:
    until(lambda: "STARTED" in events_of(events.poll(), job_id), 20, f"{job_id} STARTED")
    return next(e for e in events.records if e["job_id"] == job_id and e["type"] == "STARTED")


def _log(logs: TopicReader, job_id: str, epoch: int = 0) -> str:
    return b"".join(
        r["data"] for r in logs.poll() if r["job_id"] == job_id and r["epoch"] == epoch
    ).decode()


def test_preemption_signals_before_the_kill_and_cancel(config: Config, tmp_path: Path) -> None:
    cfg = slurm_config(config, [REGION])
    events, logs = readers(cfg, JOBS_EVENTS, JOBS_LOGS)
    with (
        slurm_cluster(tmp_path / "sa", name="gfa", prefix="a", nodes=2) as sl,
        worker(cfg) as w,
        bridge(cfg, REGION, sl, tmp_path / "bridge.log") as b,
    ):
        for job_id in ("victim", "cancelled"):
            submit(
                cfg,
                {
                    "job_id": job_id,
                    "gpu_count": 4,
                    "command": STUBBORN,
                    "allowed_regions": [REGION],
                    "checkpoint_grace_s": 4.0,
                },
            )
        for job_id in ("victim", "cancelled"):
            until(lambda j=job_id: "running" in _log(logs, j), 40, f"{job_id} running", b, w)
        epoch = int(_started(events, "victim")["epoch"])
        asked = time.monotonic()
        preempt(cfg, "victim", epoch, REGION, "PRIORITY", grace_s=30.0)
        preempt(
            cfg,
            "cancelled",
            int(_started(events, "cancelled")["epoch"]),
            REGION,
            "CANCEL",
            grace_s=2.0,
        )

        def ended():
            return {
                e["job_id"]: e
                for e in events.poll()
                if e["type"] in ("EVICTED", "CANCELLED") and int(e["epoch"]) == epoch
            }

        until(lambda: {"victim", "cancelled"} <= set(ended()), 40, "both stopped", b, w)
        took = time.monotonic() - asked
        victim, cancelled = ended()["victim"], ended()["cancelled"]
        # the job's checkpoint signal came first; it ignored it and was killed after its own
        # grace (4 s, not the decision's 30 s)
        assert victim["type"] == "EVICTED" and "got-USR1" in _log(logs, "victim", epoch)
        assert 4.0 <= took < 25.0
        # the cancel: SIGTERM to the job (no checkpoint signal), reported CANCELLED
        assert cancelled["type"] == "CANCELLED" and "got-TERM" in _log(logs, "cancelled")
        assert "got-USR1" not in _log(logs, "cancelled")
        assert cancelled["exit_code"] is not None


def test_drained_node_sends_the_job_back(config: Config, tmp_path: Path) -> None:
    cfg = slurm_config(config, [REGION])
    (events,) = readers(cfg, JOBS_EVENTS)
    command = ["bash", "-c", 'if [ "$GPUFLOW_EPOCH" = 0 ]; then sleep 120; else echo done; fi']
    with (
        slurm_cluster(tmp_path / "sa", name="gfa", prefix="a", nodes=2) as sl,
        worker(cfg) as w,
        bridge(cfg, REGION, sl, tmp_path / "bridge.log") as b,
    ):
        submit(
            cfg,
            {"job_id": "moved", "gpu_count": 8, "command": command, "allowed_regions": [REGION]},
        )
        until(lambda: "STARTED" in events_of(events.poll(), "moved"), 40, "started", b, w)
        first = _started(events, "moved")["node_ids"]
        sl.scontrol("update", f"nodename={first[0]}", "state=drain", "reason=gpuflow-test")
        until(lambda: "FINISHED" in events_of(events.poll(), "moved"), 60, "finished", b, w)
        mine = [e for e in events.records if e["job_id"] == "moved"]
        evicted = next(e for e in mine if e["type"] == "EVICTED")
        finished = next(e for e in mine if e["type"] == "FINISHED")
        assert evicted["epoch"] == 0 and "drain" in evicted["detail"].lower()
        assert finished["epoch"] > 0 and finished["node_ids"] != first


def test_worker_preemption_runs_through_slurm(config: Config, tmp_path: Path) -> None:
    """The worker's own PreemptionDecision: an online-inference job arrives on a cluster full
    of a batch job; the bridge signals the batch job (it checkpoints on USR1 and exits), the
    worker places the inference job on the freed GPUs, Slurm runs it."""
    policy = tmp_path / "policy.yaml"
    policy.write_text('{"preemption": {"checkpoint_stale_s": 0, "grace_period_s": 20}}')
    cfg = slurm_config(config, [REGION], policy_file=str(policy))
    events, logs = readers(cfg, JOBS_EVENTS, JOBS_LOGS)
    checkpointing = [
        "bash",
        "-c",
        "trap 'echo checkpointed; exit 0' USR1; echo running; while true; do sleep 0.2; done",
    ]
    with (
        slurm_cluster(tmp_path / "sa", name="gfa", prefix="a", nodes=1) as sl,
        worker(cfg) as w,
        bridge(cfg, REGION, sl, tmp_path / "bridge.log") as b,
    ):
        submit(
            cfg,
            {
                "job_id": "batch",
                "tenant": "research",
                "priority_class": "batch",
                "kind": "TRAINING",
                "gpu_count": 8,
                "command": checkpointing,
                "allowed_regions": [REGION],
                "checkpoint_interval_s": 600,
                "expected_duration_s": 600.0,
            },
        )
        until(lambda: "running" in _log(logs, "batch"), 40, "batch running", b, w)
        submit(
            cfg,
            {
                "job_id": "serve",
                "tenant": "serving",
                "priority_class": "online-inference",
                "kind": "INFERENCE",
                "gpu_count": 4,
                "allowed_regions": [REGION],
                "expected_duration_s": 3.0,
            },
        )
        until(lambda: "STARTED" in events_of(events.poll(), "serve"), 60, "serve started", b, w)
        batch = events_of(events.records, "batch")
        assert batch[:2] == ["STARTED", "EVICTED"], batch
        assert "checkpointed" in _log(logs, "batch")  # the signal reached it before any kill
        assert "gpuflow:serve:0" in slurm_tags(sl)
