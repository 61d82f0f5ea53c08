"""Synthetic traces after Gavel's recipe: seeded, the published mix, round-trips the CSV format."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from agents.replay import (
    TraceJob,
    gavel_cluster,
    gavel_jobs,
    load_jobs,
    load_nodes,
    write_jobs,
    write_nodes,
)
from agents.replay.generate import DISTRIBUTED, share_mix_jobs
from scorer import GAVEL_CSV, load_gavel_csv

TABLE = GAVEL_CSV


@pytest.fixture(scope="module")
def jobs() -> tuple[TraceJob, ...]:
    return gavel_jobs(load_gavel_csv(TABLE), 3000, 300.0, seed=7)


def test_cluster_is_gavels_36_36_36_round_robin() -> None:
    nodes = gavel_cluster()
    counts: Counter[str] = Counter()
    for n in nodes:
        counts[n.gpu_model] += n.gpu_count
    assert counts == {"V100-16": 36, "P100": 36, "K80": 36}
    assert [n.gpu_model for n in nodes[:3]] == ["V100-16", "P100", "K80"]


def test_seeded_and_follows_the_recipe(jobs: tuple[TraceJob, ...]) -> None:
    assert gavel_jobs(load_gavel_csv(TABLE), 3000, 300.0, seed=7) == jobs
    assert jobs[0].submit_s == 0
    gaps = np.diff([j.submit_s for j in jobs])
    assert gaps.mean() == pytest.approx(300, rel=0.08)  # Poisson arrivals, mean gap lam
    assert all(3600 <= j.duration_s <= 4 * 3600 for j in jobs)
    dist = [j for j in jobs if j.job_type.split(" ")[0] in DISTRIBUTED]
    share = Counter(j.num_gpus for j in dist)
    assert share[1] / len(dist) == pytest.approx(0.7, abs=0.05)
    assert share[4] / len(dist) == pytest.approx(0.2, abs=0.05)
    assert all(j.num_gpus == 1 for j in jobs if j not in dist)


def test_round_trips_the_csv_format(tmp_path: Path, jobs: tuple[TraceJob, ...]) -> None:
    write_nodes(tmp_path / "n.csv", gavel_cluster())
    write_jobs(tmp_path / "j.csv", jobs[:50])
    assert load_nodes(tmp_path / "n.csv") == gavel_cluster()
    loaded = load_jobs(tmp_path / "j.csv")
    assert [(j.job_id, j.num_gpus, j.job_type) for j in loaded] == [
        (j.job_id, j.num_gpus, j.job_type) for j in jobs[:50]
    ]


def test_share_mix_reaches_its_demand() -> None:
    mixed = share_mix_jobs(load_gavel_csv(TABLE), 100.0, seed=1)
    demand = sum(j.num_gpus * j.gpu_milli / 1000 for j in mixed)
    assert 100 <= demand < 108 and any(j.gpu_milli < 1000 for j in mixed)
