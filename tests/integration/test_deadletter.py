"""Garbage on a topic goes to the dead-letter topic with where it came from; the worker lives."""

from __future__ import annotations

from typing import Any

import pytest
from harness import CODEC, Running, TopicReader, final_decisions, submit_jobs, wait_for

from infra.kafka import producer
from infra.topics import DEADLETTER, DECISIONS_PLACEMENT, JOBS_SUBMITTED, NODE_TELEMETRY

pytestmark = [pytest.mark.integration, pytest.mark.engines("logbroker", "tansu")]


def test_garbage_is_dead_lettered_and_the_stream_goes_on(running: Running) -> None:
    p = producer(running.config.kafka)
    garbage = [b"\x00not avro at all", b"\xc3\x01" + b"\x00" * 8 + b"xx", b""]
    for i, value in enumerate(garbage):
        p.produce(JOBS_SUBMITTED, key=f"bad-{i}".encode(), value=value)
    wrong_type = CODEC.encode(
        "GridSignal",
        {"event_id": "g", "ts": 1, "region": "eu", "price_per_kwh": 0.1, "carbon_g_per_kwh": 1.0},
    )
    p.produce(JOBS_SUBMITTED, key=b"bad-type", value=wrong_type)
    p.produce(NODE_TELEMETRY, key=b"bad-tel", value=b"\xff\xfe")
    p.produce(DECISIONS_PLACEMENT, key=b"bad-decision", value=b"junk for the executor")
    p.flush(10)
    submit_jobs(running.config, [{"job_id": "good-after-garbage", "gpu_count": 1}], 10)

    letters = TopicReader(running.config, DEADLETTER)

    def by(consumer: str) -> dict[bytes, dict[str, Any]]:
        """One consumer's letters by key. The history sink dead-letters the same garbage as
        the router and the executor, in no set order against them, so a key's last letter
        may be either's: each check names whose letter it reads."""
        letters.poll(0.2)
        return {r["key"]: r for r in letters.records if r.get("consumer") == consumer}

    bad = [f"bad-{i}".encode() for i in range(len(garbage))]
    routed = [*bad, b"bad-type"]
    assert wait_for(lambda: set(routed) <= set(by("router")), 60), running.worker.log_tail()
    for i, value in enumerate(garbage):
        letter = by("router")[bad[i]]
        assert letter["source_topic"] == JOBS_SUBMITTED
        assert letter["value"] == value
        assert letter["offset"] >= 0 and letter["partition"] >= 0
        assert letter["error"]
    assert "expected JobSubmitted" in by("router")[b"bad-type"]["error"]
    assert wait_for(lambda: b"bad-decision" in by("executor"), 30), letters.records
    assert by("executor")[b"bad-decision"]["source_topic"] == DECISIONS_PLACEMENT
    assert wait_for(lambda: any(r.get("key") == b"bad-tel" for r in letters.poll(0.2)), 30)
    tel = [r for r in letters.records if r.get("key") == b"bad-tel"]
    assert tel and all(r["source_topic"] == NODE_TELEMETRY for r in tel)

    decisions = TopicReader(running.config, DECISIONS_PLACEMENT)
    assert wait_for(lambda: "good-after-garbage" in final_decisions(decisions.poll()), 60)
    assert running.worker.alive()
    letters.close()
    decisions.close()
