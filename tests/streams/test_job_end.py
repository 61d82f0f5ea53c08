"""Retries and failures (issue 31): which ended epochs wait again, which retries they use, and
that a final one never runs again, live and after a restart."""

from __future__ import annotations

from typing import Any

import pytest

from streams.scheduler.job_end import end_kind, end_rule, is_over, split_kind


def _routed(retries: int, failures: int = 0) -> dict[str, Any]:
    return {"job": {"job_id": "j", "retries": retries}, "failures": failures}


# kind, cause, retries, failures so far -> requeued, retry counted, final state
RULES = [
    ("FAILED", "EXIT", 0, 0, False, False, "FAILED"),  # no retries: over
    ("FAILED", "EXIT", 2, 0, True, True, ""),  # 2 left: requeued, one used
    ("FAILED", "EXIT", 2, 1, True, True, ""),  # 1 left: the last re-run
    ("FAILED", "EXIT", 2, 2, False, False, "FAILED"),  # all used: over
    ("FAILED", "NODE_LOST", 0, 0, True, False, ""),  # the machine's fault: never counted
    ("FAILED", "NODE_LOST", 1, 1, True, False, ""),  # ... even with none left
    ("FAILED", "GPU_ERROR", 0, 0, True, False, ""),  # ECC, XID
    ("FAILED", "REFUSED", 0, 0, True, False, ""),  # the executor's double-booking guard
    ("FAILED", "LAUNCH_ERROR", 3, 0, False, False, "FAILED"),  # retrying cannot help
    ("FAILED", "NONE", 3, 0, False, False, "FAILED"),  # an executor that does not say
    ("EVICTED", "NONE", 0, 0, True, False, ""),  # preempted, moved, stale node
    ("TIMEOUT", "NONE", 3, 0, False, False, "TIMEOUT"),
    ("CANCELLED", "NONE", 3, 0, False, False, "CANCELLED"),
    ("FINISHED", "NONE", 3, 0, False, False, "FINISHED"),
]


@pytest.mark.parametrize(("kind", "cause", "retries", "failures", "requeue", "counted", "state"),
                         RULES)  # fmt: skip
def test_requeue_rules(
    kind: str, cause: str, retries: int, failures: int, requeue: bool, counted: bool, state: str
) -> None:
    rule = end_rule(kind, cause, _routed(retries, failures))
    assert (rule.requeue, rule.counted, rule.state) == (requeue, counted, state)


@pytest.mark.parametrize("kind", ["EVICTED", "FAILED"])
def test_a_cancelled_job_is_over_whatever_its_placement_reports(kind: str) -> None:
    rule = end_rule(kind, "NODE_LOST", _routed(3), cancelled=True)
    assert (rule.requeue, rule.state) == (False, "CANCELLED")
    assert end_rule("FINISHED", "NONE", _routed(3), cancelled=True).state == "FINISHED"


def test_the_ledger_keeps_a_failed_end_with_its_cause() -> None:
    assert end_kind({"type": "FAILED", "cause": "EXIT"}) == "FAILED:EXIT"
    assert end_kind({"type": "FAILED"}) == "FAILED"
    assert end_kind({"type": "EVICTED", "cause": "EXIT"}) == "EVICTED"
    assert split_kind("FAILED:GPU_ERROR") == ("FAILED", "GPU_ERROR")
    assert [is_over(k) for k in ("EVICTED", "FAILED:EXIT", "TIMEOUT", "CANCELLED")] == [
        False, True, True, True,
    ]  # fmt: skip


def _placed(w: Any, job_id: str) -> list[int]:
    return [int(d.get("epoch") or 0) for d in w.placed(job_id)]


def test_a_non_zero_exit_reruns_while_retries_remain(world: Any, overlaps: Any) -> None:
    w = world()
    w.submit("j", gpu_count=8, retries=1)
    w.report("j", "FAILED", cause="EXIT", exit_code=3, progress=0.4)
    assert _placed(w, "j") == [0, 1]  # placed again at once, on the freed GPUs
    assert w.s.reservations["j"]["routed"]["failures"] == 1
    assert w.s.reservations["j"]["routed"]["progress"] == 0.4  # its progress rides along
    w.report("j", "FAILED", cause="EXIT", exit_code=3)
    assert _placed(w, "j") == [0, 1]  # no retries left: over
    assert w.s.reservations["j"]["ended"] == "FAILED"
    assert w.s.state.free_gpus("eu") == {"A100-80": 8}
    assert overlaps(w) == []


@pytest.mark.parametrize("cause", ["NODE_LOST", "GPU_ERROR", "REFUSED"])
def test_a_machine_fault_requeues_without_using_a_retry(world: Any, cause: str) -> None:
    w = world()
    w.submit("j", gpu_count=8, retries=0)
    w.report("j", "FAILED", cause=cause, progress=0.5)
    assert _placed(w, "j") == [0, 1]
    assert w.s.reservations["j"]["routed"]["failures"] == 0


@pytest.mark.parametrize(("kind", "cause"), [("FAILED", "LAUNCH_ERROR"), ("TIMEOUT", "NONE"),
                                             ("CANCELLED", "NONE")])  # fmt: skip
def test_final_ends_free_the_gpus_and_never_run_again(world: Any, kind: str, cause: str) -> None:
    w = world()
    w.submit("j", gpu_count=8, retries=5)
    w.submit("k", gpu_count=8)  # waits for j's GPUs
    w.report("j", kind, cause=cause)
    assert _placed(w, "j") == [0] and _placed(w, "k") == [0]
    assert w.s.reservations["j"]["ended"] == kind
    assert w.submit("j", gpu_count=8, retries=5) == []  # a replayed submission: decided
    r = w.restarted()
    assert "j" not in r.s.queue and r.s.state.reservation("j") is None
    assert r.submit("j", gpu_count=8) == []


def test_a_failure_logged_but_not_handled_is_requeued_by_the_rebuild(
    world: Any, overlaps: Any
) -> None:
    w = world()
    w.submit("j", gpu_count=8, retries=1)
    # the executor's FAILED reached the log; the worker died before handling it
    w.events.append({"job_id": "j", "type": "FAILED", "cause": "EXIT", "region": "eu",
                     "ts": w.now, "epoch": 0})  # fmt: skip
    r = w.restarted()
    assert r.s.queue["j"]["epoch"] == 1 and r.s.queue["j"]["failures"] == 1
    r.tick(1)
    assert _placed(r, "j") == [0, 1]
    r.report("j", "FAILED", cause="EXIT")  # the retry fails too: over, after another restart
    r2 = r.restarted()
    assert "j" not in r2.s.queue and r2.s.state.reservation("j") is None
    r2.tick(1)
    assert _placed(r2, "j") == [0, 1]
    assert overlaps(r2) == []
