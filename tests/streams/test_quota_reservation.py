"""Quota reservations as the scheduler applies them: a tenant's oldest job its quota refuses is
not overtaken by later jobs of the same tenant that would delay it; those that end in time
start; other tenants are unaffected.

One node of 8 A100s. S (online-inference, nominal 4, never borrows) runs s0 (1 GPU, short)
and s1, s2 (1 GPU, long); B (batch, nominal 4) runs five 1-GPU jobs (borrowing 1): full.
S's 2-GPU job `big` waits on quota (3 + 2 > 4) until s0 ends (then 2 + 2 = 4): its quota is
reserved from s0's end. A later 1-GPU long job of S would still run then (2 + 1 + 2 > 4).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from rich.console import Console

from gpuflow.commands.queue import render_queue
from scorer.tenancy import PreemptionPolicy
from streams.web.queue_view import queue_snapshot

TENANTS = {
    "S": {"cohort": "c", "quotas": [{"nominal": 4}]},
    "B": {"cohort": "c", "quotas": [{"nominal": 4}]},
}
SHORT_S, LONG_S = 1000.0, 20_000.0  # reference seconds (the A100 runs them faster)


def serving(duration: float) -> dict[str, Any]:
    return {"tenant": "S", "priority_class": "online-inference", "expected_duration_s": duration}


def batch() -> dict[str, Any]:
    return {"tenant": "B", "priority_class": "batch", "expected_duration_s": LONG_S,
            "checkpoint_interval_s": 600}  # fmt: skip


def placed(out: list[Any]) -> list[str]:
    return [m.record["job_id"] for m in out if m.record.get("outcome") == "PLACED"]


def busy(world: Any, *, quota_reservation: bool = True) -> Any:
    """The full node above, `big` and `late` (1 GPU, long) of S waiting, then two of B's jobs
    end: 2 GPUs free, and a retry pass runs."""
    policy = {"tenants": TENANTS, "preemption": {"enabled": False},
              "backfill": {"quota_reservation": quota_reservation}}  # fmt: skip
    w = world(policy=policy)
    for job_id, duration in (("s0", SHORT_S), ("s1", LONG_S), ("s2", LONG_S)):
        [d] = w.submit(job_id, **serving(duration))
        assert d.record["outcome"] == "PLACED"
    for i in range(5):
        [d] = w.submit(f"b{i}", **batch())
        assert d.record["outcome"] == "PLACED"
    w.advance(1)
    [d] = w.submit("big", gpu_count=2, **serving(LONG_S))
    assert d.record["wait_reason"] == "QUOTA"  # 3 + 2 > 4
    w.advance(1)
    [d] = w.submit("late", **serving(LONG_S))
    assert d.record["wait_reason"] == "CAPACITY"  # 3 + 1 <= 4, but no GPU free
    w.advance(10)
    w.report("b0", "FINISHED")
    w.report("b1", "FINISHED")
    return w


def test_a_later_job_that_would_delay_the_oldest_waits(world: Any) -> None:
    w = busy(world)
    s0_end = w.s.tenancy.running["s0"].expected_end_ms
    [res] = w.s.tenancy.quota_reservations["eu"].values()
    assert (res.job_id, res.tenant, res.start_ms, res.need, res.cap) == (
        "big", "S", s0_end, 2000, 4000,
    )  # fmt: skip
    assert "late" in w.s.queue and "late" not in w.s.tenancy.running
    assert w.s.tenancy.waits["late"][0] == "QUOTA_RESERVATION"
    assert "would delay big" in w.s.tenancy.waits["late"][1]
    assert w.s.tenancy.waits["big"][0] == "QUOTA"
    assert "its quota is reserved in" in w.s.tenancy.waits["big"][1]
    # an arriving job of S placed outside the pass respects it too
    [d] = w.submit("late2", **serving(LONG_S))
    assert d.record["outcome"] == "QUEUED" and d.record["wait_reason"] == "QUOTA_RESERVATION"


def test_a_later_job_that_ends_before_the_reservation_starts(world: Any) -> None:
    w = busy(world)
    [d] = w.submit("quick", **serving(SHORT_S / 10))  # ends long before s0
    assert d.record["outcome"] == "PLACED"
    run = w.s.tenancy.running["quick"]
    assert run.expected_end_ms <= w.s.tenancy.quota_reservations["eu"]["S"].start_ms


def test_other_tenants_are_unaffected(world: Any) -> None:
    w = busy(world)
    [d] = w.submit("bx", **batch())  # B at 3 of 4, a GPU free: S's reservation is not B's
    assert d.record["outcome"] == "PLACED"


def test_the_reserved_job_starts_when_its_quota_frees(world: Any) -> None:
    w = busy(world)
    w.now = int(w.s.tenancy.running["s0"].expected_end_ms)
    out = w.report("s0", "FINISHED")
    assert placed(out)[0] == "big"  # S: 2 + 2 = 4, before `late` (which would make it 5)
    assert w.s.tenancy.waits["late"][0] == "QUOTA"


def test_without_the_knob_the_later_job_overtakes(world: Any) -> None:
    """BestEffortFIFO: `late` takes the quota `big` waits for."""
    w = busy(world, quota_reservation=False)
    assert "late" in w.s.tenancy.running and w.s.tenancy.quota_reservations.get("eu") is None
    w.now = int(w.s.tenancy.running["s0"].expected_end_ms)
    out = w.report("s0", "FINISHED")
    assert "big" not in placed(out)  # S: 3 (s1, s2, late) + 2 > 4


@pytest.mark.parametrize("quick", [True, False])
def test_a_preemptor_respects_it_too(world: Any, quick: bool) -> None:
    """With preemption, `late` (within nominal) could reclaim a borrowed GPU of B and take
    the quota `big` waits for; it waits instead, and spends none of the tick's searches (one
    here): `quick`, a later job of S that ends in time, reclaims."""
    w = busy(world)
    for job_id in ("bx", "by"):  # B borrows again: 5 of 4, the node full
        [d] = w.submit(job_id, **batch())
        assert d.record["outcome"] == "PLACED"
    if quick:
        [d] = w.submit("quick", **serving(SHORT_S / 10))
        assert d.record["wait_reason"] == "CAPACITY"
    policy = w.s.tenancy.policy  # preemption on, as a reload would
    w.s.tenancy.policy = dataclasses.replace(
        policy, preemption=PreemptionPolicy(searches_per_tick=1)
    )
    w.tick(30)
    pre = w.preemptions()
    assert [p["for_job_id"] for p in pre] == (["quick"] if quick else [])
    assert "late" not in w.s.tenancy.running and not w.s.queue["late"].get("preempting")
    assert w.s.tenancy.waits["late"][0] == "QUOTA_RESERVATION"  # not a gang reservation


def test_a_tenant_preempts_its_own_lower_priority_job_for_quota(world: Any) -> None:
    """Kueue's withinClusterQueue: LowerPriority. A (nominal 4, in no cohort) runs four batch
    jobs; its urgent-training job is refused by quota (4 + 1 > 4) with 4 GPUs free, and
    evicts one of A's own batch jobs to get the quota back."""
    w = world(policy={"tenants": {"A": {"quotas": [{"nominal": 4}]}}})
    for i in range(4):
        w.submit(f"a{i}", **{**batch(), "tenant": "A"})
    out = w.submit("urgent", **{**batch(), "tenant": "A", "priority_class": "urgent-training"})
    [pre] = [m.record for m in out if m.topic.endswith("preemption")]
    assert pre["victim_tenant"] == "A" and pre["cause"] == "PRIORITY"
    out = w.report(pre["job_id"], "EVICTED")
    assert "urgent" in placed(out)


def test_gpuflow_queue_shows_the_reservation_and_why_the_later_job_waits(world: Any) -> None:
    w = busy(world)
    eu = json.loads(json.dumps(queue_snapshot(w.s)))["regions"]["eu"]  # as the worker serves it
    [q] = eu["quota_reservations"]
    assert (q["tenant"], q["job_id"], q["gpu_class"], q["gpus"]) == ("S", "big", "A100-80", 2.0)
    waiting = {j["job_id"]: j for j in eu["waiting"]}
    assert waiting["late"]["reason_code"] == "QUOTA_RESERVATION"
    console = Console(width=240, record=True, color_system=None)
    for part in render_queue({"regions": {"eu": eu}, "quotas": True}):
        console.print(part)
    text = console.export_text()
    assert "S's A100-80 quota reserved for big (2 GPUs) in ~" in text
    assert "QUOTA_RESERVATION: quota reservation: would delay big" in text


def full_with_big_waiting(world: Any, *, speed_order: bool = False) -> Any:
    """No preemption; S runs 2 (nominal 4), B runs 6 (borrowing 2): full. S's 2-GPU `big`
    (2 + 2 <= 4) then waits for GPUs, not quota."""
    w = world(policy={"tenants": TENANTS, "preemption": {"enabled": False}})
    if speed_order:
        w.s.tenancy.within_order = w.s._speed_order
    for job_id in ("s0", "s1"):
        w.submit(job_id, **serving(LONG_S))
    for i in range(6):
        w.submit(f"b{i}", **batch())
    w.advance(1)
    [d] = w.submit("big", gpu_count=2, **serving(LONG_S))
    assert d.record["wait_reason"] == "CAPACITY"
    return w


def test_a_head_job_within_quota_waiting_for_gpus_keeps_its_quota(world: Any) -> None:
    """S (nominal 4) runs 2; B runs 6 (borrowing 2): full. S's `big` (2 GPUs: 2 + 2 <= 4) waits
    for GPUs, not quota; one of B's jobs ends. The pass reserves big's quota from now: a later
    1-GPU long job of S (2 + 1 + 2 > 4) would leave big over quota once GPUs free, and waits."""
    w = full_with_big_waiting(world)
    w.advance(10)
    w.report("b0", "FINISHED")  # 1 GPU free: not enough for big
    res = w.s.tenancy.quota_reservations["eu"]["S"]
    assert (res.job_id, res.start_ms) == ("big", w.now)
    [d] = w.submit("late", **serving(LONG_S))
    assert d.record["outcome"] == "QUEUED" and d.record["wait_reason"] == "QUOTA_RESERVATION"
    [d] = w.submit("quick", **serving(10.0))  # 2 + 1 + 2 > 4 too, and it ends after now
    assert d.record["wait_reason"] == "QUOTA_RESERVATION"


def test_the_oldest_job_holds_the_reservation_whatever_the_within_tenant_order(
    world: Any,
) -> None:
    """The speed-aware order ranks a job the free GPUs cannot hold last: with 1 GPU free,
    S's 1-GPU `late` comes before its older 2-GPU `big`. Were the reservation the first job
    that cannot start in that order, `late` would start (2 + 1 <= 4) and leave `big` over
    quota (3 + 2 > 4) once GPUs free; the oldest job of S holds it instead."""
    w = full_with_big_waiting(world, speed_order=True)
    w.advance(1)
    [d] = w.submit("late", **serving(LONG_S))
    assert d.record["wait_reason"] == "CAPACITY"
    w.advance(10)
    order = [r["job"]["job_id"] for r in w.s._speed_order(list(w.s.queue.values()))]
    assert order == ["big", "late"]  # nothing free: both ranked last, oldest first
    w.report("b0", "FINISHED")  # 1 GPU free: late fits it, big does not
    assert "late" not in w.s.tenancy.running
    assert w.s.tenancy.waits["late"][0] == "QUOTA_RESERVATION"
    assert w.s.tenancy.quota_reservations["eu"]["S"].job_id == "big"
