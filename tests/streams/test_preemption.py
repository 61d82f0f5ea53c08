"""Preemption as the scheduler commits it: decisions, holds, placement after the evictions,
requeue at the next epoch, grace periods, replays, and restarts between preemption and placement.

Every check that matters is made from the decision and job-event logs alone (`overlaps`).
"""

from __future__ import annotations

import copy
from typing import Any

from scorer.tenancy import parse_policy

BATCH = {"tenant": "batch-team", "priority_class": "batch", "checkpoint_interval_s": 600,
         "expected_duration_s": 3600.0}  # fmt: skip
SERVING = {"tenant": "serving", "priority_class": "online-inference", "kind": "INFERENCE",
           "expected_duration_s": 600.0}  # fmt: skip


def kinds(out: list[Any]) -> list[tuple[str, str, str]]:
    return [
        (m.topic.rsplit(".", 1)[-1], m.record["job_id"], m.record.get("outcome", "")) for m in out
    ]


def test_preempt_evict_place_requeue_and_replace(world: Any, overlaps: Any) -> None:
    w = world()
    w.submit("b1", gpu_count=4, **BATCH)
    w.submit("b2", gpu_count=4, **BATCH)
    w.advance(100)
    out = w.submit("inf", gpu_count=4, **SERVING)
    # b1 and b2 each lose 4 GPUs x 100 s unsaved = 400 GPU-s; tie -> job id: b1
    assert kinds(out) == [("preemption", "b1", ""), ("placement", "inf", "QUEUED")]
    decision = out[0].record
    assert decision["for_job_id"] == "inf" and decision["cause"] == "PRIORITY"
    assert decision["victim_epoch"] == 0 and decision["victim_tenant"] == "batch-team"
    assert decision["expected_lost_gpu_s"] == 400.0 and not decision["checkpoint_first"]
    assert out[1].record["wait_reason"] == "PREEMPTING"
    assert w.s.state.free_gpus("eu") == {}
    assert w.submit("inf", gpu_count=4, **SERVING) == []  # a replayed submission: nothing new

    w.advance(5)
    out = w.report("b1", "EVICTED", progress=0.0)
    assert kinds(out) == [("placement", "b1", "QUEUED"), ("placement", "inf", "PLACED")]
    requeued, placed = out[0].record, out[1].record
    assert requeued["epoch"] == 1 and "evicted at epoch 0" in requeued["reasons"][0]
    b1_gpus = w.decisions()[0]["assignments"]
    assert placed["assignments"] == b1_gpus and placed["reasons"] == ["placed after preempting b1"]
    assert w.report("b1", "EVICTED") == []  # replayed report of the old epoch: nothing

    w.advance(600)
    out = w.report("inf", "FINISHED")
    [again] = [m.record for m in out if m.record.get("outcome") == "PLACED"]
    assert (again["job_id"], again["epoch"]) == ("b1", 1)
    first = w.placed("b1")[0]
    assert first["event_id"] != again["event_id"]  # idempotence key is job id + epoch
    assert overlaps(w) == []


def test_a_stale_checkpoint_is_written_first_and_the_grace_period_bounds_the_wait(
    world: Any,
) -> None:
    w = world()
    w.submit("b1", gpu_count=8, **BATCH)
    w.advance(400)  # 400 s since its start (its last checkpoint) > 300 s: stale
    [pre, _] = w.submit("inf", gpu_count=2, **SERVING)
    assert pre.record["checkpoint_first"] and pre.record["grace_period_s"] == 60.0
    assert pre.record["deadline_ts"] == w.now + 60_000
    assert w.tick(30) == []  # within the grace period: still waiting
    out = w.tick(31)  # past the deadline: b1's GPUs count as free
    assert kinds(out) == [("placement", "b1", "QUEUED"), ("placement", "inf", "PLACED")]
    assert "grace period over" in out[0].record["reasons"][0]
    # the executor's late report of the old placement changes nothing
    late = {"job_id": "b1", "type": "EVICTED", "region": "eu", "ts": w.now, "epoch": 0}
    assert w.s.on_job_event(late) == []
    assert w.s.queue["b1"]["epoch"] == 1


def test_freed_gpus_are_held_for_the_preemptor(world: Any, overlaps: Any) -> None:
    w = world()
    w.submit("b1", gpu_count=4, **BATCH)
    w.submit("b2", gpu_count=4, **BATCH)
    [queued] = w.submit("small", gpu_count=1, **BATCH)  # waits: the node is full
    assert queued.record["outcome"] == "QUEUED"
    w.advance(10)
    out = w.submit("inf", gpu_count=8, **SERVING)
    assert sorted(d.record["job_id"] for d in out[:2]) == ["b1", "b2"]
    out = w.report("b1", "EVICTED")
    # b1's 4 GPUs are held for inf: neither "small" nor b1 itself takes them
    assert kinds(out) == [("placement", "b1", "QUEUED")]
    assert w.s.state.free_gpus("eu") == {}
    out = w.report("b2", "EVICTED")
    assert ("placement", "inf", "PLACED") in kinds(out)
    assert {"small", "b1", "b2"} <= set(w.s.queue)
    assert overlaps(w) == []


def test_never_for_equal_or_lower_priority_nor_a_non_preemptible_job(world: Any) -> None:
    w = world()
    w.submit("b1", gpu_count=8, **BATCH)
    [queued] = w.submit("b2", gpu_count=8, **BATCH)  # equal priority: waits
    assert queued.record["outcome"] == "QUEUED" and w.preemptions() == []
    w2 = world()
    w2.submit("s1", gpu_count=8, **SERVING)  # online-inference: not preemptible
    [queued] = w2.submit("s2", gpu_count=8, **{**SERVING, "priority_class": "batch"})
    assert queued.record["outcome"] == "QUEUED" and w2.preemptions() == []
    w3 = world()
    w3.submit("p", gpu_count=8, **{**BATCH, "preemptible": False})  # asked for protection
    w3.submit("u", gpu_count=8, **{**BATCH, "priority_class": "urgent-training"})
    assert w3.preemptions() == []


def preempting(world: Any) -> Any:
    """b1 and b2 fill the node; 100 s later inf preempts b1 (nothing reported yet)."""
    w = world()
    w.submit("b1", gpu_count=4, **BATCH)
    w.submit("b2", gpu_count=4, **BATCH)
    w.advance(100)
    w.submit("inf", gpu_count=4, **SERVING)
    return w


def test_restart_between_preemption_and_placement_loses_neither_job(
    world: Any, overlaps: Any
) -> None:
    w = preempting(world)
    # SIGKILL right after the preemption: a new worker rebuilds from tables and logs
    r = w.restarted()
    assert r.s.queue["inf"]["preempting"]["victims"] == {"b1": 0}
    assert r.s.state.free_gpus("eu") == {}  # b1 still holds its GPUs, b2 too
    out = r.report("b1", "EVICTED")
    assert ("placement", "inf", "PLACED") in kinds(out)
    assert r.s.queue["b1"]["epoch"] == 1
    assert overlaps(r) == []


def test_restart_after_the_eviction_was_reported_but_not_handled(world: Any, overlaps: Any) -> None:
    w = preempting(world)
    # the executor's EVICTED reached the log; the worker died before handling it
    w.events.append({"job_id": "b1", "type": "EVICTED", "region": "eu", "ts": w.now, "epoch": 0,
                     "progress": 0.0})  # fmt: skip
    r = w.restarted()
    assert r.s.queue["b1"]["epoch"] == 1  # requeued from the record its entry kept
    assert r.s.queue["inf"]["preempting"]["gone"] == ["b1"]
    out = r.tick(1)  # the next tick places the preemptor
    assert ("placement", "inf", "PLACED") in kinds(out)
    assert r.report("b1", "EVICTED") == []  # the redelivered report: already handled
    assert overlaps(r) == []


def test_restart_after_the_placement_was_logged_but_the_tables_were_not(
    world: Any, overlaps: Any
) -> None:
    w = preempting(world)
    before = (copy.deepcopy(dict(w.s.reservations)), copy.deepcopy(dict(w.s.queue)))
    w.report("b1", "EVICTED")  # logs b1's requeue and inf's PLACED ...
    w.s.reservations.clear()  # ... but the table writes of that step were lost
    w.s.reservations.update(before[0])
    w.s.queue.clear()
    w.s.queue.update(before[1])
    r = w.restarted()
    assert r.s.state.reservation("inf") is not None  # restored from the decision log
    assert "inf" not in r.s.queue  # decided: its pending entry is dropped, nothing held for it
    assert r.s.queue["b1"]["epoch"] == 1
    assert r.s.state.free_gpus("eu") == {}  # inf holds b1's 4 (from the log), b2 its 4
    assert overlaps(r) == []
    assert r.submit("inf", gpu_count=4, **SERVING) == []


def test_unknown_priority_class_is_rejected_with_the_field(world: Any) -> None:
    w = world()
    [d] = w.submit("x", priority_class="vip")
    assert d.record["outcome"] == "REJECTED"
    assert "priority_class: unknown class 'vip'" in d.record["reasons"][0]


def test_jobs_no_eviction_can_bring_within_quota_do_not_use_up_the_sweep(world: Any) -> None:
    """The timer lets `searches_per_tick` (4) waiting jobs per region look for victims. One
    node of 8 GPUs; S (nominal 4) runs 3 online-inference GPUs, B (nominal 4) runs five 1-GPU
    batch jobs (borrowing 1): full. S queues four 2-GPU online-inference jobs (3 + 2 > 4, and
    non-preemptible work runs within nominal: no eviction of B's jobs changes S's own usage)
    and then x, 1 GPU (3 + 1 <= 4: it may reclaim B's borrowed GPU). Preemption is switched on
    by a policy reload; on the next tick the four hopeless jobs used to take the four searches
    before x. Now they are passed over and x reclaims one of B's jobs."""
    cohort = {"S": {"cohort": "c", "quotas": [{"nominal": 4}]},
              "B": {"cohort": "c", "quotas": [{"nominal": 4}]}}  # fmt: skip
    w = world(policy={"tenants": cohort, "preemption": {"enabled": False}})
    serving = {"tenant": "S", "priority_class": "online-inference", "expected_duration_s": 3600.0}
    batch = {"tenant": "B", "priority_class": "batch", "expected_duration_s": 3600.0,
             "checkpoint_interval_s": 600}  # fmt: skip
    for i in range(3):
        w.submit(f"s{i}", **serving)
    for i in range(5):
        w.submit(f"b{i}", **batch)
    for i in range(4):
        w.advance(1)
        [d] = w.submit(f"big{i}", gpu_count=2, **serving)
        assert d.record["wait_reason"] == "QUOTA"
    w.advance(1)
    [d] = w.submit("x", **serving)
    assert d.record["wait_reason"] == "CAPACITY"
    w.s.tenancy.policy = parse_policy({"tenants": cohort})  # reloaded: preemption on
    w.tick(30)
    [pre] = w.preemptions()
    assert pre["for_job_id"] == "x" and pre["cause"] == "RECLAIM" and pre["victim_tenant"] == "B"


def test_victims_on_nodes_the_job_cannot_use_are_not_tried(world: Any, make_node: Any) -> None:
    # inf may run on A100-80 only. 70 one-GPU T4 nodes each hold a batch job started later than
    # b0, so each loses less work (10 s) than b0 (110 s) and would be tried first; evicting one
    # frees a T4, which inf cannot use. The search has 64 placement checks: spent on the T4s,
    # none is left for b0. Counted on usable nodes only, b0 is the first and only candidate.
    t4s = [make_node(f"t{i:02}", gpus=1, model="T4", gpu_memory_mib=16384) for i in range(70)]
    w = world(make_node("a", gpus=4), *t4s)
    w.submit("b0", gpu_count=4, allowed_gpu_models=["A100-80"], **BATCH)
    w.advance(100)
    for i in range(70):
        w.submit(f"t{i:02}", allowed_gpu_models=["T4"], **BATCH)
    w.advance(10)
    out = w.submit("inf", gpu_count=4, allowed_gpu_models=["A100-80"], **SERVING)
    assert kinds(out) == [("preemption", "b0", ""), ("placement", "inf", "QUEUED")]
