"""A scheduler world for mechanism tests: a virtual clock, nodes, plain-dict tables, and a log
of every message sent (the decision and job-event logs a restarted worker reads back).

Handed to tests as the `world` fixture factory, so no test imports this module.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from infra.topics import DECISIONS_PLACEMENT, DECISIONS_PREEMPTION, JOBS_ROUTED
from scorer import ClusterState, Placer
from scorer.tenancy import TenancyPolicy, parse_policy
from streams.base.outbox import Outgoing
from streams.scheduler.core import Scheduler
from streams.scheduler.job_end import ENDS, end_kind

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from harness import overbooked

T0 = 1_700_000_000_000


def node(
    node_id: str, region: str = "eu", gpus: int = 8, model: str = "A100-80", **kw: Any
) -> dict[str, Any]:
    return {
        "node_id": node_id, "region": region, "gpu_model": model, "gpu_count": gpus,
        "gpu_memory_mib": 81920, "zone": "z1", "rack": "r1", "price_per_gpu_hour": 2.0, **kw,
    }  # fmt: skip


@dataclass
class World:
    """One scheduler on a virtual clock; `log` keeps every message it sent, in order."""

    nodes: list[dict[str, Any]]
    policy: TenancyPolicy = field(default_factory=TenancyPolicy)
    now: int = T0
    log: list[Outgoing] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # the job-event log
    tables: tuple[dict[str, Any], dict[str, Any], dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        reservations, queue, nodes = self.tables or ({}, {}, {})
        state = ClusterState()
        self.s = Scheduler(
            state, Placer(state), reservations=reservations, queue=queue, nodes=nodes,
            partitions=4, view_ttl_s=0, tenancy=self.policy, clock=lambda: self.now,
        )  # fmt: skip
        if self.tables is None:
            for n in self.nodes:
                self.s.nodes[n["node_id"]] = n
            self.s.rebuild({})

    # ---- driving ----------------------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)

    def follow(self, out: list[Outgoing]) -> list[Outgoing]:
        """Deliver routed hops as the broker would; the decisions, logged and returned."""
        sent: list[Outgoing] = []
        pending = list(out)
        while pending:
            msg = pending.pop(0)
            if msg.topic == JOBS_ROUTED:
                pending.extend(self.s.place(dict(msg.record), started_ns=0))
            else:
                sent.append(msg)
        self.log.extend(sent)
        return sent

    def submit(self, job_id: str, **kw: Any) -> list[Outgoing]:
        record = {
            "event_id": f"e-{job_id}", "ts": self.now, "job_id": job_id, "gpu_count": 1,
            "gpu_milli": 1000, "kind": "TRAINING", "precision": "FP16", **kw,
        }  # fmt: skip
        return self.follow(self.s.route(record, started_ns=0))

    def report(self, job_id: str, kind: str, **kw: Any) -> list[Outgoing]:
        """A JobEvent about the job's current placement (its epoch), as an executor sends it."""
        entry = self.s.reservations.get(job_id) or {}
        event = {
            "job_id": job_id, "type": kind, "region": entry.get("region", "eu"), "ts": self.now,
            "epoch": int(entry.get("epoch") or 0), **kw,
        }  # fmt: skip
        self.events.append(event)
        return self.follow(self.s.on_job_event(event))

    def tick(self, seconds: float = 0.0) -> list[Outgoing]:
        self.advance(seconds)
        return self.follow(self.s.on_tick(self.now))

    # ---- reading ----------------------------------------------------------------------------
    def decisions(self, topic: str = DECISIONS_PLACEMENT) -> list[Mapping[str, Any]]:
        return [m.record for m in self.log if m.topic == topic]

    def placed(self, job_id: str) -> list[Mapping[str, Any]]:
        return [d for d in self.decisions() if d["job_id"] == job_id and d["outcome"] == "PLACED"]

    def preemptions(self) -> list[Mapping[str, Any]]:
        return self.decisions(DECISIONS_PREEMPTION)

    def restarted(self) -> World:
        """A new worker after a crash: the tables as they were, state rebuilt from the logs."""
        tables = (copy.deepcopy(dict(self.s.reservations)), copy.deepcopy(dict(self.s.queue)),
                  copy.deepcopy(dict(self.s.nodes)))  # fmt: skip
        fresh = World(self.nodes, self.policy, self.now, list(self.log), list(self.events), tables)
        fresh.s.rebuild(logged(self.decisions()), ended(self.events))
        return fresh


def logged(decisions: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """What `streams.ledger.ledger.read_final_decisions` keeps: each job's highest-epoch final."""
    out: dict[str, Mapping[str, Any]] = {}
    for d in decisions:
        if d["outcome"] not in ("PLACED", "REJECTED"):
            continue
        if d["job_id"] not in out or d.get("epoch", 0) >= out[d["job_id"]].get("epoch", 0):
            out[d["job_id"]] = d
    return out


def ended(events: Iterable[Mapping[str, Any]]) -> dict[str, dict[int, str]]:
    """What `streams.ledger.ledger` keeps of the job-event log: each epoch's end, a FAILED's
    cause."""
    out: dict[str, dict[int, str]] = {}
    for e in events:
        if e["type"] in ENDS:
            out.setdefault(e["job_id"], {})[int(e.get("epoch") or 0)] = end_kind(e)
    return out


def gpu_overlaps(world: World) -> list[str]:
    """GPUs whose concurrent placements exceed a whole GPU, from the two logs alone (the
    integration harness's check, on this world's logs)."""
    return overbooked([dict(d) for d in world.decisions()], world.events)


@pytest.fixture
def world() -> Callable[..., World]:
    def make(*nodes: dict[str, Any], policy: Mapping[str, Any] | None = None) -> World:
        return World(
            list(nodes) or [node("n1")], parse_policy(policy) if policy else TenancyPolicy()
        )

    return make


@pytest.fixture
def overlaps() -> Callable[[World], list[str]]:
    return gpu_overlaps


@pytest.fixture
def make_node() -> Callable[..., dict[str, Any]]:
    return node
