"""Two engines, one answer: the stream engine (real broker + worker on its event clock) places
and migrates like the in-process engine."""

from __future__ import annotations

import time

import pytest

from agents.replay import Trace, TraceJob, gavel_cluster
from gpuflow.replay import replay_policy, summarize
from scorer import GAVEL_CSV, load_gavel_csv

TABLE = GAVEL_CSV


def small_trace() -> Trace:
    """3 servers (V100, P100, K80 x 2 GPUs); 7 jobs: some queue, one gang waits for a release."""
    tp = load_gavel_csv(TABLE)
    types = ["ResNet-50 (batch size 64)", "A3C", "LM (batch size 20)", "CycleGAN"]
    gpus = [1, 1, 2, 1, 2, 1, 1]
    jobs = tuple(
        TraceJob(
            f"j{i}",
            float(i * 60),
            g,
            1800.0 + 300 * i,
            job_type=types[i % 4],
            reference_model="V100-16",
        )
        for i, g in enumerate(gpus)
    )
    return Trace(gavel_cluster(2, 2), jobs, tp)


def placements(result: object) -> dict[str, tuple[str, tuple[tuple[str, tuple[int, ...]], ...]]]:
    out = {}
    for d in result.decisions:  # type: ignore[attr-defined]
        if d["outcome"] in ("PLACED", "REJECTED"):
            nodes = tuple(
                (a["node_id"], tuple(a["gpu_indices"])) for a in d.get("assignments") or ()
            )
            out[d["job_id"]] = (d["outcome"], nodes)
    return out


def migrations(result: object) -> list[tuple[str, str, tuple[str, ...]]]:
    return [
        (m["job_id"], m["reason"], tuple(a["node_id"] for a in m["to_assignments"]))
        for m in result.migrations  # type: ignore[attr-defined]
    ]


@pytest.mark.integration
@pytest.mark.timeout(150)
@pytest.mark.parametrize("policy", ["gpuflow", "fgd"])
def test_stream_engine_places_like_the_inprocess_engine(policy: str) -> None:
    trace = small_trace()
    fast = replay_policy(trace, policy, engine="inprocess")
    started = time.monotonic()
    slow = replay_policy(trace, policy, engine="stream")
    assert time.monotonic() - started < 120
    assert placements(slow) == placements(fast)
    assert migrations(slow) == migrations(fast)
    if policy == "gpuflow":  # it re-plans: jobs moved to faster GPUs as they freed up
        assert len(migrations(fast)) >= 2 and all(
            r == "BETTER_MATCH" for _, r, _ in migrations(fast)
        )
        assert sum(r.migrations for r in slow.twin.runs.values()) == len(migrations(fast))
    assert [d["outcome"] for d in slow.decisions] == [d["outcome"] for d in fast.decisions]
    a = summarize(fast, policy=policy, engine="inprocess")
    b = summarize(slow, policy=policy, engine="stream")
    assert a["avg_jct_s"] == pytest.approx(b["avg_jct_s"]) and a["completed"] == 7
    assert any(d["outcome"] == "QUEUED" for d in fast.decisions)


@pytest.mark.integration
@pytest.mark.timeout(150)
def test_stream_engine_tries_each_job_once_when_arrivals_only() -> None:
    # the worker is started with worker.try_once: no queue, a REJECTED for want of room
    trace = small_trace()
    fast = replay_policy(trace, "gpuflow", engine="inprocess", arrivals_only=True)
    slow = replay_policy(trace, "gpuflow", engine="stream", arrivals_only=True)
    outcomes = [d["outcome"] for d in slow.decisions]
    assert outcomes == [d["outcome"] for d in fast.decisions]
    assert set(outcomes) == {"PLACED", "REJECTED"}
    assert placements(slow) == placements(fast)
    assert all(d.get("wait_reason") for d in slow.decisions if d["outcome"] == "REJECTED")
