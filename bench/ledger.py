"""What a worker reads at start-up: the whole decision logs, or their tail after a saved ledger.

    python bench/ledger.py [--jobs 20000] [--tail-jobs 500] [--out FILE]

On a fresh embedded broker, writes `--jobs` jobs' records the way the pipeline does (per job:
a RoutedJob, a PlacementDecision, STARTED and FINISHED JobEvents, keyed by job id), then times
(wall clock, this process):
  * whole_read_s: a worker with no saved ledger folding the four logs from the beginning;
  * save_s / snapshot_bytes: saving that ledger (`streams.ledger.snapshot`);
then writes `--tail-jobs` more jobs and times tail_read_s: loading the saved ledger (load_s)
and catching up (what a restarted worker does). Writes bench/results/ledger.json (or --out).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._common import report_result


def _produce(bootstrap: str, prefix: str, jobs: int) -> int:
    from confluent_kafka import Producer

    from infra.store import samples as S
    from infra.topics import topic_for_event
    from schemas import SingleObjectCodec

    codec = SingleObjectCodec()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    now, sent = int(time.time() * 1000), 0
    for i in range(jobs):
        job_id, ts = f"{prefix}{i}", now + i
        key = job_id.encode()
        records: list[tuple[str, dict[str, Any]]] = [
            ("RoutedJob", S.routed_job(S.job_submitted(job_id, "t", ts), "eu", ts)),
            ("PlacementDecision", S.placement(job_id, ts, submitted_ts=ts)),
            ("JobEvent", S.job_event(job_id, "eu", "STARTED", ts + 1)),
            ("JobEvent", S.job_event(job_id, "eu", "FINISHED", ts + 2)),
        ]
        for name, rec in records:
            p.produce(topic_for_event(name), codec.encode(name, rec), key=key)
            sent += 1
        p.poll(0)
    p.flush(30)
    return sent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument("--tail-jobs", type=int, default=500)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    from infra.broker import EmbeddedBroker
    from infra.config import load_config
    from infra.kafka import ensure_topics
    from schemas import SingleObjectCodec
    from streams.ledger.ledger import Ledger
    from streams.ledger.snapshot import load_ledger, save_ledger

    codec = SingleObjectCodec()
    with tempfile.TemporaryDirectory() as tmp:
        base = load_config(env={}, data_dir=tmp)
        with EmbeddedBroker(base.broker, Path(tmp) / "broker") as broker:
            cfg = base.with_bootstrap(broker.bootstrap_servers)
            ensure_topics(cfg.kafka)
            history = _produce(broker.bootstrap_servers, "h", args.jobs)

            started = time.perf_counter()
            ledger = Ledger()
            whole = ledger.catch_up(cfg.kafka, codec, timeout_s=600)
            whole_s = time.perf_counter() - started

            path = Path(tmp) / "ledger.pickle"
            started = time.perf_counter()
            size = save_ledger(ledger, path)
            save_s = time.perf_counter() - started

            tail = _produce(broker.bootstrap_servers, "t", args.tail_jobs)
            started = time.perf_counter()
            restarted = load_ledger(path)
            load_s = time.perf_counter() - started
            read = restarted.catch_up(cfg.kafka, codec, timeout_s=600)
            tail_s = time.perf_counter() - started

    result = {
        "jobs": args.jobs,
        "records_in_logs": history,
        "whole_read_records": whole,
        "whole_read_s": round(whole_s, 3),
        "snapshot_bytes": size,
        "save_s": round(save_s, 3),
        "tail_jobs": args.tail_jobs,
        "tail_records_written": tail,
        "tail_read_records": read,
        "tail_read_s": round(tail_s, 3),  # loading the saved ledger, then the catch-up
        "load_s": round(load_s, 3),
        "jobs_in_ledger_after_restart": len(restarted.final),
    }
    report_result("ledger", result, out=args.out)


if __name__ == "__main__":
    main()
