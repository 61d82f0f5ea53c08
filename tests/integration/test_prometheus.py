"""Scrape `/metrics` from a running worker with Prometheus' own text parser: the scheduler's
metrics are there, named by convention, with values that agree with what happened."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import httpx
import pytest
from harness import Running, TopicReader, final_decisions, submit_jobs, wait_for
from prometheus_client.parser import text_string_to_metric_families

from agents.jobgen import generate_jobs
from infra.kafka import producer
from infra.topics import DECISIONS_PLACEMENT, JOBS_SUBMITTED

pytestmark = pytest.mark.integration


def scrape(running: Running) -> dict[str, Any]:
    w = running.config.worker
    answer = httpx.get(f"http://{w.web_host}:{w.web_port}/metrics", timeout=10)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {f.name: f for f in text_string_to_metric_families(answer.text)}


def samples(family: Any, suffix: str = "") -> dict[tuple[tuple[str, str], ...], float]:
    name = family.name + suffix
    return {tuple(sorted(s.labels.items())): s.value for s in family.samples if s.name == name}


def test_metrics_page_in_prometheus_text_format(running: Running) -> None:
    regions = [r.name for r in running.fleet.spec.regions]
    jobs = generate_jobs(60, seed=3, regions=regions, mean_duration_s=1.0, prefix="prom")
    p = producer(running.config.kafka)
    p.produce(JOBS_SUBMITTED, key=b"garbage", value=b"\x00not avro")
    p.flush(10)
    decisions = TopicReader(running.config, DECISIONS_PLACEMENT)
    submit_jobs(running.config, jobs, rate_per_s=30)
    want = {j["job_id"] for j in jobs}
    assert wait_for(lambda: want <= set(final_decisions(decisions.poll())), 90)
    finals = final_decisions(decisions.records)
    placed = sum(1 for v in finals.values() if v[0]["outcome"] == "PLACED")

    def ready() -> bool:
        m = scrape(running)
        written = m.get("gpuflow_history_events_written")
        return bool(written and written.samples[0].value > 0)

    assert wait_for(ready, 60), running.worker.log_tail()
    m = scrape(running)

    # conventions: our prefix, lower snake case, counters end in _total, times in seconds
    ours = {n: f for n, f in m.items() if n.startswith("gpuflow_")}
    for name, family in ours.items():
        assert re.fullmatch(r"gpuflow_[a-z0-9_]+", name), name
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples), name
        if family.type == "histogram":
            assert name.endswith("_seconds"), name

    # decisions by outcome: every final decision the log shows was counted
    counted = samples(m["gpuflow_decisions"], "_total")
    assert counted[(("decision", "placement"), ("outcome", "PLACED"))] >= placed
    # latency histogram by decision type: cumulative buckets, count and a positive sum
    latency = m["gpuflow_decision_latency_seconds"]
    buckets = sorted(
        (float(s.labels["le"]), s.value)
        for s in latency.samples
        if s.name.endswith("_bucket") and s.labels["decision"] == "placement"
    )
    counts = [v for _, v in buckets]
    assert counts == sorted(counts) and buckets[-1][0] == float("inf")
    count = samples(latency, "_count")[(("decision", "placement"),)]
    assert count == counts[-1] >= len(jobs)
    assert 0 < samples(latency, "_sum")[(("decision", "placement"),)] < count  # < 1 s each

    # free GPUs by region and model never exceed the GPUs there; queue depth by region
    free, total = samples(m["gpuflow_free_gpus"]), samples(m["gpuflow_gpus"])
    assert {dict(k)["region"] for k in total} == set(regions)
    for key, value in free.items():
        assert 0 <= value <= total[key], key
    depth = samples(m["gpuflow_queue_depth"])
    assert {dict(k)["region"] for k in depth} == set(regions)
    assert all(v >= 0 for v in depth.values())
    assert "gpuflow_queue_depth_by_model" in m

    # telemetry: ingested (the fleet reports at 1 Hz) with a lag histogram
    assert samples(m["gpuflow_telemetry_events"], "_total")[()] > 0
    assert samples(m["gpuflow_telemetry_lag_seconds"], "_count")[()] > 0
    # consumer lag for every assigned partition of the scheduler's topics
    lag = samples(m["gpuflow_consumer_lag_messages"])
    topics: dict[str, set[str]] = defaultdict(set)
    for key, value in lag.items():
        labels = dict(key)
        topics[labels["topic"]].add(labels["partition"])
        assert value >= 0
    assert topics[JOBS_SUBMITTED] == {"0", "1", "2", "3"}
    # dead letters by source topic
    letters = samples(m["gpuflow_dead_letters"], "_total")
    assert letters[(("consumer", "router"), ("topic", JOBS_SUBMITTED))] >= 1
    # the history sink: batches written, their latency, backlog per partition
    assert samples(m["gpuflow_history_batch_seconds"], "_count")[()] > 0
    assert samples(m["gpuflow_history_up"])[()] == 1.0
    assert all(v >= 0 for v in samples(m["gpuflow_history_backlog_messages"]).values())
    assert samples(m["gpuflow_ready"])[()] == 1.0
    # and the process collector a Prometheus user expects
    assert m["process_resident_memory_bytes"].samples[0].value > 0

    # the JSON snapshot still answers on /metrics/ (benches and `gpuflow top` read it)
    w = running.config.worker
    snapshot = httpx.get(f"http://{w.web_host}:{w.web_port}/metrics/", timeout=10).json()
    assert snapshot["events"]["telemetry"] > 0
    decisions.close()
