"""Three workers, six regions: each region has one owner; SIGKILL one worker mid-stream and the
others take its regions over from the changelogs. Every job gets exactly one final decision,
no GPU is booked twice (judged from the decision and job-event logs alone), and the test
reports the fail-over time: kill -> first decision by the new owner of a killed region."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from cluster import cluster, first_decision_after
from harness import (
    TopicReader,
    check_once_and_not_overbooked,
    final_decisions,
    submit_jobs,
    wait_for,
)

from agents.jobgen import generate_jobs
from infra.broker import EmbeddedBroker
from infra.topics import DECISIONS_PLACEMENT, JOBS_EVENTS

pytestmark = pytest.mark.integration


def test_sigkill_one_of_three_workers_mid_stream(
    broker: EmbeddedBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with cluster(broker, tmp_path, workers=3, nodes=60, seed=5) as c:
        assert wait_for(lambda: c.split([0, 1, 2]), 150), (
            [c.regions_of(i) for i in range(3)],
            c.logs(),
        )
        victim = 1
        lost_regions = c.regions_of(victim)
        decisions = TopicReader(c.config, DECISIONS_PLACEMENT)
        events = TopicReader(c.config, JOBS_EVENTS)
        try:
            jobs = generate_jobs(300, seed=17, regions=c.regions, mean_duration_s=2.0, prefix="k3")
            for i, job in enumerate(jobs):  # two in three pinned, so every region gets work
                if i % 3:
                    job["allowed_regions"] = [c.regions[i % len(c.regions)]]
            sender = threading.Thread(target=submit_jobs, args=(c.config, jobs, 20.0))
            sender.start()
            assert wait_for(lambda: len(final_decisions(decisions.poll())) >= 60, 90), c.logs()
            c.workers[victim].kill()
            killed_ms = int(time.time() * 1000)
            sender.join(60)

            want = {j["job_id"] for j in jobs}
            assert wait_for(lambda: want <= set(final_decisions(decisions.poll())), 150), (
                len(want - set(final_decisions(decisions.records))),
                c.logs(),
            )
            assert killed_ms < max(int(d["ts"]) for d in decisions.records), "kill mid-stream"
            # the survivors hold all six regions between them, each region once
            assert wait_for(lambda: c.split([0, 2]), 30), [c.regions_of(i) for i in (0, 2)]

            placed = check_once_and_not_overbooked(decisions, events)
            finals = final_decisions(decisions.records)

            first = first_decision_after(decisions.records, lost_regions, killed_ms)
            assert first is not None, f"no decision in {sorted(lost_regions)} after the kill"
            failover_s = (int(first["ts"]) - killed_ms) / 1000
            with capsys.disabled():
                print(
                    f"\nfail-over: worker w{victim} ({sorted(lost_regions)}) SIGKILLed; first "
                    f"decision by the new owner after {failover_s:.1f} s "
                    f"({first['outcome']} {first['job_id']} in {first['region']}); "
                    f"{len(placed)} placed, {len(finals) - len(placed)} rejected of {len(jobs)}"
                )
        finally:
            decisions.close()
            events.close()
