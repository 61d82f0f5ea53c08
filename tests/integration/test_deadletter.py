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
    assert wait_for(lambda: len(letters.poll()) >= 6, 60), running.worker.log_tail()
    by_key = {r["key"]: r for r in letters.records}

    def routers() -> dict[bytes, dict[str, Any]]:
        """The router's letters: the history sink dead-letters the same garbage, in no set
        order against the router, so a key's last letter may be either's."""
        letters.poll(0.2)
        return {r["key"]: r for r in letters.records if r["consumer"] == "router"}

    bad = [f"bad-{i}".encode() for i in range(len(garbage))]
    assert wait_for(lambda: set(bad) <= set(routers()), 30), letters.records
    for i, value in enumerate(garbage):
        letter = routers()[bad[i]]
        assert letter["source_topic"] == JOBS_SUBMITTED
        assert letter["value"] == value
        assert letter["offset"] >= 0 and letter["partition"] >= 0
        assert letter["error"] and letter["consumer"] == "router"
    assert "expected JobSubmitted" in by_key[b"bad-type"]["error"]
    assert by_key[b"bad-tel"]["source_topic"] == NODE_TELEMETRY
    assert by_key[b"bad-decision"]["consumer"] == "executor"

    decisions = TopicReader(running.config, DECISIONS_PLACEMENT)
    assert wait_for(lambda: "good-after-garbage" in final_decisions(decisions.poll()), 60)
    assert running.worker.alive()
    letters.close()
    decisions.close()
