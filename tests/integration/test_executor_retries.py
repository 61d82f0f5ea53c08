"""Retries end to end (issue 31): a job whose command exits non-zero runs again while its
`--retries` last, each run a new epoch on a real process, and never once more; a launch error
is never retried whatever the count. The rules themselves are in streams/job_end.py (unit-tested
in tests/streams/test_job_end.py); this checks the worker and the node executor carry them out.

Each run of the command appends a line to a file, so the test counts the runs the processes
made, not the events the executor says it made."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from executor_nodes import (
    ExecutorNode,
    ended,
    events_of,
    events_reader,
    executor_stack,
    submit,
    wait_event,
)
from harness import Running, wait_for

from infra.config import Config

pytestmark = pytest.mark.integration
PY = sys.executable

# appends one line per run; exits 0 from the run numbered `ok_on` (1-based) on, else 4
COUNTING = (
    "import sys; p = sys.argv[1]; ok_on = int(sys.argv[2]); "
    "f = open(p, 'a'); f.write('run\\n'); f.close(); "
    "n = sum(1 for _ in open(p)); print('run', n, file=sys.stderr); "
    "sys.exit(0 if n >= ok_on else 4)"
)


@pytest.fixture
def stack(config: Config, tmp_path: Path) -> Iterator[tuple[Running, list[ExecutorNode]]]:
    with executor_stack(config, tmp_path, "retry") as started:
        yield started


def _runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _state(run: Running, job_id: str) -> str:
    url = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}/jobs/"
    try:
        job = httpx.get(url, params={"job": job_id}, timeout=5).json().get("job")
    except (httpx.HTTPError, ValueError):
        return ""
    return str((job or {}).get("state") or "")


def test_a_failing_command_runs_again_while_its_retries_last_and_never_once_more(
    stack: tuple[Running, list[ExecutorNode]], tmp_path: Path
) -> None:
    run, _ = stack
    events = events_reader(run.config)
    healed, spent = tmp_path / "healed.runs", tmp_path / "spent.runs"
    # fails twice, succeeds on the third run: retries=2 is just enough
    ok = submit(run.config, command=[PY, "-c", COUNTING, str(healed), "3"], retries=2)
    # always fails: retries=1 gives two runs, then FAILED for good
    bad = submit(run.config, command=[PY, "-c", COUNTING, str(spent), "99"], retries=1)
    # a launch error is the job's own fault and no run at all: never retried
    missing = submit(run.config, command=["no-such-command-gpuflow"], retries=3)

    done = wait_event(events, ok, "FINISHED", 120)
    assert done["exit_code"] == 0
    ends = ended(events, ok)
    assert [e["type"] for e in ends] == ["FAILED", "FAILED", "FINISHED"], ends
    assert all(e["cause"] == "EXIT" and e["exit_code"] == 4 for e in ends[:2]), ends
    assert len({e["epoch"] for e in ends}) == 3, "each run is its own epoch"
    assert "run 2" in ends[1]["stderr_tail"], ends[1]
    assert _runs(healed) == 3

    wait_event(events, bad, "FAILED", 120)
    assert wait_for(lambda: len(ended(events, bad)) >= 2, 60), ended(events, bad)
    launch = wait_event(events, missing, "FAILED", 60)
    assert launch["cause"] == "LAUNCH_ERROR", launch
    assert wait_for(lambda: _state(run, bad) == "FAILED", 30), _state(run, bad)
    assert wait_for(lambda: _state(run, missing) == "FAILED", 30), _state(run, missing)

    time.sleep(3)  # a wrongly granted third run of `bad` (or second of `missing`) would start
    assert [e["type"] for e in ended(events, bad)] == ["FAILED", "FAILED"]
    assert _runs(spent) == 2
    starts = [e for e in events_of(events, missing) if e["type"] == "STARTED"]
    assert len(ended(events, missing)) == 1 and len(starts) <= 1, events_of(events, missing)
    assert _state(run, ok) == "FINISHED"
    events.close()
