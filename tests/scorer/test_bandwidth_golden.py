"""The bandwidth recompute gives exactly the recorded rates and quota changes.

`data/bandwidth_golden.json` was recorded from main before the recompute was made faster
(issue 36, item 3): a seeded backbone, jobs whose flows cross it, and rounds of phase changes,
jobs ending and starting and cross traffic moving; each round's allocation (keys, Gbit/s per
(job, link), load per link) and the quota changes the ledger emits are compared.

Record again (only when a change of outputs is intended, and say why in the commit):

    PYTHONPATH=$PWD .venv/bin/python tests/scorer/test_bandwidth_golden.py --record
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scorer.network import BandwidthAllocator, Flow, Link, LinkGraph, QuotaLedger

GOLDEN = Path(__file__).with_name("data") / "bandwidth_golden.json"
REGIONS = [f"r{i}" for i in range(8)]
JOBS, ROUNDS = 100, 10


def _links(rng: np.random.Generator) -> list[Link]:
    out = []
    for i in range(len(REGIONS)):
        for step in (1, 3):
            a, b = REGIONS[i], REGIONS[(i + step) % len(REGIONS)]
            gbps = float(rng.choice([10.0, 25.0, 100.0]))
            for s, d in ((a, b), (b, a)):
                used = round(gbps * float(rng.uniform(0.0, 0.4)), 3)
                out.append(Link(s, d, 20.0 + 10 * step, gbps, 0.02, used_gbps=used))
    return out


def _flows(job: str, rng: np.random.Generator) -> list[Flow]:
    sites = [str(r) for r in rng.choice(REGIONS, 3 if rng.random() < 0.2 else 2, replace=False)]
    ring = list(zip(sites, sites[1:] + sites[:1], strict=True))
    need, peak = round(float(rng.uniform(0.5, 20)), 3), float(rng.choice([25.0, 50.0, 200.0]))
    minimum = round(float(rng.uniform(0, 1)), 3) if rng.random() < 0.2 else 0.0
    weight = float(rng.choice([1.0, 1.0, 2.0, 4.0]))
    return [Flow(job, s, d, need * 2, need, peak, minimum, weight) for s, d in ring]


def rounds() -> list[dict[str, Any]]:
    """Run the seeded rounds and record each one's allocation and quota changes."""
    rng = np.random.default_rng(36)
    links = _links(rng)
    graph = LinkGraph(links)
    allocator, ledger = BandwidthAllocator(graph), QuotaLedger()
    jobs = [f"j{i}" for i in range(JOBS)]
    for job in jobs:
        allocator.set_job(job, _flows(job, rng), "COMM" if rng.random() < 0.5 else "COMPUTE")
    now, out, fresh = 1_700_000_000_000, [], JOBS
    for r in range(ROUNDS):
        for j in rng.choice(JOBS, JOBS // 10, replace=False).tolist():
            phase = allocator.phase.get(jobs[j])
            if phase is not None:
                allocator.set_phase(jobs[j], "COMPUTE" if phase == "COMM" else "COMM")
        if r % 4 == 3:  # jobs end, others start; a job moves
            for j in rng.choice(JOBS, 5, replace=False).tolist():
                allocator.remove(jobs[j])
                jobs[j] = f"j{fresh}"
                fresh += 1
                allocator.set_job(jobs[j], _flows(jobs[j], rng))
            allocator.set_job(jobs[0], _flows(jobs[0], rng), "COMM")
        if r % 6 == 5:  # cross traffic moves
            link = links[int(rng.integers(len(links)))]
            used = round(link.capacity_gbps * float(rng.random()) / 2, 3)
            graph.put(replace(link, used_gbps=used))
        now += 500 if r % 5 else 25_000  # now and then long enough for renewals
        alloc = allocator.allocate()
        changes = ledger.decide_arrays(alloc, now)
        out.append(
            {
                "keys": alloc.keys.tolist(),
                "gbps": alloc.gbps.tolist(),
                "load": alloc.load.tolist(),
                "changes": [list(c) for c in changes],
            }
        )
    return out


def _record() -> None:
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(rounds(), separators=(",", ":")) + "\n")


def test_rates_and_quota_changes_match_the_recorded_rounds() -> None:
    golden = json.loads(GOLDEN.read_text())
    now = rounds()
    assert len(now) == len(golden) == ROUNDS
    assert sum(len(r["changes"]) for r in golden) > ROUNDS * 20  # the rounds do emit
    assert {c[5] for r in golden for c in r["changes"]} >= {"new", "change", "revoke"}
    for i, (got, want) in enumerate(zip(now, golden, strict=True)):
        assert got["keys"] == want["keys"], i
        assert got["gbps"] == pytest.approx(want["gbps"], rel=1e-12, abs=1e-12), i
        assert got["load"] == pytest.approx(want["load"], rel=1e-12, abs=1e-12), i
        assert got["changes"] == want["changes"], i


if __name__ == "__main__":
    if sys.argv[1:] == ["--record"]:
        _record()
