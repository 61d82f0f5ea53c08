"""Tiered cadence and delta filtering with a fake clock (seconds passed in explicitly)."""

from __future__ import annotations

import numpy as np
import pytest

from agents.tiers import TierPolicy, TierScheduler, changed_mask, significant_change

POLICY = TierPolicy(nearline_s=15, slow_s=300, full_snapshot_s=30, heartbeat_s=5)
BASE = {"healthy": True, "util_pct": 50.0, "mem_used_mib": 10_000, "temperature_c": 60.0,
        "perf_factor": 1.0, "xid_events": []}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "significant"),
    [
        ({}, False),
        ({"util_pct": 54.9}, False),  # 4.9 pct-points < 5
        ({"util_pct": 55.0}, True),
        ({"mem_used_mib": 10_000 + 1023}, False),
        ({"mem_used_mib": 10_000 + 1024}, True),  # 1 GiB
        ({"temperature_c": 62.9}, False),
        ({"temperature_c": 57.0}, True),  # 3 C either way
        ({"perf_factor": 0.94}, True),
        ({"healthy": False}, True),  # health changes always go out
        ({"xid_events": [79]}, True),
    ],
)
def test_significant_change_thresholds(change: dict, significant: bool) -> None:
    assert significant_change(BASE, {**BASE, **change}, POLICY) is significant


def test_first_reading_is_always_significant() -> None:
    assert significant_change(None, BASE, POLICY)


def test_changed_mask_matches_the_scalar_rule() -> None:
    prev = {k: np.array([v, v, v]) for k, v in BASE.items() if k != "xid_events"}
    cur = {k: v.copy() for k, v in prev.items()}
    cur["util_pct"][1] = 60.0
    cur["healthy"][2] = False
    assert changed_mask(prev, cur, POLICY).tolist() == [False, True, True]


def _run(sched: TierScheduler, start: float, seconds: int, changes: dict[int, list[int]]):
    plans = {}
    for t in range(seconds):
        plans[t] = sched.plan(start + t, changes.get(t, []), 4)
    return plans


def test_full_snapshot_then_deltas_then_heartbeats() -> None:
    plans = _run(TierScheduler(POLICY, 1000.0), 1000.0, 31, {3: [2], 4: [0, 1]})
    assert plans[0].tier == "REALTIME" and plans[0].full_snapshot
    assert plans[0].gpu_indices == (0, 1, 2, 3)
    assert plans[0].nearline and plans[0].slow  # every tier reports at start
    assert plans[1] is None and plans[2] is None  # nothing changed, heartbeat not due
    assert plans[3].gpu_indices == (2,) and not plans[3].full_snapshot
    assert plans[4].gpu_indices == (0, 1)
    assert plans[9].tier == "HEARTBEAT" and plans[9].gpu_indices == ()  # 5 s after t=4
    assert plans[14].tier == "HEARTBEAT"
    assert plans[15].tier is None and plans[15].nearline  # near-line report proves liveness
    assert plans[30].full_snapshot  # the next full snapshot
    # t = 0, 3, 4, 9, 14, 15 (near-line), 20, 25 (heartbeats), 30 (snapshot)
    assert [t for t, p in plans.items() if p is not None] == [0, 3, 4, 9, 14, 15, 20, 25, 30]


def test_offset_staggers_snapshots_and_nearline() -> None:
    a = _run(TierScheduler(POLICY, 0.0, offset_s=0.0), 0.0, 61, {})
    b = _run(TierScheduler(POLICY, 0.0, offset_s=7.0), 0.0, 61, {})
    full_a = [t for t, p in a.items() if p and p.full_snapshot]
    full_b = [t for t, p in b.items() if p and p.full_snapshot]
    assert full_a == [0, 30, 60] and full_b == [0, 37]
    assert [t for t, p in b.items() if p and p.nearline] == [7, 22, 37, 52]


def test_a_stalled_clock_skips_missed_slots() -> None:
    sched = TierScheduler(POLICY, 0.0)
    sched.plan(0.0, [], 1)
    late = sched.plan(95.0, [], 1)  # the process slept through three snapshots
    assert late is not None and late.full_snapshot
    assert sched.plan(96.0, [], 1) is None
    later = sched.plan(120.0, [], 1)
    assert later is not None and later.full_snapshot


def test_policy_from_mapping_and_heartbeat_clamp() -> None:
    p = TierPolicy.from_mapping({"full_snapshot_s": 10, "mem_delta_mib": 2048})
    assert p.full_snapshot_s == 10 and p.mem_delta_mib == 2048
    with pytest.raises(ValueError, match="unknown tier setting"):
        TierPolicy.from_mapping({"fast_s": 1})
    with pytest.raises(ValueError, match="> 0"):
        TierPolicy.from_mapping({"realtime_s": 0})
    assert TierPolicy(heartbeat_s=30).with_heartbeat_below(10.0).heartbeat_s == 5.0
