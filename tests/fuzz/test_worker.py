"""The fuzz on the real broker and worker, at CI size (`bench/fuzz.py` is the long run):
every hostile record is consumed, the invalid ones are dead-lettered with a reason, the valid
ones processed, no fault escapes, nothing stalls, and the decision log promises no GPU twice."""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))

from harness import CODEC, TopicReader, overbooked, run_stack, wait_for

from agents.hostile import CONSUMED, CONSUMER_OF, HostileRecords
from infra.config import Config
from infra.kafka import producer
from infra.topics import DEADLETTER, DECISIONS_MIGRATION, DECISIONS_PLACEMENT, JOBS_EVENTS
from schemas import CodecError
from streams.scheduler.validation import Rules, problems

pytestmark = pytest.mark.integration

PER_TOPIC = 120


# the region cap depends on which topic the worker reads first: lifted here, so the expected
# dead letters do not depend on that order (tests/fuzz/test_events.py covers the cap)
NO_CAP = 1_000_000
RULES = Rules(max_regions=NO_CAP)


def _invalid(event: str, value: bytes) -> bool:
    try:
        name, record = CODEC.decode(value)
    except CodecError:
        return True
    return name != event or bool(problems(name, record, RULES))


def test_hostile_records_on_the_real_worker(config: Config) -> None:
    uncapped = dataclasses.replace(config.worker, max_regions=NO_CAP)
    with run_stack(dataclasses.replace(config, worker=uncapped), nodes=8) as run:
        base = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}"

        def metrics() -> dict[str, Any]:
            try:
                return httpx.get(f"{base}/metrics/", timeout=5).json()
            except (httpx.HTTPError, ValueError):
                return {}

        assert wait_for(lambda: bool(metrics()), 90), run.worker.log_tail()
        gen, p = HostileRecords(seed=15, regions=("us-east", "eu-west")), producer(run.config.kafka)
        expected: Counter[str] = Counter()
        baseline = {c: (metrics().get("consumed") or {}).get(c, 0) for c in CONSUMER_OF.values()}
        for _ in range(PER_TOPIC):
            for topic, event in CONSUMED.items():
                record = gen.draw(topic)
                p.produce(topic, record.value, record.key)
                expected[CONSUMER_OF[topic]] += _invalid(event, record.value)
        p.flush(30)

        def consumed_all() -> bool:
            got = metrics().get("consumed") or {}
            return all(got.get(c, 0) - baseline[c] >= PER_TOPIC for c in CONSUMER_OF.values())

        stalls: list[Any] = []
        stop = threading.Event()

        def watch_health() -> None:
            while not stop.wait(1.0):
                try:
                    body = httpx.get(f"{base}/health/", timeout=5).json()
                except (httpx.HTTPError, ValueError):
                    continue
                stalls.extend(body.get("stalled") or [])

        watcher = threading.Thread(target=watch_health, daemon=True)
        watcher.start()
        assert wait_for(consumed_all, 180), (metrics(), run.worker.log_tail())
        stop.set()
        watcher.join(5)
        final = metrics()
        for name in CONSUMER_OF.values():  # the fleet's own records are all valid
            assert final["dead_lettered"].get(name, 0) == expected[name], (name, final)
        assert final["faults"] == {} and run.worker.alive() and not stalls

        letters = TopicReader(run.config, DEADLETTER)
        assert wait_for(lambda: len(letters.poll(0.5)) >= sum(expected.values()), 30)
        assert all(r["error"] for r in letters.records)
        decisions, events = (
            TopicReader(run.config, DECISIONS_PLACEMENT),
            TopicReader(run.config, JOBS_EVENTS),
        )
        decisions.read_to_end()  # decisions, then moves, then every release they relied on
        moves = TopicReader(run.config, DECISIONS_MIGRATION)
        moved = moves.read_to_end()
        moves.close()
        events.read_to_end()  # judged by when each event was produced: hostile ones carry any ts
        produced = [
            {**r, "ts": m.timestamp()[1]} for r, m in zip(events.records, events.raw, strict=True)
        ]
        assert not overbooked(decisions.records, produced, moved)
        for reader in (letters, decisions, events):
            reader.close()
