"""`/activity/`'s bookkeeping: decision rates, recent decisions, dead letters, utilisation."""

from __future__ import annotations

from scorer import ClusterState, NodeSpec
from streams.runtime.activity import RATE_WINDOW_S, Activity
from streams.telemetry.reports import Reports


def state() -> ClusterState:
    s = ClusterState()
    s.upsert_node(NodeSpec("n1", "eu", "H100", 2, 81_559))
    s.upsert_node(NodeSpec("n2", "eu", "T4", 1, 15_360))
    return s


def telemetry(node: str, *utils: float, first: int = 0) -> Reports:
    gpus = [{"index": first + i, "util_pct": u, "healthy": True, "perf_factor": 1.0}
            for i, u in enumerate(utils)]  # fmt: skip
    return Reports.from_records([{"node_id": node, "region": "eu", "gpus": gpus}])


def test_utilisation_is_the_mean_of_each_gpus_last_report() -> None:
    a, s = Activity(), state()
    a.on_telemetry(telemetry("n1", 40, 80), s)
    a.on_telemetry(telemetry("n1", 20, first=1), s)  # a delta: GPU 1 only
    a.on_telemetry(telemetry("n2", 10), s)
    a.on_telemetry(telemetry("unknown", 99), s)  # before its inventory: ignored
    snap = a.snapshot(s, {"eu": 3})
    # H100: GPU 0 last said 40, GPU 1 now 20 -> 30; T4: 10
    assert snap["regions"]["eu"]["models"]["H100"] == {"total": 2, "free": 2, "util_pct": 30.0}
    assert snap["regions"]["eu"]["models"]["T4"]["util_pct"] == 10.0
    assert snap["regions"]["eu"]["queue_depth"] == 3


def test_rates_recent_and_dead_letters() -> None:
    a = Activity()
    for i in range(30):
        a.on_decision({"job_id": f"j{i}", "outcome": "PLACED" if i % 3 else "QUEUED",
                       "region": "eu", "reasons": []})  # fmt: skip
    a.on_decision({"job_id": "r", "outcome": "REJECTED", "reasons": ["memory: needs 1 GiB"]})
    a.on_dead_letter(ValueError("not Avro single-object encoding"))
    # 20 placed, 10 queued, 1 rejected within the window: per second over 10 s
    assert a.rates() == {"PLACED": 20 / RATE_WINDOW_S, "QUEUED": 1.0, "REJECTED": 0.1}
    import time

    assert a.rates(now=time.monotonic() + RATE_WINDOW_S + 1) == {}  # all older than the window
    snap = a.snapshot(ClusterState(), {})
    assert len(snap["recent"]) == 20 and snap["recent"][-1]["reason"] == "memory: needs 1 GiB"
    assert snap["decisions_total"] == {"PLACED": 20, "QUEUED": 10, "REJECTED": 1}
    assert snap["dead_letters"] == {"total": 1, "last": "not Avro single-object encoding"}
