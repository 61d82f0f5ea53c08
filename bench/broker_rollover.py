"""What deleting and re-creating a topic does on the embedded broker, with clients attached.

    python bench/broker_rollover.py

The only way to drop stored batches on Tansu 0.6 `memory://` is DeleteTopics (retention is
ignored, DeleteRecords closes the connection). Each probe runs in a child process (a client
that crashes must not take this script with it) against a fresh broker:
  * memory: broker RSS with 20 MB stored, after deleting that topic;
  * offsets: a recreated topic numbers from 0 again, committed offsets are gone;
  * idle_producer: a producer that once wrote to the topic, still open during the delete;
  * assigned_consumer / group_consumer: a consumer reading the topic during the delete.
Writes bench/results/broker_rollover.json (or --out).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._common import rss_mb, write_result

PROBES = ("memory", "offsets", "idle_producer", "assigned_consumer", "group_consumer")


def _probe(name: str) -> dict[str, Any]:  # runs in the child process
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from infra.broker import EmbeddedBroker
    from infra.config import BrokerConfig

    out: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmbeddedBroker(BrokerConfig(engine="tansu"), Path(tmp)) as broker,
    ):
        print(json.dumps({"broker_pid": broker.pid}), flush=True)  # reaped by the parent
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("t", 2, 1)])["t"].result()
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                      "topic.metadata.refresh.interval.ms": 1000})  # fmt: skip
        size = 20_000 if name == "memory" else 100
        for i in range(size):
            p.produce("t", value=os.urandom(1000), partition=i % 2)
            p.poll(0)
        p.flush(30)
        out["rss_mb_stored"] = round(rss_mb(broker.pid or 0), 1)
        c = None
        if name in ("assigned_consumer", "group_consumer", "offsets"):
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                          "enable.auto.commit": False, "enable.partition.eof": True,
                          "topic.metadata.refresh.interval.ms": 1000})  # fmt: skip
            if name == "group_consumer":
                c.subscribe(["t"])
            else:
                c.assign([TopicPartition("t", 0, OFFSET_BEGINNING)])
            last = -1
            for _ in range(50):
                msg = c.poll(0.2)
                error = None if msg is None else msg.error()
                if msg is not None and error is None:
                    last = int(msg.offset() or 0)
                elif error is not None and error.code() == KafkaError._PARTITION_EOF:
                    break
            if last >= 0:
                c.commit(offsets=[TopicPartition("t", 0, last + 1)], asynchronous=False)
            out["consumed_to"] = last + 1
        if name in ("memory", "offsets"):  # no client holds the topic during the delete
            p.flush(5)
            del p
            if c is not None:
                c.close()
        admin.delete_topics(["t"])["t"].result()
        time.sleep(3.0)  # metadata refreshes every second: clients notice
        if c is not None and name != "offsets":
            c.poll(0.5)
        out["rss_mb_after_delete"] = round(rss_mb(broker.pid or 0), 1)
        try:
            admin.create_topics([NewTopic("t", 2, 1)])["t"].result()
            out["recreated"] = True
        except Exception as exc:  # the idle producer's metadata request created it again
            out["recreated"] = False
            out["recreate_error"] = str(exc)
        if name == "offsets":
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g"})
            out["committed_after"] = c.committed([TopicPartition("t", 0)])[0].offset
            q = Producer({"bootstrap.servers": bootstrap})
            q.produce("t", value=b"new", partition=0)
            q.flush(5)
            c.assign([TopicPartition("t", 0, OFFSET_BEGINNING)])
            msg = c.poll(5.0)
            out["first_new_offset"] = None if msg is None else msg.offset()
            c.close()
        time.sleep(2.0)
    out["client_survived"] = True
    return out


def _run(name: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--probe", name],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    for line in lines:  # a crashed probe leaves its broker behind: stop it by PID
        if "broker_pid" in line:
            with contextlib.suppress(OSError):
                os.kill(int(line["broker_pid"]), signal.SIGKILL)
    results = [ln for ln in lines if "broker_pid" not in ln]
    row: dict[str, Any] = results[-1] if results else {"client_survived": False}
    row["exit_code"] = proc.returncode  # -11: the client process died of SIGSEGV
    return {"probe": name, **row}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", choices=PROBES, help=argparse.SUPPRESS)
    ap.add_argument("--out", help="result file (default bench/results/broker_rollover.json)")
    args = ap.parse_args()
    if args.probe:
        print(json.dumps(_probe(args.probe)), flush=True)
        return
    rows = []
    for name in PROBES:
        rows.append(_run(name))
        print(rows[-1], flush=True)
    path = write_result("broker_rollover", {"probes": rows}, out=args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
