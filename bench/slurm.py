"""Submit-to-running through gpuflow into a real 4-node Slurm cluster, against plain sbatch.

The same short jobs (1-2 GPUs, `date +%s.%N` and exit) go first through gpuflow (JobSubmitted
-> worker -> PlacementDecision -> the Slurm bridge's sbatch), then straight to `sbatch` with the
node and GPU count gpuflow chose for each, at the same rate, in one run. Running = the time the
job's own script printed. Also: when gpuflow heard of it (the bridge's STARTED event, sent
when its poll, every `slurm.poll_s`, sees Slurm's RUNNING; Slurm says RUNNING before it has
launched the batch script, so this can come before the script's own stamp) and gpuflow's own
part (submission -> placement decision). Target: gpuflow adds <= 1 s at p99.

    nice -n 5 python -m bench.slurm [--jobs 200] [--rate 5] [--poll 1.0]
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from agents.slurm.bridge import SlurmBridge
from agents.slurm.local import LocalSlurm
from bench._common import load_average, percentiles, report_result, wait_worker_ready
from gpuflow.stack import WorkerProcess
from infra.broker import EmbeddedBroker, free_port
from infra.config import Config, load_config
from infra.kafka import ensure_topics, producer
from infra.topics import DECISIONS_PLACEMENT, JOBS_EVENTS, JOBS_SUBMITTED
from schemas import SingleObjectCodec

REGION = "slurm-bench"
CODEC = SingleObjectCodec()
STAMP = ["bash", "-c", "date +%s.%N"]


class Reader:
    """Every record of some topics from the beginning (a plain assigned consumer)."""

    def __init__(self, config: Config, *topics: str) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.c = Consumer(
            {
                **config.kafka.client_conf(),
                "group.id": f"b-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
            }
        )
        parts = []
        for t in topics:
            meta = self.c.list_topics(t, timeout=10).topics[t]
            parts += [TopicPartition(t, p, OFFSET_BEGINNING) for p in meta.partitions]
        self.c.assign(parts)
        self.records: list[dict[str, Any]] = []

    def poll(self, seconds: float = 0.3) -> list[dict[str, Any]]:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for m in self.c.consume(1000, timeout=0.1):
                if not m.error():
                    self.records.append(CODEC.decode(m.value())[1])
        return self.records


def _config(broker: EmbeddedBroker, tmp: Path, cluster: LocalSlurm, poll_s: float) -> Config:
    base = load_config(env={}, data_dir=str(tmp / "data"))
    cfg = base.with_bootstrap(broker.bootstrap_servers).with_regions([REGION])
    return dataclasses.replace(
        cfg,
        worker=dataclasses.replace(
            cfg.worker,
            app_id=f"bench-slurm-{uuid.uuid4().hex[:6]}",
            web_port=free_port(),
            stale_after_s=30.0,
        ),
        store=dataclasses.replace(cfg.store, enabled=False),
        slurm=dataclasses.replace(cfg.slurm, slurm_conf=str(cluster.conf), poll_s=poll_s),
    )


def _stamp(path: Path) -> float | None:
    try:
        return float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def through_gpuflow(cfg: Config, n: int, rate: float, out_dir: Path) -> dict[str, Any]:
    reader = Reader(cfg, DECISIONS_PLACEMENT, JOBS_EVENTS)
    p = producer(cfg.kafka)
    sent: dict[str, float] = {}
    for i in range(n):
        job_id = f"g{i:04d}"
        rec = {
            "job_id": job_id,
            "gpu_count": 1 + i % 2,
            "command": STAMP,
            "ts": 0,
            "expected_duration_s": 1.0,
            "allowed_regions": [REGION],
            "event_id": job_id,
        }
        sent[job_id] = time.time()
        rec["ts"] = int(sent[job_id] * 1000)
        p.produce(JOBS_SUBMITTED, key=job_id.encode(), value=CODEC.encode("JobSubmitted", rec))
        p.poll(0)
        time.sleep(max(0.0, 1.0 / rate - (time.time() - sent[job_id])))
    p.flush(10)
    deadline = time.monotonic() + 120 + n / rate
    done = lambda: {r["job_id"] for r in reader.records if r.get("type") == "FINISHED"}  # noqa: E731
    while time.monotonic() < deadline and len(done() & set(sent)) < n:
        reader.poll(0.5)
    placed = {r["job_id"]: r for r in reader.records if r.get("outcome") == "PLACED"}
    started = {r["job_id"]: r for r in reader.records if r.get("type") == "STARTED"}
    rows = []
    for job_id, t in sent.items():
        ran = _stamp(out_dir / f"{job_id}.0.out")
        if ran is None or job_id not in placed:
            continue
        heard = started[job_id]["ts"] / 1000 if job_id in started else None
        a = placed[job_id]["assignments"]
        rows.append(
            {
                "job": job_id,
                "sent": t,
                "ran": ran,
                "decided": placed[job_id]["ts"] / 1000,
                "heard": heard,
                "node": a[0]["node_id"],
                "gpus": len(a[0]["gpu_indices"]),
            }
        )
    return {"rows": rows, "finished": len(done() & set(sent))}


def through_sbatch(
    cluster: LocalSlurm, rows: list[dict[str, Any]], rate: float, out_dir: Path
) -> list[float]:
    out_dir.mkdir(parents=True, exist_ok=True)
    sent = []
    for i, row in enumerate(rows):
        out = out_dir / f"plain-{i}.out"
        t = time.time()
        subprocess.run(
            [
                "sbatch",
                "--parsable",
                f"--nodelist={row['node']}",
                f"--gres=gpu:h100:{row['gpus']}",
                "--ntasks-per-node=1",
                f"--output={out}",
                "--wrap",
                "date +%s.%N",
            ],
            env=cluster.env,
            capture_output=True,
            check=True,
        )
        sent.append((t, out))
        time.sleep(max(0.0, 1.0 / rate - (time.time() - t)))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(_stamp(o) is None for _, o in sent):
        time.sleep(0.5)
    return [ran - t for t, o in sent if (ran := _stamp(o)) is not None]


def _ms(values: list[float]) -> dict[str, float]:
    return {k: round(v * 1000, 1) for k, v in percentiles(values).items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--rate", type=float, default=5.0, help="submissions a second")
    ap.add_argument("--poll", type=float, default=1.0, help="the bridge's slurm.poll_s")
    ap.add_argument("--out", help="result file (default bench/results/slurm.json)")
    args = ap.parse_args()
    load_before = load_average()
    tmp = Path(tempfile.mkdtemp(prefix="gpuflow-bench-slurm-"))
    base = load_config(env={})
    stop = threading.Event()
    with EmbeddedBroker(base.broker, tmp / "broker") as broker:
        cluster = LocalSlurm(tmp / "slurm", name="gfbench", prefix="n", nodes=4).start()
        try:
            cfg = _config(broker, tmp, cluster, args.poll)
            ensure_topics(cfg.kafka)
            worker = WorkerProcess(cfg).start()
            bridge = SlurmBridge(cfg, REGION)
            thread = threading.Thread(target=bridge.run, args=(stop,), daemon=True)
            thread.start()
            try:
                wait_worker_ready(cfg.worker.web_host, cfg.worker.web_port, None)
                time.sleep(3)  # the bridge's first inventory reaches the placer
                g = through_gpuflow(cfg, args.jobs, args.rate, bridge.out_dir)
                plain = through_sbatch(cluster, g["rows"], args.rate, tmp / "plain")
            finally:
                stop.set()
                thread.join(20)
                worker.stop()
        finally:
            cluster.stop()
    rows = g["rows"]
    via = [r["ran"] - r["sent"] for r in rows]
    heard = [r["heard"] - r["sent"] for r in rows if r["heard"]]
    lag = [r["heard"] - r["ran"] for r in rows if r["heard"]]
    decide = [r["decided"] - r["sent"] for r in rows]
    gp, sp = percentiles(via), percentiles(plain)
    report_result(
        "slurm",
        {
            "jobs": args.jobs,
            "rate_per_s": args.rate,
            "poll_s": args.poll,
            "gpuflow_finished": g["finished"],
            "measured_gpuflow": len(via),
            "measured_sbatch": len(plain),
            "gpuflow_submit_to_running_ms": _ms(via),
            "sbatch_submit_to_running_ms": _ms(plain),
            "ratio_p50": round(gp["p50"] / sp["p50"], 2),
            "ratio_p99": round(gp["p99"] / sp["p99"], 2),
            "gpuflow_adds_p99_ms": round((gp["p99"] - sp["p99"]) * 1000, 1),
            "target_adds_p99_ms": 1000.0,
            "gpuflow_submit_to_decision_ms": _ms(decide),
            "gpuflow_submit_to_started_event_ms": _ms(heard),
            # Slurm says RUNNING before the batch script starts (the step's launch): negative
            # when that launch takes longer than the bridge's polling
            "started_event_minus_script_start_ms": _ms(lag),
            "bridge_decision_to_sbatch_done_ms": _ms(bridge.dispatch_s),
            "load_average": load_before,
        },
        out=args.out,
    )


if __name__ == "__main__":
    main()
