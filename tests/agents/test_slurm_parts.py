"""The Slurm bridge's pure parts: parsing scontrol's records, the sbatch request, which GPUs
count as taken by jobs gpuflow did not place, Slurm states as JobEvents, log chunks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents.slurm.commands import (
    SlurmCli,
    SlurmJob,
    SlurmNode,
    expand_hostlist,
    parse_gres,
    parse_records,
)
from agents.slurm.dispatch import build_request, parse_tag, tag
from agents.slurm.errors import SlurmError
from agents.slurm.inventory import GpuModels, foreign_gpus
from agents.slurm.logs import LogShipper
from agents.slurm.runs import Run, end_event
from infra.config import load_config
from infra.errors import ConfigError

JOB = (
    "JobId=7 JobName=wrap JobState=RUNNING Reason=None ExitCode=0:0 NodeList=n[1-2] "
    "JOB_GRES=gpu:h100:4 Nodes=n1 CPU_IDs=0 Mem=0 GRES=gpu:h100:2(IDX:1-2) "
    "Nodes=n2 CPU_IDs=0 Mem=0 GRES=gpu:h100:2(IDX:0,3) Features=(null) "
    "Comment=gpuflow:r StdOut=/o StdErr=/e TresPerNode=gres:gpu:h100:2"
)


def _node(name: str = "n1", state: str = "IDLE", gpus: int = 8) -> SlurmNode:
    return SlurmNode(name, state, 16, 64000, "h100", gpus, 0, ("gpu",), ())


def _job(state: str = "RUNNING", code: int = 0, sig: int = 0, **kw: object) -> SlurmJob:
    base: dict = dict(
        job_id=3,
        name="gpuflow:j:0",
        state=state,
        reason="None",
        exit_code=code,
        exit_signal=sig,
        nodes=("n1",),
        comment="",
        stdout="",
        stderr="",
    )
    return SlurmJob(**{**base, **kw})


def test_records_hostlists_and_gres() -> None:
    rec = parse_records("NodeName=n1 OS=Linux 6.1 #1 SMP State=MIXED+DRAIN Gres=gpu:h100:8")[0]
    assert rec["OS"] == "Linux 6.1 #1 SMP" and rec["State"] == "MIXED+DRAIN"
    assert expand_hostlist("n[1-3,7],x[08-09],solo") == [
        "n1",
        "n2",
        "n3",
        "n7",
        "x08",
        "x09",
        "solo",
    ]
    assert expand_hostlist("(null)") == []
    (g,) = parse_gres("gpu:a100:2(IDX:0,2-3)")
    assert (g.type, g.count, g.idx) == ("a100", 2, (0, 2, 3))
    (job,) = SlurmCli._jobs(JOB)
    assert job.nodes == ("n1", "n2") and job.gpu_idx == {"n1": (1, 2), "n2": (0, 3)}
    assert job.gpus_per_node == 2 and job.comment == "gpuflow:r"


def test_unhealthy_states() -> None:
    assert _node(state="IDLE").healthy and _node(state="MIXED").healthy
    for state in ("IDLE+DRAIN", "MIXED+DRAIN", "DOWN", "DOWN*", "FAIL", "IDLE*"):
        assert not _node(state=state).healthy, state


def test_sbatch_request(tmp_path: Path) -> None:
    settings = load_config(env={}).slurm
    decision = {"job_id": "j1", "epoch": 2, "expected_duration_s": 9.0}
    spec = {
        "command": ["python", "train.py", "--lr", "1e-3 x"],
        "env": {"A": "b c"},
        "time_limit_s": 125,
        "checkpoint_signal": "SIGUSR2",
        "checkpoint_grace_s": 20.0,
        "workdir": "/w",
    }
    req = build_request(decision, spec, ["n1", "n2"], [8, 8], "h100", settings, tmp_path, "r")
    opts = set(req.options)
    assert {
        "--job-name=gpuflow:j1:2",
        "--nodes=2",
        "--nodelist=n1,n2",
        "--gres=gpu:h100:8",
        "--time=2:05",
        "--signal=B:USR2@20",
        "--no-requeue",
    } <= opts
    assert "export A='b c'" in req.script and "cd -- /w || exit 126" in req.script
    assert "exec srun" in req.script and "'1e-3 x'" in req.script
    one = build_request(decision, {}, ["n1"], [2], "", settings, tmp_path, "r")
    assert "--gres=gpu:2" in one.options and "sleep 9.000 &" in one.script
    assert not any(o.startswith("--time") for o in one.options)
    assert parse_tag(tag("a:b", 3)) == ("a:b", 3) and parse_tag("wrap") is None


def test_the_script_keeps_the_checkpoint_contract(tmp_path: Path) -> None:
    """The batch script, run by bash as slurmd would: the checkpoint directory is made and kept
    per job, GPUFLOW_RESUME appears once it holds a checkpoint, and the job's env cannot move it."""
    settings = load_config(env={}, slurm={"checkpoint_dir": str(tmp_path / "ckpt")}).slurm
    names = "'GPUFLOW_CHECKPOINT_DIR', 'GPUFLOW_EPOCH', 'GPUFLOW_RESUME'"
    show = f"import os; print([os.environ.get(k) for k in ({names})])"
    spec = {
        "command": [sys.executable, "-c", show],
        "env": {"GPUFLOW_CHECKPOINT_DIR": "/elsewhere"},
    }

    def run(epoch: int) -> str:
        decision = {"job_id": "a/b", "epoch": epoch}
        req = build_request(decision, spec, ["n1"], [1], "", settings, tmp_path / "out", "r")
        env = {"PATH": os.environ["PATH"], "GPUFLOW_RESUME": "1"}  # a stale one is dropped
        done = subprocess.run(["bash", "-c", req.script], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    ckpt = tmp_path / "ckpt" / "a%2Fb"
    assert run(0) == str([str(ckpt), "0", None]) and ckpt.is_dir()
    (ckpt / "step-100.pt").write_text("saved")
    assert run(1) == str([str(ckpt), "1", "1"])


def test_foreign_gpus_avoid_gpuflows_own() -> None:
    nodes = [_node("n1"), _node("n2")]
    jobs = list(SlurmCli._jobs(JOB))  # someone else's: n1 IDX 1-2, n2 IDX 0,3
    # gpuflow placed its own job on n1 GPU 1 (Slurm gave it other indices): another is marked
    taken = foreign_gpus(nodes, jobs, ours=set(), placed={"n1": {1}})
    assert taken == {"n1": {2, 0}, "n2": {0, 3}}
    assert foreign_gpus(nodes, jobs, ours={7}, placed={}) == {}
    no_idx = [_job(gpu_idx={}, gpus_per_node=3, job_id=9)]
    assert foreign_gpus(nodes, no_idx, ours=set(), placed={}) == {"n1": {0, 1, 2}}


def test_end_events() -> None:
    run = Run("j", 0, ["n1"], {"n1": [0]})
    assert end_event(run, _job("COMPLETED"))[0] == "FINISHED"
    kind, extra = end_event(run, _job("FAILED", code=3))
    assert (kind, extra["cause"], extra["exit_code"]) == ("FAILED", "EXIT", 3)
    assert end_event(run, _job("FAILED", code=127))[1]["cause"] == "LAUNCH_ERROR"
    assert end_event(run, _job("TIMEOUT"))[0] == "TIMEOUT"
    assert end_event(run, _job("NODE_FAIL"))[1]["cause"] == "NODE_LOST"
    assert end_event(run, _job("CANCELLED", sig=9))[1]["exit_code"] == -9
    run.stop = "evict"
    assert end_event(run, _job("CANCELLED"))[0] == "EVICTED"
    run.stop = "refuse"
    assert end_event(run, _job("CANCELLED"))[1]["cause"] == "REFUSED"


def test_gres_models_and_opaque(caplog: pytest.LogCaptureFixture) -> None:
    models = GpuModels({"weird": "A100-80"})
    assert models.model("h100") == "H100" and models.model("weird") == "A100-80"
    assert models.model("tpu9") == "tpu9" and models.model("tpu9") == "tpu9"
    assert sum("tpu9" in r.message for r in caplog.records) == 1  # one warning line
    assert load_config(env={"GPUFLOW_SLURM_GRES_MODELS": "a=B"}).slurm.gres_map() == {"a": "B"}
    with pytest.raises(ConfigError, match=r"slurm\.gres_models"):
        load_config(env={"GPUFLOW_SLURM_GRES_MODELS": "nope"}).slurm.gres_map()
    with pytest.raises(SlurmError, match=r"slurm\.rest_url"):
        SlurmCli(load_config(env={"GPUFLOW_SLURM_REST_URL": "http://x"}).slurm)


def test_log_shipper_bounds_and_last(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_bytes(b"x" * 10)
    ship = LogShipper(str(path), "STDOUT", "j", 1, "n1", limit=15)
    (first,) = ship.poll()
    assert (first["seq"], first["offset"], first["data"]) == (0, 0, b"x" * 10)
    with open(path, "ab") as f:
        f.write(b"y" * 10)
    (last,) = ship.poll(final=True)
    assert last["data"] == b"y" * 5 and last["skipped"] == 5 and last["last"]
    assert ship.poll(final=True) == []


def test_cli_one_line_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gpuflow.cli import app

    monkeypatch.setenv("GPUFLOW_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    monkeypatch.setenv("GPUFLOW_SLURM_REST_URL", "http://127.0.0.1:6820")
    monkeypatch.setenv("GPUFLOW_DATA_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["slurm-bridge", "--region", "r"])
    assert result.exit_code == 2 and "slurm.rest_url" in result.output
