"""The twin feels the network: step times carry communication at the granted bandwidth, a
shared link slows the jobs on it, and re-rating mid-segment keeps every second of work."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from agents.replay import Slice, TraceError, TraceJob, TraceNode, Twin, TwinConfig
from agents.replay.network import NetworkTwinConfig, TwinNetwork, load_links
from scorer import JobSpec, ThroughputModel, default_catalog
from scorer.network import Link

LINKS = (Link("a", "b", 60, 20), Link("b", "a", 60, 20))  # 20 x 0.95 = 19 allocatable


def _nodes() -> tuple[TraceNode, ...]:
    return tuple(
        TraceNode(
            f"{r}{i}", r, "A100-80", 8, rack=f"{r}{i}", interconnect="nvlink", gpu_memory_mib=81920
        )
        for r in "ab"
        for i in range(3)
    )


def _network(mode: str) -> TwinNetwork:
    nodes = _nodes()
    return TwinNetwork(LINKS, {n.node_id: n.region for n in nodes},
                       {n.node_id: n.gpu_count for n in nodes}, default_catalog(),
                       NetworkTwinConfig(mode=mode, steps=8))  # fmt: skip


def _spec(job_id: str, accumulate: int) -> JobSpec:
    return JobSpec(job_id, kind="TRAINING", params_b=7, precision="BF16", gpu_count=16,
                   tensor_parallel=2, grad_accum_steps=accumulate)  # fmt: skip


def _job(job_id: str, accumulate: int, hours: float = 10.0) -> TraceJob:
    return TraceJob(job_id, 0.0, 16, hours * 3600, reference_model="A100-80", params_b=7,
                    precision="BF16", tensor_parallel=2, grad_accum_steps=accumulate,
                    cross_region_ok=True, checkpoint_interval_s=1800)  # fmt: skip


def _across(k: int) -> tuple[Slice, ...]:
    return (Slice(f"a{k}", tuple(range(8))), Slice(f"b{k}", tuple(range(8))))


def test_equal_shares_by_hand() -> None:
    net = _network("equal")
    one = {"x": (_spec("x", 32), "A100-80", {"a0": 8, "b0": 8})}
    both = {**one, "y": (_spec("y", 32), "A100-80", {"a1": 8, "b1": 8})}
    # 7B, 2 GPUs a replica, 1 x 2048 tokens: 0.3446 s a micro-batch, 32 of them: 11.03 s.
    # One server would hold it all: step = compute (+ 0.0152 s of TP on NVLink) = 11.04 s.
    # Alone on the 19 Gbit/s link: 112 Gbit / 19 = 5.895 s + 60 ms - 0.2297 s hidden = 5.725 s
    compute = 32 * 6 * 7e9 * 2048 / (2 * 312e12 * 0.4)
    tp = 32 * 4 * 33 * (2048 * 4224 * 2) * 2 * 0.5 / 600e9
    hidden = 2 / 3 * compute / 32
    alone = (compute + tp) / (compute + tp + 112 / 19 + 0.06 - hidden)
    assert net.update(one)["x"] == pytest.approx(alone, rel=1e-6)
    # two jobs: 9.5 Gbit/s each, all the time
    shared = (compute + tp) / (compute + tp + 112 / 9.5 + 0.06 - hidden)
    got = net.update(both)
    assert got["x"] == pytest.approx(shared, rel=1e-6) == got["y"]


def test_elastic_quotas_beat_equal_shares_for_phased_jobs() -> None:
    one = {"x": (_spec("x", 32), "A100-80", {"a0": 8, "b0": 8})}
    both = {**one, "y": (_spec("y", 32), "A100-80", {"a1": 8, "b1": 8})}
    equal, elastic = _network("equal"), _network("elastic")
    alone = equal.update(one)["x"]
    eq, el = equal.update(both), elastic.update(both)
    # each computes 2/3 of its step: communicating while the other computes, a job gets
    # (nearly) the whole link; equal shares leave half of it idle then
    assert eq["x"] < el["x"] < alone and eq["y"] < el["y"] < alone
    assert elastic.sims == 1


def test_a_shared_link_slows_a_running_job_and_gives_back_when_freed() -> None:
    net = _network("equal")
    twin = Twin(_nodes(), ThroughputModel(), TwinConfig(network=net))
    for j in ("x", "y"):
        twin.submit(_job(j, 32), 0.0)
    alone_end = twin.start("x", _across(0), 0.0)
    twin.start("y", _across(1), 3600.0)  # y joins the link an hour in
    shared_end = twin.next_finish()
    assert shared_end > alone_end  # x slowed down when y started
    # progress is exact across the change: an hour at the alone rate
    run = twin.runs["x"]
    alone_rate = 10 * 3600 / alone_end
    assert twin.progress("x", 3600.0) == pytest.approx(3600 * alone_rate)
    first = twin.pop_finish()
    assert first.job.job_id == "x" and first.end_s is not None
    assert first.end_s == pytest.approx(shared_end)
    assert first.done == pytest.approx(run.job.duration_s)
    # with x gone, y runs alone again: its remaining work at the alone rate
    left = 10 * 3600 - twin.progress("y", first.end_s)
    assert twin.next_finish() == pytest.approx(first.end_s + left / alone_rate)


def test_eviction_keeps_the_checkpoint_across_a_rate_change() -> None:
    net = _network("equal")
    twin = Twin(_nodes(), ThroughputModel(), TwinConfig(network=net))
    for j in ("x", "y"):
        twin.submit(_job(j, 32), 0.0)
    twin.start("x", _across(0), 0.0)
    alone = twin.runs["x"].rate
    twin.start("y", _across(1), 1000.0)  # x slows at 1000 s
    shared = twin.runs["x"].rate
    assert shared < alone
    # checkpoints every 1800 s of compute: evicted at 4000 s, x keeps what it had at 3600 s
    kept = twin.evict("x", 4000.0)
    assert kept == pytest.approx(1000 * alone + 2600 * shared)


def test_unmodelled_jobs_keep_the_spread_penalty() -> None:
    twin = Twin(_nodes(), ThroughputModel(), TwinConfig(network=_network("equal")))
    job = TraceJob("g", 0.0, 16, 3600.0, reference_model="A100-80")  # no size: not modelled
    twin.submit(job, 0.0)
    assert math.isclose(twin.start("g", _across(0), 0.0), 3600.0 / 0.7)


def test_links_csv(tmp_path: Path) -> None:
    good = tmp_path / "links.csv"
    good.write_text("src,dst,rtt_ms,capacity_gbps,cost_per_gb\na,b,60,20,0.02\nb,a,60,20,\n")
    assert load_links(good) == (Link("a", "b", 60, 20, 0.02), Link("b", "a", 60, 20, 0.0))
    bad = tmp_path / "bad.csv"
    bad.write_text("src,dst,rtt_ms,capacity_gbps\na,a,60,20\n")
    with pytest.raises(TraceError, match="two regions"):
        load_links(bad)
