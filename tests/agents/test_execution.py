"""The node executor's parts without a broker: the visibility variables per vendor, the task
runner over real processes and the journal, the log shipper's bound, time-limit forms."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agents.execution.driver import RawProcessDriver, group_alive
from agents.execution.envvars import job_env, visible_devices_env
from agents.execution.journal import Journal
from agents.execution.logs import LogLimits, LogShipper
from agents.execution.placed import build_task
from agents.execution.task import PROGRESS_FILE, State, TaskRunner, Timing
from infra.durations import parse_time_limit


@pytest.mark.parametrize(
    ("vendor", "expected"),
    [
        ("nvidia", {"CUDA_VISIBLE_DEVICES": "2,5"}),
        ("amd", {"HIP_VISIBLE_DEVICES": "2,5", "ROCR_VISIBLE_DEVICES": "2,5"}),
        ("huawei", {"ASCEND_RT_VISIBLE_DEVICES": "2,5"}),
    ],
)
def test_exactly_the_placed_gpus_are_visible_by_vendor(vendor: str, expected: dict) -> None:
    assert visible_devices_env(vendor, [2, 5]) == expected


def test_a_gpu_share_adds_the_mps_limit_on_nvidia_only() -> None:
    assert visible_devices_env("nvidia", [3], 250) == {
        "CUDA_VISIBLE_DEVICES": "3",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
    }
    assert visible_devices_env("amd", [3], 250) == {
        "HIP_VISIBLE_DEVICES": "3",
        "ROCR_VISIBLE_DEVICES": "3",
    }


def test_a_job_cannot_widen_its_visibility_and_resume_is_set_only_with_a_checkpoint() -> None:
    kw: dict[str, Any] = dict(
        devices={"CUDA_VISIBLE_DEVICES": "1"},
        job_id="j",
        epoch=2,
        checkpoint_dir="/c",
        progress_file="/c/p",
    )
    env = job_env({"GPUFLOW_RESUME": "1"}, {"CUDA_VISIBLE_DEVICES": "0,1,2"}, resume=False, **kw)
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and "GPUFLOW_RESUME" not in env
    assert env["GPUFLOW_EPOCH"] == "2" and env["GPUFLOW_CHECKPOINT_DIR"] == "/c"
    assert job_env({}, {}, resume=True, **kw)["GPUFLOW_RESUME"] == "1"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("05:30", 330),
        ("1:02:03", 3723),
        ("1-00:00:00", 86400),
        ("2-3", 183600),
        ("1-2:30", 95400),
        (0, 0),
    ],
)
def test_time_limits_in_seconds_and_slurm_forms(text: Any, seconds: int) -> None:
    assert parse_time_limit(text) == seconds


@pytest.mark.parametrize("text", ["abc", "1:2:3:4", "-5", "1.5", "m"])
def test_bad_time_limits_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time_limit(text)


def _runner(tmp_path: Path, command: list[str], **task: Any) -> TaskRunner:
    journal = Journal(tmp_path / "journal")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    spec = {
        "job_id": "job-1",
        "epoch": 0,
        "gpu_indices": [1],
        "command": command,
        "workdir": "",
        "checkpoint_dir": str(ckpt),
        "started_s": time.time(),
        **task,
    }
    d = journal.claim("job-1", int(spec["epoch"]), spec)
    return TaskRunner(d, spec, RawProcessDriver(), Timing(term_wait_s=1.0, default_grace_s=2.0))


def _until_end(runner: TaskRunner, timeout_s: float = 15.0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while runner.state is not State.ENDED and time.monotonic() < deadline:
        out += runner.tick()
        time.sleep(0.05)
    assert runner.state is State.ENDED, out
    return out


@pytest.mark.parametrize("vendor", ["nvidia", "amd", "huawei"])
def test_a_real_process_sees_its_visibility_variables(tmp_path: Path, vendor: str) -> None:
    code = "import os; print(sorted((k, v) for k, v in os.environ.items() if 'VISIBLE' in k))"
    runner = _runner(tmp_path, [sys.executable, "-c", code])
    env = {**os.environ, **visible_devices_env(vendor, [1, 3])}
    env = {
        k: v for k, v in env.items() if "VISIBLE" not in k or k in visible_devices_env(vendor, [1])
    }
    assert runner.start(env)["type"] == "STARTED"
    [end] = _until_end(runner)
    assert end["type"] == "FINISHED" and end["exit_code"] == 0
    shown = runner.d.file("stdout.log").read_text()
    assert shown.strip() == str(sorted(visible_devices_env(vendor, [1, 3]).items()))


def test_exit_status_is_kept_by_the_shim_when_nobody_waits(tmp_path: Path) -> None:
    runner = _runner(tmp_path, [sys.executable, "-c", "import sys; sys.exit(7)"])
    assert runner.start(dict(os.environ))["type"] == "STARTED"
    assert runner.handle is not None
    pid = runner.handle.pid
    assert wait_until(lambda: runner.d.get("exit") is not None)
    # a second runner over the same journal (a restarted executor) finds the status
    again = TaskRunner(runner.d, runner.task, RawProcessDriver(), Timing())
    again.attach()
    [end] = _until_end(again)
    assert end == {**end, "type": "FAILED", "cause": "EXIT", "exit_code": 7}
    assert not group_alive(pid)


def test_an_eviction_signals_waits_for_the_checkpoint_then_reports_its_progress(
    tmp_path: Path,
) -> None:
    code = (
        "import os, signal, time\n"
        "def saved(*_):\n"
        "    open(os.environ['GPUFLOW_PROGRESS_FILE'], 'w').write('0.4')\n"
        "signal.signal(signal.SIGUSR1, saved)\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    runner = _runner(tmp_path, [sys.executable, "-c", code])
    env = {**os.environ, "GPUFLOW_PROGRESS_FILE": str(tmp_path / "ckpt" / PROGRESS_FILE)}
    runner.start(env)
    assert wait_until(lambda: b"ready" in runner.d.file("stdout.log").read_bytes())
    runner.request_stop("EVICTED", grace_s=20, checkpoint=True, detail="test")
    started = time.monotonic()
    events = _until_end(runner)
    assert time.monotonic() - started < 5  # the checkpoint, not the 20 s grace, ended the wait
    assert [e["type"] for e in events] == ["CHECKPOINTED", "EVICTED"]
    assert events[-1]["progress"] == pytest.approx(0.4) and events[-1]["exit_code"] == -15


def test_a_job_without_a_command_waits_its_duration_in_a_bare_interpreter(tmp_path: Path) -> None:
    """The twin's kind of job, one per placement: no site or environment to load at its start."""
    placed: dict[str, Any] = {
        "job_id": "twin-1",
        "region": "us-east",
        "expected_duration_s": 0.3,
        "assignments": [{"node_id": "n1", "gpu_indices": [0]}],
    }
    command = build_task(placed, placed["assignments"][0], {"job_id": "twin-1"}, tmp_path)[
        "command"
    ]
    started = time.monotonic()
    subprocess.run(command, check=True, timeout=10)
    assert 0.3 <= time.monotonic() - started < 5
    interpreter = command[: command.index("-c")]
    code = "import sys; print(sys.flags.isolated, sys.flags.no_site, 'site' in sys.modules)"
    shown = subprocess.run([*interpreter, "-c", code], capture_output=True, check=True, timeout=10)
    assert shown.stdout.split() == [b"1", b"1", b"False"]


def test_the_journal_claims_an_epoch_once(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    assert not journal.claimed("a/b", 3)
    journal.claim("a/b", 3, {"x": 1})
    assert journal.claimed("a/b", 3) and not journal.claimed("a/b", 4)
    assert [(d.job_id, d.epoch) for d in journal.epochs()] == [("a/b", 3)]


def test_the_log_shipper_keeps_head_and_tail_within_its_bound(tmp_path: Path) -> None:
    d = Journal(tmp_path).claim("j", 0, {})
    d.file("stdout.log").write_bytes(b"".join(b"line %06d\n" % i for i in range(10_000)))
    d.file("stderr.log").write_bytes(b"")
    sent: list[dict[str, Any]] = []
    limits = LogLimits(chunk_bytes=1000, max_bytes=5000, tail_bytes=2000)
    shipper = LogShipper(d, "n", sent.append, limits)
    shipper.ship()
    shipper.ship(final=True)
    out = [r for r in sent if r["stream"] == "STDOUT"]
    assert sum(len(r["data"]) for r in out) == 7000
    assert out[-1]["last"] and out[-1]["skipped"] == 120_000 - 7000
    assert out[-1]["data"].endswith(b"line 009999\n") and out[0]["data"].startswith(b"line 000000")
    assert [r["seq"] for r in out] == list(range(len(out)))
    assert shipper.done
    # a restarted shipper goes on from the journal: nothing more to send
    assert LogShipper(d, "n", sent.append, limits).ship(final=True) == 0


def wait_until(predicate: Any, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_the_twin_beside_executors_leaves_the_local_nodes_placements_alone() -> None:
    from agents.execution.demo import TwinBesideExecutors
    from infra.config import load_config

    seen: list[str] = []
    twin = TwinBesideExecutors(
        load_config(env={}), {"local-0"}, on_decision=lambda d: seen.append(d["job_id"])
    )
    local = {
        "job_id": "a",
        "outcome": "PLACED",
        "epoch": 0,
        "region": "us-east",
        "assignments": [{"node_id": "local-0", "gpu_indices": [0]}],
    }
    twin._HANDLERS["PlacementDecision"](twin, None, local)
    assert seen == ["a"] and "a" not in twin._runs
