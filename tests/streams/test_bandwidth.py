"""The bandwidth processor against plain dicts: events in, BandwidthQuota records out."""

from __future__ import annotations

import pytest

from infra.topics import DECISIONS_BANDWIDTH
from scorer.network import Flow, Link, LinkGraph, NetworkView
from streams.bandwidth.processor import BandwidthProcessor, flow_records, flows_from_records

T0 = 1_000_000


def _processor() -> BandwidthProcessor:
    view = NetworkView(LinkGraph([Link("a", "b", 40, 20), Link("b", "a", 40, 20)]))
    for job in ("x", "y"):
        view.note_placed(job, [Flow(job, "a", "b", need_gbps=4.0, tenant="t"),
                               Flow(job, "b", "a", need_gbps=4.0, tenant="t")])  # fmt: skip
    return BandwidthProcessor(view)


def _event(job: str, kind: str, phase: str | None = None) -> dict:
    return {"job_id": job, "type": kind, "phase": phase, "region": "a", "node_ids": []}


def _quotas(out: list) -> dict[tuple[str, str], float]:
    assert all(m.topic == DECISIONS_BANDWIDTH and m.event == "BandwidthQuota" for m in out)
    return {(m.record["job_id"], m.record["link_id"]): m.record["gbps"] for m in out}


def test_started_phase_finished() -> None:
    p = _processor()
    assert p.round(T0) == []  # nothing runs
    p.on_job_event(_event("x", "STARTED"))
    p.on_job_event(_event("y", "STARTED"))
    # 20G x 0.95 = 19 per direction, split in two
    assert _quotas(p.round(T0)) == {(j, lk): 9.5 for j in "xy" for lk in ("a>b", "b>a")}
    assert p.round(T0 + 500) == []  # nothing changed: nothing re-issued
    p.on_job_event(_event("x", "PHASE", "COMPUTE"))
    # x computing keeps 0.1 (idle_gbps); y takes 19 - 0.1 = 18.9
    out = p.round(T0 + 1000)
    assert _quotas(out) == {("x", "a>b"): 0.1, ("x", "b>a"): 0.1, ("y", "a>b"): 18.9,
                            ("y", "b>a"): 18.9}  # fmt: skip
    assert [m.record["job_id"] for m in out][:2] == ["x", "x"]  # decreases first
    record = out[0].record
    assert record["phase"] == "COMPUTE" and record["tenant"] == "t" and record["src_region"]
    p.on_job_event(_event("x", "FINISHED"))
    # x revoked; y could take 19 but 18.9 -> 19 is within 10 %: held, no churn
    assert _quotas(p.round(T0 + 2000)) == {("x", "a>b"): 0.0, ("x", "b>a"): 0.0}


def test_link_telemetry_and_renewal() -> None:
    p = _processor()
    p.on_job_event(_event("x", "STARTED"))
    p.round(T0)
    p.on_link({"src_region": "a", "dst_region": "b", "rtt_ms": 40.0, "capacity_gbps": 20.0,
               "used_gbps": 9.0, "loss_pct": 0.0})  # fmt: skip
    assert _quotas(p.round(T0 + 500)) == {("x", "a>b"): 10.0}  # 19 - 9
    # quotas live 30 s and renew 10 s before: nothing at +19.5 s, both renewed at +20 s
    assert p.round(T0 + 19_500) == []
    assert {m.record["reason"] for m in p.round(T0 + 20_500)} == {"renew"}


def test_restore_and_flow_records_round_trip() -> None:
    p = _processor()
    flows = p.view.flows("x")
    assert flows_from_records(flow_records(flows)) == list(flows)
    p.restore({"x": flows})
    assert set(_quotas(p.round(T0))) == {("x", "a>b"), ("x", "b>a")}
    assert p.snapshot(T0)["links"]["a>b"]["granted_gbps"] == pytest.approx(19.0)
