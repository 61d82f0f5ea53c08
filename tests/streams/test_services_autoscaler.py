"""The autoscaler (streams.services.autoscaler) on a real scheduler and virtual clock: scale-in
stops at the forecast's need, a restarted worker submits no replica twice, a failed replica is
replaced by its next generation, and scale-in goes through cancel requests."""

from __future__ import annotations

from typing import Any

from infra.servicespec import service_record
from infra.topics import JOBS_CANCEL, JOBS_SUBMITTED, SERVICES_SCALING
from scorer.services import parse_service
from streams.base.outbox import Outgoing
from streams.services.autoscaler import Autoscaler

SPEC = {
    "name": "chat", "params_b": 1, "precision": "FP16", "batch": 8, "context": 1024,
    "capacity_rps": {"H100": 100}, "min_replicas": 2, "max_replicas": 8, "regions": ["eu"],
    "headroom": 0.15, "warm_pool": 1, "warm_share": 0, "scale_in_after_s": 30,
    "model_load_s": 0, "cold_start_s": 0,
}  # fmt: skip
NODES = [("n1", "z1"), ("n2", "z2"), ("n3", "z2")]
NODE = {"region": "eu", "gpu_model": "H100", "gpu_count": 8, "gpu_memory_mib": 81920,
        "rack": "r1", "price_per_gpu_hour": 2.0}  # fmt: skip


def _world(world: Any) -> Any:
    return world(*(NODE | {"node_id": n, "zone": z} for n, z in NODES))


def _scaler(w: Any) -> Autoscaler:
    scaler = Autoscaler(w.s, stale=set)
    scaler.on_spec(service_record(parse_service(SPEC)))
    return scaler


def _load(scaler: Autoscaler, ts: int, rps: float, zone: str = "") -> None:
    scaler.on_load({"service": "chat", "ts": ts, "requests_per_s": rps, "zone": zone})


def _run(w: Any, scaler: Autoscaler) -> list[dict[str, Any]]:
    """One look, its messages delivered as the broker would: the decisions it published."""
    out: list[Outgoing] = scaler.tick(w.now)
    for msg in out:
        if msg.topic == JOBS_SUBMITTED:
            w.follow(w.s.route(dict(msg.record), started_ns=0))
        elif msg.topic == JOBS_CANCEL:
            w.follow(list(w.s.cancels.on_request(dict(msg.record)).messages))
    w.log.extend(out)
    return [dict(m.record) for m in out if m.topic == SERVICES_SCALING]


def _submitted(w: Any) -> list[str]:
    return [m.record["job_id"] for m in w.log if m.topic == JOBS_SUBMITTED]


def test_scale_in_stops_at_the_forecasts_need(world: Any) -> None:
    w = _world(world)
    scaler = _scaler(w)
    # a day of history at 50 rps; a day ago, 5..15 minutes after now, it was 500
    history = [50.0] * 1470
    history[35:45] = [500.0] * 10
    start = w.now - 1469 * 60_000
    for m, rps in enumerate(history):
        _load(scaler, start + m * 60_000, rps)
    w.now = start + 1469 * 60_000 + 1_000
    _load(scaler, w.now, 750.0, zone="burst")  # a burst now: 800 rps in all
    (out,) = _run(w, scaler)
    assert out["action"] == "SCALE_OUT" and out["replicas_after"] == 8
    _load(scaler, w.now + 1, 0.0, zone="burst")  # over: 50 rps again
    looks = []
    for _ in range(5):  # 0, 10, 20, 30, 40 s after the burst
        w.advance(10)
        looks += _run(w, scaler)
    scaled = [d for d in looks if d["action"] == "SCALE_IN"]
    assert scaled, looks
    first = scaled[0]
    held = [d for d in looks if d["ts"] < first["ts"]]
    assert held and all(d["action"] == "HOLD" and d["replicas_after"] == 8 for d in held)
    assert first["ts"] - out["ts"] >= 30_000  # the hysteresis
    assert first["need_observed"] == 2 and first["need_forecast"] == 6  # 500 x 1.15 / 100
    assert first["replicas_after"] == 6, first
    assert sum(first["stopped"].values()) == 2  # indices 7 and 8 (of 0..8) cancelled
    cancelled = {j for j, e in w.s.reservations.items() if e.get("cancelled")}
    assert cancelled == {"svc-chat-7", "svc-chat-8"}, cancelled


def test_a_restarted_worker_submits_no_replica_twice(world: Any) -> None:
    w = _world(world)
    scaler = _scaler(w)
    _load(scaler, w.now, 50.0)
    _run(w, scaler)
    assert sorted(_submitted(w)) == ["svc-chat-0", "svc-chat-1", "svc-chat-2"]
    again = w.restarted()
    fresh = _scaler(again)
    _load(fresh, again.now, 50.0)
    before = len(_submitted(again))
    (out,) = _run(again, fresh)
    assert len(_submitted(again)) == before, _submitted(again)
    assert out["action"] == "HOLD" and "3 live of 3 wanted" in out["reason"]


def test_a_failed_replica_is_replaced_by_its_next_generation(world: Any) -> None:
    w = _world(world)
    scaler = _scaler(w)
    _load(scaler, w.now, 50.0)
    _run(w, scaler)
    w.report("svc-chat-1", "FAILED", exit_code=1)
    w.advance(2)
    _load(scaler, w.now, 50.0)
    _run(w, scaler)
    assert _submitted(w)[-1] == "svc-chat-1.1"
    assert w.placed("svc-chat-1.1"), w.decisions()
    w.advance(2)
    _run(w, scaler)
    assert _submitted(w).count("svc-chat-1.1") == 1  # placed: not sent again


def test_replicas_are_pinned_to_zones_under_the_cap_and_pins_end_once_placed(world: Any) -> None:
    w = _world(world)  # zones z1 (one node) and z2 (two nodes)
    scaler = _scaler(w)
    _load(scaler, w.now, 50.0)
    _run(w, scaler)
    jobs = {m.record["job_id"]: m.record for m in w.log if m.topic == JOBS_SUBMITTED}
    cap = -(-len(jobs) // 2)  # max_zone_share 0.5 (the default) of 3 replicas
    pins = [tuple(r["allowed_zones"]) for r in jobs.values()]
    assert all(len(p) == 1 for p in pins) and max(map(pins.count, pins)) <= cap, pins
    zone_of = dict(NODES)
    for job_id, record in jobs.items():
        (placed,) = w.placed(job_id)
        node = placed["assignments"][0]["node_id"]
        assert f"eu/{zone_of[node]}" in record["allowed_zones"], (job_id, node, record)
    w.advance(2)
    _run(w, scaler)  # the next look sees them placed: their zones are known, the pins go
    assert scaler.pinned == {}, scaler.pinned
