"""Proactive protection in the fleet tracker: advisory, move off and cordon, restart, uncordon."""

from __future__ import annotations

from typing import Any

from infra.topics import DECISIONS_ADVISORY, DECISIONS_MIGRATION
from scorer.protection import ProtectionPolicy
from streams.runtime.fleet import FleetTracker

FAST = ProtectionPolicy(window_s=30, evacuate_after_s=60, uncordon_after_s=120)


def telemetry(node_id: str, ts: int, bw: float, **gpu: Any) -> dict[str, Any]:
    gpus = [{"index": i, "healthy": True, "perf_factor": 1.0, "util_pct": 90.0,
             "mem_bw_util_pct": bw, **gpu} for i in range(8)]  # fmt: skip
    return {"node_id": node_id, "region": "eu", "ts": ts, "full_snapshot": True,
            "node_healthy": True, "gpus": gpus}  # fmt: skip


def test_saturation_advises_then_moves_jobs_off_and_cordons(world: Any, make_node: Any) -> None:
    w = world(make_node("n1"), make_node("n2"))
    fleet = FleetTracker(w.s, stale_after_s=1e9)
    fleet.protection.set_policy(FAST)
    [placed] = w.submit("j", gpu_count=8)
    node = placed.record["assignments"][0]["node_id"]
    other = "n2" if node == "n1" else "n1"
    sent = []
    for t in range(0, 100, 5):  # 95 % HBM bandwidth, every 5 s
        w.now = 1_700_000_000_000 + t * 1000
        sent += [(t, m) for m in fleet.on_telemetry(telemetry(node, w.now, 95.0))]
    advisories = [(t, m.record["action"]) for t, m in sent if m.topic == DECISIONS_ADVISORY]
    moves = [m.record for _, m in sent if m.topic == DECISIONS_MIGRATION]
    # window 30 s covered at 30 -> advisory; 60 s later still saturated -> cordon at 90
    assert advisories == [(30, "CHECKPOINT"), (90, "CORDON")]
    assert [m["job_id"] for m in moves] == ["j"] and moves[0]["reason"] == "NODE_UNHEALTHY"
    assert moves[0]["to_assignments"] == [] and moves[0]["from_region"] == "eu"
    assert next(m.record["job_ids"] for _, m in sent if m.topic == DECISIONS_ADVISORY) == ["j"]
    # the executor checkpoints and stops it: it is placed again, off the cordoned node
    out = w.report("j", "EVICTED", progress=0.4, detail="moved off")
    [again] = [m.record for m in out if m.record.get("outcome") == "PLACED"]
    assert again["epoch"] == 1 and again["assignments"][0]["node_id"] == other
    # the cordon survives a restart (it lives in the nodes table) ...
    r = w.restarted()
    r_fleet = FleetTracker(r.s, stale_after_s=1e9)
    r_fleet.protection.restore()
    assert r.s.nodes[node]["cordon"] == "HBM_SATURATION"
    [queued] = r.submit("k", gpu_count=8)
    assert queued.record["outcome"] == "QUEUED"  # n1 cordoned, n2 busy
    # ... and telemetry saying the node is healthy does not lift it; clean for 120 s does
    r_fleet.protection.set_policy(FAST)
    lifted = []
    for t in range(100, 400, 5):
        r.now = 1_700_000_000_000 + t * 1000
        out = r_fleet.on_telemetry(telemetry(node, r.now, 10.0))
        lifted += [(t, m.record["action"]) for m in out if m.topic == DECISIONS_ADVISORY]
    assert lifted and lifted[0][1] == "UNCORDON"
    assert "cordon" not in r.s.nodes[node]
