"""Work a running job would lose if evicted now: since its last checkpoint, reported or
periodic, where a resumed job's periodic checkpoints count from the end of its restore (it
reloads its checkpoint before it computes, and the executor checkpoints every interval of
compute), so a victim just past its nominal checkpoint is not mistaken for a cheap one."""

from __future__ import annotations

from typing import Any

import pytest

from streams.replan.migrations import running_job
from streams.scheduler.tenancy import Running

BATCH = {"tenant": "batch-team", "priority_class": "batch", "checkpoint_interval_s": 600,
         "expected_duration_s": 3600.0}  # fmt: skip
SERVING = {"tenant": "serving", "priority_class": "online-inference", "kind": "INFERENCE",
           "expected_duration_s": 600.0}  # fmt: skip


def running(*, restore_s: float, interval_s: int, checkpoint_s: float = 0.0) -> Running:
    """Started at 0 (ms), last reported checkpoint at `checkpoint_s`."""
    return Running(
        job_id="j", tenant="t", region="eu", gpu_class="A", priority=0, class_name="batch",
        preemptible=True, protected=False, milli=2000, gpus=2, cpu_milli=0, memory_mib=0,
        started_ms=0, expected_end_ms=0.0, checkpoint_ms=int(checkpoint_s * 1000),
        checkpoint_interval_s=interval_s, restore_s=restore_s,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("restore_s", "interval_s", "checkpoint_s", "now_s", "unsaved_s"),
    [
        # a fresh start computes from 0: periodic checkpoints at 600, 1200...
        (0, 600, 0, 100, 100),  # 100 - 0
        (0, 600, 0, 700, 100),  # 700 - 600
        # resumed: reloading until 60, nothing computed yet, nothing to lose
        (60, 600, 0, 30, 0),
        (60, 600, 0, 100, 40),  # 100 - 60
        # its periodic checkpoints fall at 60 + 600 = 660, 1260...: at 630 it has computed
        # 570 s since its restore (counting from the start would say 630 - 600 = 30 s)
        (60, 600, 0, 630, 570),
        (60, 600, 0, 700, 40),  # 700 - 660
        (60, 600, 0, 1300, 40),  # 1300 - 1260
        # no declared interval: everything since the restore
        (60, 0, 0, 1000, 940),  # 1000 - 60
        # a reported checkpoint (an advisory's) later than the periodic one counts
        (60, 600, 690, 700, 10),  # 700 - 690
        (0, 0, 500, 800, 300),  # 800 - 500
    ],
)
def test_unsaved_work_counts_compute_since_the_last_checkpoint(
    restore_s: float, interval_s: int, checkpoint_s: float, now_s: float, unsaved_s: float
) -> None:
    run = running(restore_s=restore_s, interval_s=interval_s, checkpoint_s=checkpoint_s)
    assert run.unsaved_s(int(now_s * 1000)) == pytest.approx(unsaved_s)


def test_an_entry_written_before_restores_were_booked_reads_as_a_fresh_start() -> None:
    entry = running(restore_s=60, interval_s=600).to_entry()
    del entry["restore_s"]
    assert Running.from_entry(entry).restore_s == 0.0


def test_a_resumed_placement_books_its_restore_and_is_not_taken_for_a_cheap_victim(
    world: Any,
) -> None:
    w = world()  # one node of 8 GPUs
    w.submit("b1", gpu_count=4, **BATCH)
    w.advance(100)
    [pre, _] = w.submit("inf", gpu_count=8, **SERVING)  # needs every GPU: b1 goes
    assert pre.record["job_id"] == "b1" and w.s.tenancy.running["b1"].restore_s == 0.0
    w.report("b1", "EVICTED", progress=0.5)  # it kept half its work: it resumes
    w.advance(600)
    w.report("inf", "FINISHED")
    assert w.s.tenancy.running["b1"].restore_s == 60.0  # ReplanConfig's, the twin's too
    # the re-planner's view agrees: progress counts from the end of the restore
    booked = running_job("b1", w.s.reservations["b1"])
    assert booked is not None and booked.restore_s == 60.0 and booked.done_s > 0
    w.submit("b2", gpu_count=4, **BATCH)  # a fresh start beside it
    w.advance(630)
    # b1 resumed 630 s ago: 570 s computed since its restore (> 300 s: stale, 2280 GPU-s);
    # b2 started 630 s ago: checkpoint at 600, 30 s unsaved (120 GPU-s): b2 is cheaper
    [pre, _] = w.submit("inf2", gpu_count=4, **SERVING)
    assert pre.record["job_id"] == "b2" and pre.record["expected_lost_gpu_s"] == 120.0
    assert w.s.tenancy.running["b1"].unsaved_s(w.now) == 570.0
