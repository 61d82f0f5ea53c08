"""End to end on the real broker: 200+ jobs over 3+ regions, each decided exactly once per
placement epoch (the generator's high-priority tenth may preempt others: a victim is placed
again at its next epoch), no GPU reserved twice, and every GPU back once the jobs are done."""

from __future__ import annotations

import pytest
from harness import (
    Running,
    TopicReader,
    duplicated,
    final_decisions,
    logged_overbooking,
    submit_jobs,
    wait_for,
)

from agents.jobgen import generate_jobs
from infra.topics import DECISIONS_PLACEMENT, JOBS_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.engines("logbroker", "tansu")]


def _jobs(n: int, regions: list[str], prefix: str) -> list[dict]:
    jobs = generate_jobs(n, seed=7, regions=regions, mean_duration_s=1.5, prefix=prefix)
    for i, job in enumerate(jobs):
        job["allowed_regions"] = [regions[i % len(regions)]]  # spread over every region
        job["data_region"] = regions[i % len(regions)]
        job.pop("allowed_gpu_models", None)
        # pinned round-robin, whatever each job was built for: portable builds, so that a pin
        # to a region without (say) Ascend nodes does not turn a CANN job into a rejection
        job["software_stack"] = "portable"
    return jobs


def test_every_job_decided_once_and_gpus_come_back(running: Running) -> None:
    regions = [r.name for r in running.fleet.spec.regions]
    jobs = _jobs(240, regions, "pipe")
    decisions = TopicReader(running.config, DECISIONS_PLACEMENT)
    events = TopicReader(running.config, JOBS_EVENTS)
    submit_jobs(running.config, jobs, rate_per_s=40)

    want = {j["job_id"] for j in jobs}
    assert wait_for(lambda: want <= set(final_decisions(decisions.poll())), 120), (
        f"undecided: {sorted(want - set(final_decisions(decisions.records)))[:10]}\n"
        + running.worker.log_tail()
    )
    finals = final_decisions(decisions.records)
    assert duplicated(decisions.records) == {}, "a job was decided twice in one epoch"
    placed = [v[0] for v in finals.values() if v[0]["outcome"] == "PLACED"]
    assert len({d["region"] for d in placed}) >= 3
    assert len(placed) >= 0.8 * len(jobs), "most jobs fit this fleet eventually"
    assert any(d["outcome"] == "QUEUED" for d in decisions.records), "the fleet was never full"

    # each decision on its region's pinned partition, the four regions on four partitions
    partition_of = running.config.kafka.partitioner()
    pairs = zip(decisions.records, decisions.raw, strict=True)
    where = {(d["region"], m.partition()) for d, m in pairs}
    assert {partition for _, partition in where} == {0, 1, 2, 3}
    assert all(partition == partition_of(region) for region, partition in where if region)

    placed_ids = {d["job_id"] for d in placed}
    finished = lambda: {e["job_id"] for e in events.poll() if e["type"] == "FINISHED"}  # noqa: E731
    assert wait_for(lambda: placed_ids <= finished(), 90)
    assert logged_overbooking(decisions, events) == []

    def all_free() -> bool:
        state = running.state()
        free = sum(sum(r["free_gpus"].values()) for r in state["regions"].values())
        total = sum(sum(r["total_gpus"].values()) for r in state["regions"].values())
        return state["held_jobs"] == 0 and free == total

    assert wait_for(all_free, 20), running.state()
    decisions.close()
    events.close()
