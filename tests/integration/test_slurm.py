"""The Slurm bridge against a real Slurm 22.05 (munged, slurmctld, one slurmd per node) on
this host: inventory, a gang on exactly the placed nodes, plain sbatch jobs respected,
preemption, cancel, a drained node, a bridge SIGKILLed and restarted, two clusters."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import TopicReader
from slurm_cluster import (
    bridge,
    events_of,
    needs_slurm,
    preempt,
    slurm_cluster,
    slurm_config,
    submit,
    until,
    worker,
)

from agents.slurm.commands import expand_hostlist, parse_records
from infra.config import Config
from infra.topics import DECISIONS_PLACEMENT, JOBS_EVENTS, JOBS_LOGS, NODE_INVENTORY

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _slurm_present() -> None:
    needs_slurm()


_OPEN: list[TopicReader] = []


@pytest.fixture(autouse=True)
def _close_readers() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def readers(cfg: Config, *topics: str) -> list[TopicReader]:
    out = [TopicReader(cfg, t) for t in topics]
    _OPEN.extend(out)
    return out

REGION = "slurm-a"
PRINT_ENV = ["bash", "-c", "echo NODE=$SLURMD_NODENAME ID=$SLURM_NODEID "
             "LIST=$SLURM_JOB_NODELIST GPUS=$CUDA_VISIBLE_DEVICES JOB=$GPUFLOW_JOB_ID"]  # fmt: skip


def test_inventory_gang_and_plain_sbatch(config: Config, tmp_path: Path) -> None:
    cfg = slurm_config(config, [REGION])
    inv, decisions, events, logs = readers(
        cfg, NODE_INVENTORY, DECISIONS_PLACEMENT, JOBS_EVENTS, JOBS_LOGS
    )
    with slurm_cluster(tmp_path / "sa", name="gfa", prefix="a") as sl, worker(cfg) as w, \
            bridge(cfg, REGION, sl, tmp_path / "bridge.log") as b:  # fmt: skip
        # inventory equals what scontrol reports
        until(lambda: len({r["node_id"] for r in inv.poll()}) == 4, 30, "inventory", b)
        nodes = {r["NodeName"]: r for r in parse_records(sl.scontrol("show", "node", "-o"))}
        for r in {r["node_id"]: r for r in inv.records}.values():
            n = nodes[r["node_id"]]
            assert r["region"] == REGION and r["gpu_model"] == "H100" and r["gpu_count"] == 8
            assert r["cpu_milli"] == int(n["CPUTot"]) * 1000
            assert r["memory_mib"] == int(n["RealMemory"])
        # a plain sbatch job holds 6 GPUs of a1 for a while
        plain = subprocess.run(["sbatch", "--parsable", "--nodelist=a1", "--gres=gpu:h100:6",
                                "--wrap", "sleep 60"], env=sl.env, capture_output=True,
                               text=True, check=True).stdout.strip()  # fmt: skip
        time.sleep(3)  # the bridge reads it and reports the GPUs taken
        # a 16-GPU gang, then 4 jobs of 2 GPUs: 32 - 6 = 26 free, so they all fit, none on
        # a1 beyond its 2 free GPUs
        submit(cfg, {"job_id": "gang", "kind": "TRAINING", "gpu_count": 16,
                     "tensor_parallel": 8, "command": PRINT_ENV, "expected_duration_s": 5.0,
                     "allowed_regions": [REGION]})  # fmt: skip
        for i in range(4):
            submit(cfg, {"job_id": f"small-{i}", "gpu_count": 2, "expected_duration_s": 20.0,
                         "allowed_regions": [REGION]})  # fmt: skip
        done = lambda: "FINISHED" in events_of(events.poll(), "gang")  # noqa: E731
        until(done, 60, "the gang finished", b, w)
        placed = [d for d in decisions.poll() if d["outcome"] == "PLACED"]
        gang = next(d for d in placed if d["job_id"] == "gang")
        gang_nodes = sorted(a["node_id"] for a in gang["assignments"])
        assert "a1" not in gang_nodes  # a1 has only 2 GPUs free
        until(lambda: any(r["job_id"] == "gang" and r["last"] for r in logs.poll()), 20, "logs", b)
        out = b"".join(r["data"] for r in logs.records if r["job_id"] == "gang").decode()
        lines = sorted(ln for ln in out.splitlines() if ln.startswith("NODE="))
        assert len(lines) == 2, out
        for i, line in enumerate(lines):
            fields = dict(kv.split("=", 1) for kv in line.split())
            assert sorted(expand_hostlist(fields["LIST"])) == gang_nodes
            assert fields["ID"] == str(i) and len(fields["GPUS"].split(",")) == 8
            assert fields["JOB"] == "gang"
        # the plain job's GPUs were never given: a1 carries at most 2 gpuflow GPUs at a time
        on_a1 = [sum(len(a["gpu_indices"]) for a in d["assignments"] if a["node_id"] == "a1")
                 for d in placed]  # fmt: skip
        assert sum(on_a1) <= 2 * (1 + len(placed)) and max(on_a1, default=0) <= 2
        jobs = sl.scontrol("show", "job", "-o")
        assert f"JobId={plain} " in jobs and "JobState=RUNNING" in jobs.split(f"JobId={plain} ")[1]


STUBBORN = ["bash", "-c", "trap 'echo got-USR1' USR1; trap 'echo got-TERM; exit 143' TERM; "
            "echo running; while true; do sleep 0.2; done"]  # fmt: skip


def _started(events: TopicReader, job_id: str) -> dict:
    until(lambda: "STARTED" in events_of(events.poll(), job_id), 20, f"{job_id} STARTED")
    return next(e for e in events.records if e["job_id"] == job_id and e["type"] == "STARTED")


def _log(logs: TopicReader, job_id: str, epoch: int = 0) -> str:
    return b"".join(r["data"] for r in logs.poll() if r["job_id"] == job_id
                    and r["epoch"] == epoch).decode()  # fmt: skip


def test_preemption_signals_before_the_kill_and_cancel(config: Config, tmp_path: Path) -> None:
    cfg = slurm_config(config, [REGION])
    events, logs = readers(cfg, JOBS_EVENTS, JOBS_LOGS)
    with slurm_cluster(tmp_path / "sa", name="gfa", prefix="a", nodes=2) as sl, \
            worker(cfg) as w, bridge(cfg, REGION, sl, tmp_path / "bridge.log") as b:  # fmt: skip
        for job_id in ("victim", "cancelled"):
            submit(cfg, {"job_id": job_id, "gpu_count": 4, "command": STUBBORN,
                         "allowed_regions": [REGION], "checkpoint_grace_s": 4.0})  # fmt: skip
        for job_id in ("victim", "cancelled"):
            until(lambda j=job_id: "running" in _log(logs, j), 40, f"{job_id} running", b, w)
        epoch = int(_started(events, "victim")["epoch"])
        asked = time.monotonic()
        preempt(cfg, "victim", epoch, REGION, "PRIORITY", grace_s=30.0)
        preempt(cfg, "cancelled", int(_started(events, "cancelled")["epoch"]), REGION, "CANCEL",
                grace_s=2.0)  # fmt: skip
        ended = lambda: {e["job_id"]: e for e in events.poll()  # noqa: E731
                         if e["type"] in ("EVICTED", "CANCELLED") and int(e["epoch"]) == epoch}
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
    with slurm_cluster(tmp_path / "sa", name="gfa", prefix="a", nodes=2) as sl, \
            worker(cfg) as w, bridge(cfg, REGION, sl, tmp_path / "bridge.log") as b:  # fmt: skip
        submit(cfg, {"job_id": "moved", "gpu_count": 8, "command": command,
                     "allowed_regions": [REGION]})  # fmt: skip
        until(lambda: "STARTED" in events_of(events.poll(), "moved"), 40, "started", b, w)
        first = _started(events, "moved")["node_ids"]
        sl.scontrol("update", f"nodename={first[0]}", "state=drain", "reason=gpuflow-test")
        until(lambda: "FINISHED" in events_of(events.poll(), "moved"), 60, "finished", b, w)
        mine = [e for e in events.records if e["job_id"] == "moved"]
        evicted = next(e for e in mine if e["type"] == "EVICTED")
        finished = next(e for e in mine if e["type"] == "FINISHED")
        assert evicted["epoch"] == 0 and "drain" in evicted["detail"].lower()
        assert finished["epoch"] > 0 and finished["node_ids"] != first
