"""Quotas, reclaim, fair order and backfill as the scheduler applies them."""

from __future__ import annotations

from typing import Any

COHORT = {
    "tenants": {
        "A": {"cohort": "c", "quotas": [{"nominal": 4}]},
        "B": {"cohort": "c", "quotas": [{"nominal": 4}]},
    }
}


def job(tenant: str, **kw: Any) -> dict[str, Any]:
    return {"tenant": tenant, "priority_class": "batch", "expected_duration_s": 3600.0,
            "checkpoint_interval_s": 600, **kw}  # fmt: skip


def test_borrowed_quota_is_reclaimed_by_a_tenant_back_under_nominal(
    world: Any, overlaps: Any
) -> None:
    w = world(policy=COHORT)
    for i in range(8):  # A: 4 within nominal, 4 more on B's idle quota
        [d] = w.submit(f"a{i}", **job("A"))
        assert d.record["outcome"] == "PLACED"
    w.advance(60)
    evicted = []
    for i in range(4):  # B is under nominal: it takes back what it lent, at equal priority
        out = w.submit(f"b{i}", **job("B"))
        [pre] = [m.record for m in out if m.topic.endswith("preemption")]
        assert pre["cause"] == "RECLAIM" and pre["victim_tenant"] == "A"
        evicted.append(pre["job_id"])
        out = w.report(pre["job_id"], "EVICTED")
        assert any(
            m.record.get("outcome") == "PLACED" and m.record["job_id"] == f"b{i}" for m in out
        )
    # A is back at its nominal 4: B's fifth job would borrow, and the cohort has nothing idle
    [queued] = w.submit("b4", **job("B"))
    assert queued.record["outcome"] == "QUEUED" and queued.record["wait_reason"] == "QUOTA"
    assert len(w.preemptions()) == 4 and len(set(evicted)) == 4
    usage = w.s.tenancy.usage()
    assert usage[("A", "eu", "A100-80")] == 4000 and usage[("B", "eu", "A100-80")] == 4000
    assert overlaps(w) == []


def test_non_preemptible_work_never_borrows(world: Any) -> None:
    w = world(policy=COHORT)
    for i in range(4):
        w.submit(f"s{i}", **job("A", priority_class="online-inference"))
    [queued] = w.submit("s4", **job("A", priority_class="online-inference"))
    assert queued.record["wait_reason"] == "QUOTA"
    assert "non-preemptible work runs within nominal" in queued.record["reasons"][0]
    [placed] = w.submit("p", **job("A"))  # a preemptible job of A may borrow B's idle quota
    assert placed.record["outcome"] == "PLACED"


def test_an_unlisted_tenant_waits_with_the_reason(world: Any) -> None:
    w = world(policy=COHORT)
    [queued] = w.submit("x", **job("ghost"))
    assert queued.record["outcome"] == "QUEUED"
    assert queued.record["reasons"] == ["quota: tenant 'ghost' has no quota in the policy"]


def test_protection_beyond_the_allowance_waits(world: Any) -> None:
    policy = {"tenants": {"A": {"quotas": [{"nominal": 8}], "non_preemptible_gpus": 2}}}
    w = world(policy=policy)
    [d] = w.submit("p1", gpu_count=2, **job("A", preemptible=False))
    assert d.record["outcome"] == "PLACED"
    [d] = w.submit("p2", gpu_count=1, **job("A", preemptible=False))  # 2 + 1 > 2
    assert d.record["wait_reason"] == "ALLOWANCE"


def test_fair_order_converges_on_the_drf_allocation(world: Any, make_node: Any) -> None:
    """12 GPUs and 120 cores: A's jobs <1 GPU, 20 cores> (dominant: CPU, 1/6 each), B's
    <1 GPU, 2 cores> (dominant: GPU, 1/12 each). Offering each freed GPU to the lowest share:
    A = a/6, B = b/12 -> A, B, B, (tie: by name) A, B, B, A, B, B, A, B, B -> A 4, B 8:
    equal dominant shares 4/6 = 8/12 (FIFO would have given 6 and 6). One node: host CPU is
    reserved per node with the GPUs, and on three 40-core nodes two A jobs would leave a
    node's other GPUs without cores; one node keeps the arithmetic to DRF alone."""
    nodes = [make_node("n0", gpus=12, cpu_milli=120_000, memory_mib=0)]
    w = world(*nodes)
    for i in range(3):
        w.submit(f"x{i}", gpu_count=4, **job("Z"))  # the cluster is full
    for i in range(10):  # both queue, interleaved
        w.submit(f"a{i}", **job("A", cpu_milli=20_000))
        w.submit(f"b{i}", **job("B", cpu_milli=2_000))
    for i in range(3):
        w.report(f"x{i}", "FINISHED")
    running = [r.tenant for r in w.s.tenancy.running.values()]
    assert (running.count("A"), running.count("B")) == (4, 8)


def test_backfill_keeps_off_the_gang_reservation(world: Any) -> None:
    w = world()
    [r1] = w.submit("r1", gpu_count=4, expected_duration_s=1000.0)
    w.submit("r2", gpu_count=2, expected_duration_s=3000.0)
    [queued] = w.submit("gang", gpu_count=6, expected_duration_s=600.0)  # 2 free: waits
    assert queued.record["outcome"] == "QUEUED"
    w.tick(1)  # a retry pass: the gang gets its reservation when r1 ends (6 of n1's 8 GPUs)
    r1_end = r1.record["ts"] + r1.record["expected_duration_s"] * 1000  # on an A100: 400 s
    hold = w.s.tenancy.reservations["eu"]
    assert hold.reservation.job_id == "gang" and hold.reservation.start_ms == r1_end
    assert hold.reservation.gpu_count == 6 and w.s.tenancy.waits["gang"][0] == "GANG_RESERVATION"
    # a short job (ends before the gang starts) backfills onto a reserved free GPU ...
    [short] = w.submit("short", expected_duration_s=500.0)
    assert short.record["outcome"] == "PLACED"
    assert w.now + short.record["expected_duration_s"] * 1000 <= r1_end
    # ... a long one would delay the gang: it waits
    [long] = w.submit("long", expected_duration_s=5000.0)
    assert long.record["outcome"] == "QUEUED" and long.record["wait_reason"] == "BACKFILL"
    w.now = int(r1_end)
    w.report("short", "FINISHED")
    out = w.report("r1", "FINISHED")
    placed = [m.record["job_id"] for m in out if m.record.get("outcome") == "PLACED"]
    assert placed[0] == "gang"


def test_without_backfill_a_long_job_takes_the_free_gpus(world: Any) -> None:
    w = world(policy={"backfill": {"enabled": False}})
    w.submit("r1", gpu_count=4, expected_duration_s=1000.0)
    w.submit("r2", gpu_count=2, expected_duration_s=3000.0)
    w.submit("gang", gpu_count=6, expected_duration_s=600.0)
    w.tick(1)
    [long] = w.submit("long", expected_duration_s=5000.0)
    assert long.record["outcome"] == "PLACED"


def test_jobs_their_quota_refuses_do_not_end_the_retry_pass(world: Any) -> None:
    """Kueue's BestEffortFIFO: a job its tenant's quota refuses costs no placement attempt and
    must not keep the jobs behind it from being tried. One node of 8 GPUs; S (nominal 4) runs
    3 online-inference GPUs, B (nominal 4) runs 2 + 1 + 1 + 1 = 5 (borrowing 1): full.
    S queues nine 2-GPU online-inference jobs (3 + 2 > 4: non-preemptible work runs within
    nominal, QUOTA) and then x, 1 GPU (3 + 1 <= 4, CAPACITY). B's 2-GPU job ends: 2 free. The
    pass tries S's jobs oldest first; 9 quota refusals used to exceed the pass's 8 refusals
    and end it before x. Now x starts (S 3 + 1 = 4, B 3: 8 of 8)."""
    policy = {**COHORT, "tenants": {"S": COHORT["tenants"]["A"], "B": COHORT["tenants"]["B"]}}
    w = world(policy={**policy, "preemption": {"enabled": False}})
    serving = {**job("S"), "priority_class": "online-inference"}
    for i in range(3):
        [d] = w.submit(f"s{i}", **serving)
        assert d.record["outcome"] == "PLACED"
    for i, gpus in enumerate((2, 1, 1, 1)):
        [d] = w.submit(f"b{i}", gpu_count=gpus, **job("B"))
        assert d.record["outcome"] == "PLACED"
    for i in range(9):
        w.advance(1)
        [d] = w.submit(f"big{i}", gpu_count=2, **serving)
        assert d.record["wait_reason"] == "QUOTA"
    w.advance(1)
    [d] = w.submit("x", **serving)
    assert d.record["outcome"] == "QUEUED" and d.record["wait_reason"] == "CAPACITY"
    out = w.report("b0", "FINISHED")
    placed = [m.record["job_id"] for m in out if m.record.get("outcome") == "PLACED"]
    assert placed == ["x"]
    assert w.s.tenancy.waits["big0"][0] == "QUOTA"


def test_a_job_its_quota_refuses_waits_for_quota_not_capacity(world: Any) -> None:
    """A full node (8 GPUs: S runs 4 online-inference at its nominal 4, B 4 at its nominal 4)
    and three more 1-GPU online-inference jobs of S: 4 + 1 > 4 and non-preemptible work runs
    within nominal, so all wait for QUOTA. A retry pass skips them for lack of free GPUs
    (1 > 0 free); the first two ask the quota for a backfill reservation (refused: QUOTA),
    the third used to be marked CAPACITY ("needs 1 GPUs, 0 free"), which no GPU freed by
    another tenant would end."""
    policy = {**COHORT, "tenants": {"S": COHORT["tenants"]["A"], "B": COHORT["tenants"]["B"]}}
    w = world(policy=policy)
    serving = {**job("S"), "priority_class": "online-inference"}
    for i in range(4):
        [d] = w.submit(f"s{i}", **serving)
        assert d.record["outcome"] == "PLACED"
        [d] = w.submit(f"b{i}", **job("B"))
        assert d.record["outcome"] == "PLACED"
    for i in range(3):
        w.advance(1)
        [d] = w.submit(f"more{i}", **serving)
        assert d.record["wait_reason"] == "QUOTA"
    w.tick(30)
    assert [w.s.tenancy.waits[f"more{i}"][0] for i in range(3)] == ["QUOTA"] * 3
    assert "non-preemptible work runs within nominal" in w.s.tenancy.waits["more2"][1]


def test_a_pass_orders_each_tenant_s_first_jobs_only(world: Any, make_node: Any) -> None:
    """Queue depth 3: of A's five waiting jobs the pass tries the high-priority one and the
    two oldest; the two youngest wait for the next pass, whatever the free GPUs."""
    w = world(make_node("n0", gpus=8))
    w.s.tenancy.queue_depth = 3
    w.submit("big", gpu_count=8, **job("Z", preemptible=False))  # full, and no victims
    for i in range(4):
        w.advance(1)
        w.submit(f"a{i}", **job("A"))
    w.advance(1)
    w.submit("urgent", **job("A", priority_class="urgent-training"))
    w.report("big", "FINISHED")  # 8 GPUs free: one pass
    running = sorted(r.job_id for r in w.s.tenancy.running.values())
    assert running == ["a0", "a1", "urgent"]
    w.tick(1)  # the next pass reaches the others
    assert {"a2", "a3"} <= set(w.s.tenancy.running)
