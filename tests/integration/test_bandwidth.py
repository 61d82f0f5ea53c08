"""Bandwidth quotas end to end on the real broker and a real worker.

Two regions joined by a 20 Gbit/s link (19 allocatable after 5 % headroom) and two training
gangs that each fit no single region (4 A100s and 4 H100s per region; each gang wants 8 of one
model), so the worker places both across the link. The test plays the executor: STARTED for
both (each gets half of each direction, 9.5 Gbit/s), then PHASE COMPUTE for one: within one
decision round the other's quota rises to what the first released. Quotas in force never
exceed a link's allocatable bandwidth, after every round, also when telemetry halves the link.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import CODEC, TopicReader, submit_jobs, wait_for

from gpuflow.stack import WorkerProcess
from infra.broker import free_port
from infra.config import Config
from infra.kafka import producer
from infra.store import samples as S
from infra.topics import (
    DECISIONS_BANDWIDTH,
    DECISIONS_PLACEMENT,
    JOBS_EVENTS,
    LINK_TELEMETRY,
    NODE_INVENTORY,
)

pytestmark = pytest.mark.integration

ROUND_S = 0.5
CAPACITY = 20.0
ALLOCATABLE = CAPACITY * 0.95  # headroom 5 %


def _config(config: Config, tmp_path: Path) -> Config:
    links = tmp_path / "links.yaml"
    links.write_text(
        f"links:\n  - {{src: a, dst: b, rtt_ms: 40, capacity_gbps: {CAPACITY}, "
        "cost_per_gb: 0.02, both_ways: true}\n"
    )
    network = dataclasses.replace(
        config.network,
        links_file=str(links),
        round_s=ROUND_S,
        cross_region_gangs=True,
        quota_ttl_s=600.0,  # no renewal inside the test: every change below has a cause
    )
    worker = dataclasses.replace(config.worker, web_port=free_port(), stale_after_s=1e9)
    return dataclasses.replace(
        config.with_regions(["a", "b"]), network=network, worker=worker, store=dataclasses.
        replace(config.store, enabled=False)
    )  # fmt: skip


def _send(cfg: Config, topic: str, name: str, records: list[dict[str, Any]]) -> None:
    """Records on their region's partition (region-keyed topics), else by key."""
    p = producer(cfg.kafka)
    part = cfg.kafka.partitioner()
    for rec in records:
        key = str(rec.get("node_id") or rec.get("job_id") or rec.get("link_id")).encode()
        value = CODEC.encode(name, rec)
        if rec.get("region"):
            p.produce(topic, key=key, value=value, partition=part(rec["region"]))
        else:
            p.produce(topic, key=key, value=value)
    p.flush(10)


def _gang(job_id: str, model: str, accumulate: int) -> dict[str, Any]:
    return {
        "job_id": job_id, "kind": "TRAINING", "params_b": 7.0, "precision": "BF16",
        "gpu_count": 8, "tensor_parallel": 2, "data_parallel": 4, "cross_region_ok": True,
        "grad_accum_steps": accumulate, "allowed_gpu_models": [model], "tenant": "t",
    }  # fmt: skip


def _in_force_after_each_round(quotas: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Sum of the quotas in force on each link after each round (rounds share a ts)."""
    by_ts: dict[int, list[dict[str, Any]]] = {}
    for q in quotas:
        by_ts.setdefault(q["ts"], []).append(q)
    current: dict[tuple[str, str], tuple[float, int]] = {}
    sums: dict[str, list[float]] = {}
    for ts in sorted(by_ts):
        for q in by_ts[ts]:
            current[(q["job_id"], q["link_id"])] = (q["gbps"], q["valid_until_ts"])
        for link in {k[1] for k in current}:
            live = [g for (j, lk), (g, until) in current.items() if lk == link and until > ts]
            sums.setdefault(link, []).append(sum(live))
    return sums


def _brief(quotas: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(q["ts"], q["job_id"], q["link_id"], q["gbps"], q["reason"]) for q in quotas]


def _latest(quotas: list[dict[str, Any]], job: str, link: str) -> dict[str, Any] | None:
    """The last quota of (job, link): one job's records share a partition, so their order is
    the order they were decided in."""
    mine = [q for q in quotas if q["job_id"] == job and q["link_id"] == link]
    return mine[-1] if mine else None


def test_phase_change_moves_quota_within_a_round(config: Config, tmp_path: Path) -> None:
    cfg = _config(config, tmp_path)
    now = int(time.time() * 1000)
    nodes = [
        S.node_inventory(f"{r}-{m.lower()}", r, m, now, gpu_count=4) | {"zone": r, "rack": r}
        for r in ("a", "b")
        for m in ("A100-80", "H100")
    ]
    _send(cfg, NODE_INVENTORY, "NodeInventory", nodes)
    worker = WorkerProcess(cfg).start()
    url = f"http://{cfg.worker.web_host}:{cfg.worker.web_port}"
    decisions = TopicReader(cfg, DECISIONS_PLACEMENT)
    bandwidth = TopicReader(cfg, DECISIONS_BANDWIDTH)
    try:
        # 7B, 2 GPUs a replica, 64 micro-batches on A100s: 22 s of compute per step against 112
        # Gbit over ~14 Gbit/s; the H100s compute 3x faster, so 256 micro-batches keep it >= 60 %
        gangs = [_gang("ja", "A100-80", 64), _gang("jh", "H100", 256)]
        submit_jobs(cfg, gangs, rate_per_s=10)
        placed = lambda: {d["job_id"]: d for d in decisions.poll() if d["outcome"] == "PLACED"}  # noqa: E731
        assert wait_for(lambda: len(placed()) == 2, 60), [
            (d["job_id"], d["outcome"], d["reasons"]) for d in decisions.records
        ] + [worker.log_tail()]
        for d in placed().values():  # both span the two regions
            assert {a["node_id"][0] for a in d["assignments"]} == {"a", "b"}, d

        # the executor reports both started: each gets half of each direction
        started = [
            S.job_event(j, d["region"], "STARTED", int(time.time() * 1000),
                        nodes=tuple(a["node_id"] for a in d["assignments"]))
            for j, d in placed().items()
        ]  # fmt: skip
        _send(cfg, JOBS_EVENTS, "JobEvent", started)

        def half_each() -> bool:
            q = bandwidth.poll()
            got = [_latest(q, j, lk) for j in ("ja", "jh") for lk in ("a>b", "b>a")]
            return all(x is not None and abs(x["gbps"] - ALLOCATABLE / 2) < 1e-6 for x in got)

        assert wait_for(half_each, 30), [*_brief(bandwidth.records), worker.log_tail()]

        # ja computes: it keeps max(0, 0.1 x its need); jh gets the rest in the next round
        phase_ts = int(time.time() * 1000)
        compute = S.job_event("ja", placed()["ja"]["region"], "PHASE", phase_ts) | {
            "phase": "COMPUTE"
        }
        _send(cfg, JOBS_EVENTS, "JobEvent", [compute])

        def jh_rose() -> bool:
            q = _latest(bandwidth.poll(), "jh", "a>b")
            return q is not None and q["gbps"] > ALLOCATABLE * 0.8

        def consumed() -> int | None:
            """The processor's round count once it shows ja computing."""
            page = httpx.get(f"{url}/bandwidth/", timeout=5).json()
            return page["rounds"] if page["jobs"]["ja"]["phase"] == "COMPUTE" else None

        seen: list[int] = []

        def saw_phase() -> bool:
            rounds = consumed()
            if rounds is not None:
                seen.append(rounds)
            return bool(seen)

        assert wait_for(saw_phase, 30, 0.05), worker.log_tail()
        assert wait_for(jh_rose, 30), _brief(bandwidth.records)[-8:]
        rose = _latest(bandwidth.records, "jh", "a>b")
        fell = _latest(bandwidth.records, "ja", "a>b")
        assert rose is not None and fell is not None
        assert fell["phase"] == "COMPUTE" and fell["gbps"] < 1.0
        assert rose["ts"] == fell["ts"], "released and re-granted in the same round"
        # within one round of the processor seeing the phase: the round running when the page
        # showed it, or the next one
        page = httpx.get(f"{url}/bandwidth/", timeout=5).json()
        assert page["jobs"]["jh"]["changed_in_round"] <= seen[0] + 1, (page, seen[0])
        # wall clock: ~1.2 s measured here at load average 10 (round 0.5 s + the hop + a
        # loaded worker); bounded loosely, the round count above is the real check
        assert rose["ts"] - phase_ts < 15_000, rose["ts"] - phase_ts
        assert rose["gbps"] + fell["gbps"] == pytest.approx(ALLOCATABLE, abs=1e-6)

        # congestion: telemetry says 10 of 20G are cross traffic -> 19 - 10 = 9 allocatable
        link = S.link_telemetry("a", "b", int(time.time() * 1000), used=10.0)
        _send(cfg, LINK_TELEMETRY, "LinkTelemetry", [link | {"capacity_gbps": CAPACITY}])

        def shrank() -> bool:
            q = _latest(bandwidth.poll(), "jh", "a>b")
            return q is not None and q["gbps"] <= 9.0 + 1e-6

        assert wait_for(shrank, 30), _brief(bandwidth.records)[-8:]
        sums = _in_force_after_each_round(bandwidth.poll(1.0))
        assert max(sums["b>a"]) <= ALLOCATABLE + 1e-6
        assert max(sums["a>b"]) <= ALLOCATABLE + 1e-6
        assert sums["a>b"][-1] <= 9.0 + 1e-6
    finally:
        decisions.close()
        bandwidth.close()
        worker.stop()
