"""The node executor under load: real processes on 8 local executor nodes.

    python -m bench.executor [--nodes 8] [--rate 20] [--seconds 60] [--cancels 40]

Starts the embedded broker and one worker, `--nodes` executor nodes (`gpuflow agent --execute
--simulate`, 8 L4s each, in us-east: the only GPUs in the run), submits `sleep 1` jobs at
`--rate` for `--seconds` and measures:
  * submit -> process started: the JobSubmitted's ts to the STARTED event's ts (the executor
    reports STARTED once the shim process is spawned);
  * cancel -> process gone: `--cancels` long jobs (half of them ignore SIGTERM), each sent a
    CancelRequest (what `gpuflow cancel` sends) through the worker, whose CANCEL decision has the
    policy's grace (1 s here), to the executor's CANCELLED event's ts (it reports it once no
    process of the job's group is left; the worker's own fallback report does not count);
  * the executors' CPU per job: their own user+system seconds (telemetry included, with the
    idle rate before the load taken off), and their reaped children's (shim + job) apart.
Writes bench/results/executor.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from agents.execution.local import ExecutorNode
from bench._common import load_average, percentiles, report_result
from gpuflow.stack import Stack
from infra.config import Config, load_config
from infra.jobspec import job_record
from infra.kafka import consumer, producer
from infra.topics import (
    DECISIONS_PLACEMENT,
    JOBS_CANCEL,
    JOBS_EVENTS,
    JOBS_SUBMITTED,
    NODE_INVENTORY,
)
from schemas import SingleObjectCodec

CODEC = SingleObjectCodec()
_TICK = os.sysconf("SC_CLK_TCK")
GRACE_S = 1.0


def _cpu(pid: int) -> tuple[float, float]:
    """(own, reaped children's) user+system seconds of a process."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / _TICK, (int(f[13]) + int(f[14])) / _TICK


class Events:
    """gpuflow.jobs.events and the placements from the beginning: the first event of each
    (job, type), a PLACED decision as (job, "PLACED")."""

    def __init__(self, config: Config) -> None:
        self.c = consumer(config.kafka, f"bench-exec-{uuid.uuid4().hex[:6]}")
        parts = []
        for topic in (JOBS_EVENTS, DECISIONS_PLACEMENT):
            meta = self.c.list_topics(topic, timeout=10).topics[topic]
            parts += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions]
        self.c.assign(parts)
        self.first: dict[tuple[str, str], dict[str, Any]] = {}

    def poll(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for msg in self.c.consume(1000, timeout=0.1):
                if not msg.error():
                    e = CODEC.decode(msg.value())[1]
                    kind = str(e.get("type") or e.get("outcome"))
                    if kind == "CANCELLED" and e.get("exit_code") is None:
                        kind = "CANCELLED_BY_WORKER"  # its fallback: says nothing of the process
                    self.first.setdefault((e["job_id"], kind), e)

    def count(self, jobs: list[str], kind: str) -> int:
        return sum((j, kind) in self.first for j in jobs)


def _wait_inventories(cfg: Config, wanted: set[str], timeout_s: float = 180.0) -> None:
    """Until every node's inventory is on the topic (agents start slowly on a busy box)."""
    c = consumer(cfg.kafka, f"bench-exec-inv-{uuid.uuid4().hex[:6]}")
    meta = c.list_topics(NODE_INVENTORY, timeout=10).topics[NODE_INVENTORY]
    c.assign([TopicPartition(NODE_INVENTORY, p, OFFSET_BEGINNING) for p in meta.partitions])
    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while not wanted <= seen and time.monotonic() < deadline:
            for msg in c.consume(100, timeout=0.2):
                if not msg.error():
                    seen.add(CODEC.decode(msg.value())[1]["node_id"])
    finally:
        c.close()
    if not wanted <= seen:
        raise SystemExit(f"nodes never published: {sorted(wanted - seen)}")


def _job(prefix: str, i: int, command: list[str]) -> dict[str, Any]:
    return job_record(
        {
            "job_id": f"{prefix}-{i}",
            "gpu_count": 1,
            "tenant": "default",
            "allowed_regions": ["us-east"],
            "allowed_gpu_models": ["L4"],
            "expected_duration_s": 1.0,
            "command": command,
        }
    )


def _submit(p: Any, jobs: list[dict[str, Any]], rate: float, events: Events) -> None:
    started = time.monotonic()
    for i, job in enumerate(jobs):
        job["ts"] = int(time.time() * 1000)
        p.produce(
            JOBS_SUBMITTED, key=job["job_id"].encode(), value=CODEC.encode("JobSubmitted", job)
        )
        p.poll(0)
        if (wait := started + (i + 1) / rate - time.monotonic()) > 0:
            events.poll(min(wait, 0.05)) if wait > 0.05 else time.sleep(wait)
    p.flush(10)


def _cancel_phase(config: Config, p: Any, events: Events, n: int) -> list[float]:
    """`n` long jobs started, then each cancelled; seconds from the cancel to CANCELLED."""
    stubborn = ["sh", "-c", "trap '' TERM; while :; do sleep 0.5; done"]
    jobs = [_job("cancel", i, stubborn if i % 2 else ["sleep", "120"]) for i in range(n)]
    _submit(p, jobs, 10.0, events)
    ids = [j["job_id"] for j in jobs]
    deadline = time.monotonic() + 60
    while events.count(ids, "STARTED") < n and time.monotonic() < deadline:
        events.poll(0.5)
    asked: dict[str, float] = {}
    for job_id in ids:
        started = events.first.get((job_id, "STARTED"))
        if started is None:
            continue
        request = {
            "event_id": uuid.uuid4().hex,
            "ts": int(time.time() * 1000),
            "job_id": job_id,
            "tenant": "default",
            "reason": "bench",
            "requested_by": "bench/executor.py",
        }
        asked[job_id] = time.time()
        p.produce(JOBS_CANCEL, key=job_id.encode(), value=CODEC.encode("CancelRequest", request))
        p.poll(0)
        events.poll(0.1)
    p.flush(10)
    deadline = time.monotonic() + 30
    while events.count(list(asked), "CANCELLED") < len(asked) and time.monotonic() < deadline:
        events.poll(0.5)
    return [
        events.first[(j, "CANCELLED")]["ts"] / 1000 - t
        for j, t in asked.items()
        if (j, "CANCELLED") in events.first
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--cancels", type=int, default=40)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gpuflow-bench-exec-"))
    policy = root / "policy.json"  # the worker's CANCEL decisions carry the policy's grace
    policy.write_text(json.dumps({"preemption": {"grace_period_s": GRACE_S}}))
    config = load_config(data_dir=str(root / "data")).with_regions(["us-east"])
    config = dataclasses.replace(
        config, worker=dataclasses.replace(config.worker, policy_file=str(policy))
    )
    load_before = load_average()
    with Stack(config) as stack:
        cfg = stack.config
        nodes = [
            ExecutorNode(cfg, f"bench-{i}", root, gpus=8, grace_s=GRACE_S).start()
            for i in range(args.nodes)
        ]
        try:
            result = _measure(cfg, nodes, args)
        finally:
            for node in nodes:
                node.stop()
    shutil.rmtree(root, ignore_errors=True)
    result.update(load_before=load_before, load_after=load_average())
    report_result("executor", result, args.out)


def _measure(cfg: Config, nodes: list[ExecutorNode], args: argparse.Namespace) -> dict[str, Any]:
    events, p = Events(cfg), producer(cfg.kafka)
    _wait_inventories(cfg, {n.node_id for n in nodes})
    time.sleep(5.0)  # the agents' start-up CPU is over before the idle rate is taken
    pids = [n.proc.pid for n in nodes if n.proc is not None]
    idle0, t0 = [_cpu(x) for x in pids], time.monotonic()
    events.poll(5.0)
    idle1, t1 = [_cpu(x) for x in pids], time.monotonic()
    idle_rate = sum(b[0] - a[0] for a, b in zip(idle0, idle1, strict=True)) / (t1 - t0)
    n = int(args.rate * args.seconds)
    jobs = [_job(f"j{uuid.uuid4().hex[:4]}", i, ["sleep", "1"]) for i in range(n)]
    cpu0, load0 = [_cpu(x) for x in pids], time.monotonic()
    _submit(p, jobs, args.rate, events)
    ids = [j["job_id"] for j in jobs]
    deadline = time.monotonic() + 60
    while events.count(ids, "FINISHED") < n and time.monotonic() < deadline:
        events.poll(0.5)
    cpu1, load1 = [_cpu(x) for x in pids], time.monotonic()
    own = sum(b[0] - a[0] for a, b in zip(cpu0, cpu1, strict=True))
    kids = sum(b[1] - a[1] for a, b in zip(cpu0, cpu1, strict=True))
    lat = [
        events.first[(j["job_id"], "STARTED")]["ts"] / 1000 - j["ts"] / 1000
        for j in jobs
        if (j["job_id"], "STARTED") in events.first
    ]
    split = [
        (
            events.first[(j["job_id"], "PLACED")]["ts"] - j["ts"],
            events.first[(j["job_id"], "STARTED")]["ts"]
            - events.first[(j["job_id"], "PLACED")]["ts"],
        )
        for j in jobs
        if (j["job_id"], "STARTED") in events.first and (j["job_id"], "PLACED") in events.first
    ]
    cancels = _cancel_phase(cfg, p, events, args.cancels)
    start, gone = percentiles(lat), percentiles(cancels)
    return {
        "nodes": args.nodes,
        "rate_per_s": args.rate,
        "seconds": args.seconds,
        "jobs": n,
        "started": len(lat),
        "finished": events.count(ids, "FINISHED"),
        "submit_to_started_s": {k: round(v, 3) for k, v in start.items()},
        "submit_to_started_target_p99_s": 1.0,
        "of_which_submit_to_placed_s": _ms_percentiles([a for a, _ in split]),
        "of_which_placed_to_started_s": _ms_percentiles([b for _, b in split]),
        "cancel_to_gone_s": {k: round(v, 3) for k, v in gone.items()},
        "cancel_grace_s": GRACE_S,
        "cancel_target_p99_s": GRACE_S + 1.0,
        "cancels": len(cancels),
        "cancel_source": "CancelRequest through the worker (half the jobs' shells ignore "
        "SIGTERM, so they last the grace and a SIGKILL)",
        "executor_cpu_s_per_job": round((own - idle_rate * (load1 - load0)) / max(1, n), 4),
        "executor_cpu_s_per_job_gross": round(own / max(1, n), 4),
        "executor_idle_cpu_per_s": round(idle_rate, 4),
        "shim_and_job_cpu_s_per_job": round(kids / max(1, n), 4),
    }


def _ms_percentiles(values_ms: list[float]) -> dict[str, float]:
    return {k: round(v / 1000, 3) for k, v in percentiles(values_ms).items()}


if __name__ == "__main__":
    main()
