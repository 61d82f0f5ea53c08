"""`gpuflow up --execute` as a newcomer runs it: the example starts on a local executor node,
is preempted by the online-inference job, resumes from its checkpoint on the other node and
finishes; its two epochs' output is on the nodes. Real processes on the embedded broker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_up_execute_tells_the_examples_story_start_preempt_resume_finish(tmp_path: Path) -> None:
    env = {**os.environ, "GPUFLOW_WORKER_WEB_PORT": "0", "COLUMNS": "200"}
    argv = ["up", "--execute", "--duration", "80", "--nodes", "40", "--rate", "1",
            "--data-dir", str(tmp_path / "data")]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "gpuflow", *argv],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-2000:]
    story = [line for line in out.splitlines() if line.startswith("example: ")]
    wanted = [r"STARTED epoch 0 on local-\d", r"EVICTED epoch 0 on local-\d kept \d+%",
              r"STARTED epoch 1 on local-\d", r"FINISHED epoch 1 on local-\d exit 0"]  # fmt: skip
    at = 0
    for pattern in wanted:  # in this order, other lines between
        at = next((i for i, line in enumerate(story[at:], at) if re.search(pattern, line)), -1)
        assert at >= 0, (pattern, story, out[-3000:])
    [tag] = set(re.findall(r"example-([0-9a-f]{4})", out))
    logs = {int(p.parent.name): p.read_text() for p in (tmp_path / "data" / "local").glob(
        f"local-*/example-{tag}/*/stdout.log")}  # fmt: skip
    assert sorted(logs) == [0, 1], logs
    resumed = re.match(r"epoch 1: resuming at step (\d+)", logs[1])
    assert resumed and int(resumed.group(1)) > 0, logs[1][:300]  # from its checkpoint
    steps = [int(s) for s in re.findall(r"^step (\d+) ", logs[1], flags=re.M)]
    assert steps == list(range(int(resumed.group(1)) + 1, 41)), steps  # each once, to the end
