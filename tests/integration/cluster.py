"""N workers of one app on the embedded broker, a simulated fleet and the executor twin."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agents import SimulatedFleet, generate_nodes, load_fleet, run_fleet
from agents.executor import ExecutorTwin
from gpuflow.stack import WorkerProcess, worker_config
from infra.broker import EmbeddedBroker, free_port
from infra.config import Config, load_config
from infra.kafka import ensure_topics


@dataclass
class Cluster:
    config: Config  # what the fleet, the executor twin and the test use
    workers: list[WorkerProcess]
    configs: list[Config]  # each worker's own (web port, data dir)
    regions: list[str]
    fleet: SimulatedFleet
    stopped: set[int] = field(default_factory=set)

    def url(self, i: int, path: str) -> str:
        w = self.configs[i].worker
        return f"http://{w.web_host}:{w.web_port}{path}"

    def regions_of(self, i: int) -> set[str]:
        """Regions worker i holds in memory now (empty when it does not answer)."""
        try:
            return set(httpx.get(self.url(i, "/state/"), timeout=5).json()["regions"])
        except (httpx.HTTPError, ValueError, KeyError):
            return set()

    def split(self, alive: list[int]) -> bool:
        """Every region held by exactly one of the `alive` workers, and each holds some."""
        held = [self.regions_of(i) for i in alive]
        union: set[str] = set().union(*held)
        return union == set(self.regions) and sum(map(len, held)) == len(union) and all(held)

    def logs(self, chars: int = 3000) -> str:
        return "\n".join(f"--- {w.name}\n{w.log_tail(chars)}" for w in self.workers)


@contextlib.contextmanager
def cluster(
    broker: EmbeddedBroker,
    tmp_path: Path,
    *,
    workers: int,
    fleet: str = "six",
    nodes: int = 60,
    seed: int = 1,
    store: bool = False,
) -> Iterator[Cluster]:
    """`workers` workers on one app id, each region pinned to its own partition."""
    spec = load_fleet(fleet)
    regions = [r.name for r in spec.regions]
    base = load_config(env={}, data_dir=str(tmp_path), kafka={"partitions": len(regions)})
    cfg = base.with_bootstrap(broker.bootstrap_servers).with_regions(regions)
    cfg = dataclasses.replace(
        cfg,
        worker=dataclasses.replace(
            cfg.worker,
            app_id=f"gpuflow-cluster-{uuid.uuid4().hex[:6]}",
            web_port=free_port(),
            log_level="info",
            stale_after_s=30.0,
        ),
        store=dataclasses.replace(cfg.store, enabled=store),
    )
    ensure_topics(cfg.kafka)
    configs = [worker_config(cfg, i) for i in range(workers)]
    sim = SimulatedFleet(spec, generate_nodes(spec, nodes, seed=seed), seed=seed)
    stop = threading.Event()
    threads = [
        threading.Thread(target=run_fleet, args=(cfg, sim), kwargs={"stop": stop}),
        threading.Thread(target=ExecutorTwin(cfg).run, args=(stop,)),
    ]
    procs = [
        WorkerProcess(c, name=f"w{i}", log_dir=tmp_path).start() for i, c in enumerate(configs)
    ]
    for t in threads:
        t.start()
    try:
        yield Cluster(cfg, procs, configs, regions, sim)
    finally:
        stop.set()
        for t in threads:
            t.join(15)
        stoppers = [threading.Thread(target=w.stop) for w in procs]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()


def first_decision_after(
    decisions: list[dict[str, Any]], regions: set[str], after_ms: int
) -> dict[str, Any] | None:
    """The earliest decision in `regions` made after `after_ms` (worker clock, ms)."""
    later = [d for d in decisions if d.get("region") in regions and int(d["ts"]) > after_ms]
    return min(later, key=lambda d: int(d["ts"])) if later else None
