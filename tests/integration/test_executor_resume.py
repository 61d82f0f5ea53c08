"""The executor's hard cases on the real broker and worker, with real processes (issue 31): a
counting job preempted by a higher-priority job resumes from its checkpoint on the other node
and completes every step exactly once; an executor SIGKILLed mid-job and restarted runs
nothing twice and still reports each end."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

import pytest
from executor_nodes import (
    ExecutorNode,
    ended,
    events_of,
    events_reader,
    submit,
    wait_event,
    wait_for_nodes,
)
from harness import run_stack

from infra.config import Config

pytestmark = pytest.mark.integration
PY = sys.executable
EXAMPLE = str(Path(__file__).parents[2] / "examples" / "train_counting.py")
STEPS = 30


def test_a_preempted_counting_job_resumes_elsewhere_and_counts_each_step_once(
    config: Config, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(json.dumps({"preemption": {"checkpoint_stale_s": 0, "grace_period_s": 10}}))
    steps = tmp_path / "steps.txt"
    with run_stack(config, executor=False, policy_file=str(policy)) as run:
        nodes = [
            ExecutorNode(run.config, f"one-{i}-{uuid.uuid4().hex[:4]}", tmp_path, gpus=1).start()
            for i in range(2)
        ]
        events = events_reader(run.config)
        try:
            wait_for_nodes(run, nodes)
            counting = submit(
                run.config,
                tenant="research",
                priority_class="batch",
                kind="TRAINING",
                command=[
                    PY,
                    EXAMPLE,
                    "--steps",
                    str(STEPS),
                    "--step-s",
                    "0.15",
                    "--every",
                    "4",
                    "--steps-file",
                    str(steps),
                ],
            )
            first = wait_event(events, counting, "STARTED", 60)
            wait_event(events, counting, "CHECKPOINTED", 30)
            filler = submit(
                run.config,
                tenant="research",
                priority_class="urgent-training",
                # not a victim: the cheapest victim is the one with the least unsaved work, and
                # a filler that has just started had less than the counting job at times
                preemptible=False,
                command=[PY, "-c", "import time; time.sleep(3)"],
            )
            wait_event(events, filler, "STARTED", 30)
            urgent = submit(
                run.config,
                tenant="serving",
                priority_class="online-inference",
                kind="INFERENCE",
                command=[PY, "-c", "import time; time.sleep(30)"],
            )
            evicted = wait_event(events, counting, "EVICTED", 60, epoch=0)
            assert 0 < evicted["progress"] < 1, evicted
            wait_event(events, urgent, "STARTED", 30)
            done = wait_event(events, counting, "FINISHED", 90)
            assert done["epoch"] >= 1 and done["node_ids"] != first["node_ids"], (first, done)
            counted = [int(x) for x in steps.read_text().split()]
            assert counted == list(range(1, STEPS + 1)), counted
            starts = [e for e in events_of(events, counting) if e["type"] == "STARTED"]
            assert {e["epoch"] for e in starts} == {0, done["epoch"]}
        finally:
            for node in nodes:
                node.stop()
            events.close()


def test_an_executor_killed_and_restarted_runs_nothing_twice_and_reports_every_end(
    config: Config, tmp_path: Path
) -> None:
    ran = tmp_path / "ran.txt"
    with run_stack(config, executor=False) as run:
        node = ExecutorNode(run.config, f"crash-{uuid.uuid4().hex[:4]}", tmp_path).start()
        events = events_reader(run.config)
        try:
            wait_for_nodes(run, [node])

            def job(seconds: float) -> str:
                code = (
                    f"import os,time; open({str(ran)!r},'a').write(os.environ['GPUFLOW_JOB_ID']"
                    f"+chr(10)); time.sleep({seconds})"
                )
                return submit(run.config, command=[PY, "-c", code])

            short, long = job(1.0), job(5.0)
            for j in (short, long):
                wait_event(events, j, "STARTED", 60)
            node.kill()  # the jobs run on; `short` ends while no executor watches it
            time.sleep(2.0)
            node.start()
            for j in (short, long):
                assert wait_event(events, j, "FINISHED", 30)["exit_code"] == 0
            time.sleep(1.0)  # a duplicate start or end would be reported by now
            for j in (short, long):
                kinds = sorted(e["type"] for e in events_of(events, j))
                assert kinds == ["FINISHED", "STARTED"], (j, kinds, node.log_tail())
                assert [e["type"] for e in ended(events, j)] == ["FINISHED"]
            assert sorted(ran.read_text().split()) == sorted([short, long])
        finally:
            node.stop()
            events.close()
