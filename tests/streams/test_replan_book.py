"""The re-planner changes state only through the book: a defragmentation's room is the book's
and held by it as movers leave, and a restart rebuilds moves in flight, and moves the tables
missed, through the same methods, to the book the live worker had."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from infra.topics import DECISIONS_MIGRATION, DECISIONS_PLACEMENT, JOBS_ROUTED
from scorer import ClusterState, ThroughputModel, gavel_throughputs, make_placer
from scorer.replan import ReplanConfig
from streams.base.clock import EventClock
from streams.base.outbox import Outgoing
from streams.replan.parts import Room
from streams.scheduler.core import Scheduler

RESNET = "ResNet-50 (batch size 64)"


@pytest.fixture(scope="module")
def gavel() -> ThroughputModel:
    return gavel_throughputs()


def node(node_id: str, model: str, gpus: int) -> dict[str, Any]:
    return {"node_id": node_id, "region": "r", "gpu_model": model, "gpu_count": gpus,
            "gpu_memory_mib": 16384, "zone": "z", "rack": "k"}  # fmt: skip


def job(job_id: str, ts_ms: int, hours: float, gpus: int = 1, **kw: Any) -> dict[str, Any]:
    return {"event_id": f"e-{job_id}", "ts": ts_ms, "job_id": job_id, "kind": "TRAINING",
            "job_type": RESNET, "gpu_count": gpus, "gpu_milli": 1000,
            "expected_duration_s": hours * 3600, "reference_gpu_model": "V100-16",
            "checkpoint_interval_s": 600, **kw}  # fmt: skip


class Worker:
    """A re-planning scheduler on event time, with the logs a restarted worker reads back."""

    def __init__(self, gavel: ThroughputModel, nodes: list[dict[str, Any]]) -> None:
        self.gavel, self.nodes = gavel, nodes
        self.log: list[Outgoing] = []
        self.events: list[dict[str, Any]] = []
        self.s = self._scheduler({}, {}, {})
        self.s.rebuild({})

    def _scheduler(self, reservations: Any, queue: Any, moves: Any) -> Scheduler:
        state = ClusterState()
        return Scheduler(
            state, make_placer("gpuflow", state, throughput=self.gavel),
            reservations=reservations, queue=queue, moves=moves,
            nodes={n["node_id"]: n for n in self.nodes}, partitions=4, view_ttl_s=0,
            replan=ReplanConfig(), queue_order="speed_aware", clock=EventClock(),
        )  # fmt: skip

    def follow(self, out: list[Outgoing]) -> list[Outgoing]:
        sent = []
        while out:
            msg = out.pop(0)
            if msg.topic == JOBS_ROUTED:
                out.extend(self.s.place(dict(msg.record), started_ns=0))
            else:
                sent.append(msg)
        self.log.extend(sent)
        return sent

    def submit(self, record: dict[str, Any]) -> list[Outgoing]:
        return self.follow(self.s.route(record, started_ns=0))

    def report(self, event: dict[str, Any], released: list[str] | None = None) -> list[Outgoing]:
        self.events.append(event)
        return self.follow(self.s.on_job_event(event, released=released))

    def finish(self, job_id: str, ts_ms: int) -> list[Outgoing]:
        return self.report({"event_id": f"f-{job_id}", "type": "FINISHED", "job_id": job_id,
                            "ts": ts_ms})  # fmt: skip

    def migrated(self, move: Mapping[str, Any], ts_ms: int, **kw: Any) -> list[Outgoing]:
        nodes = [a["node_id"] for a in move["to_assignments"]]
        event = {"event_id": f"m-{move['job_id']}", "type": "MIGRATED",
                 "job_id": move["job_id"], "ts": ts_ms, "node_ids": nodes}  # fmt: skip
        return self.report(event, **kw)

    def tables(self) -> tuple[dict[str, Any], ...]:
        """The changelog tables as a restarted worker reads them back."""
        s = self.s
        return tuple(copy.deepcopy(dict(t)) for t in (s.reservations, s.queue, s.moves))

    def restarted(self, tables: tuple[dict[str, Any], ...]) -> Scheduler:
        """A new worker on `tables`, rebuilt from this worker's logs."""
        fresh = self._scheduler(*tables)
        fresh.clock.observe(self.s.clock.now())
        placed = [m.record for m in self.log if m.topic == DECISIONS_PLACEMENT]
        logged = {d["job_id"]: d for d in placed if d["outcome"] == "PLACED"}
        moves: dict[str, list[Mapping[str, Any]]] = {}
        for m in self.log:
            if m.topic == DECISIONS_MIGRATION:
                moves.setdefault(m.record["job_id"], []).append(m.record)
        migrated: dict[str, list[Mapping[str, Any]]] = {}
        ended: dict[str, dict[int, str]] = {}
        for e in self.events:
            if e["type"] == "MIGRATED":
                migrated.setdefault(e["job_id"], []).append(e)
            else:
                ended.setdefault(e["job_id"], {})[0] = e["type"]
        fresh.rebuild(logged, ended, moves=moves, migrated=migrated)
        return fresh


def book_of(s: Scheduler) -> tuple[Any, ...]:
    book = s.book
    return (
        {j: dict(e) for j, e in book.reservations.items()},
        {j: dict(e) for j, e in book.queue.items()},
        {j: dict(e) for j, e in book.moves.items()},
        dict(book.rooms),
        dict(book.state.jobs),
        book.state.free_gpus(),
    )


def moves(out: list[Outgoing]) -> list[Mapping[str, Any]]:
    return [m.record for m in out if m.topic == DECISIONS_MIGRATION]


def k80_job_moving_to_a_v100(gavel: ThroughputModel) -> tuple[Worker, Mapping[str, Any]]:
    """a holds the V100 for 1 h; x (10 h) starts on the K80 and moves when a ends."""
    w = Worker(gavel, [node("v", "V100-16", 1), node("k", "K80", 1)])
    w.submit(job("a", 1_000, 1))
    w.submit(job("x", 2_000, 10))
    (move,) = moves(w.finish("a", 3_601_000))
    return w, move


def test_a_restart_holds_a_move_in_flight_again(gavel: ThroughputModel) -> None:
    w, _ = k80_job_moving_to_a_v100(gavel)
    live = book_of(w.s)
    assert "x#move" in live[4] and live[2]["x"]["status"] == "pending"
    assert book_of(w.restarted(w.tables())) == live


def test_a_restart_that_lost_the_moves_table_takes_the_move_from_the_log(
    gavel: ThroughputModel,
) -> None:
    """The moves entry is written again from the logged decision, as the live commit wrote it
    (with its region: the changelog partition it lands in)."""
    w, _ = k80_job_moving_to_a_v100(gavel)
    live = book_of(w.s)
    reservations, queue, _ = w.tables()
    assert book_of(w.restarted((reservations, queue, {}))) == live


def test_a_restart_applies_a_move_the_tables_missed(gavel: ThroughputModel) -> None:
    w, move = k80_job_moving_to_a_v100(gavel)
    before = w.tables()  # the MIGRATED below never reached the tables' changelogs
    w.migrated(move, 3_700_000)
    live = book_of(w.s)
    assert live[4]["x"][0].node_id == "v" and "x" not in live[2] and "x#move" not in live[4]
    assert book_of(w.restarted(before)) == live


def test_a_defragmentation_room_is_held_by_the_book_until_its_gang_is_placed(
    gavel: ThroughputModel,
) -> None:
    # n1 and n2 (2 V100s each) run x1..x4; g (2 GPUs, one tensor-parallel group: one node)
    # waits. x1 and x3 end: a GPU free on each node, so x4 moves to n1 to empty n2 for g.
    w = Worker(gavel, [node("n1", "V100-16", 2), node("n2", "V100-16", 2)])
    for i, name in enumerate(("x1", "x2", "x3", "x4")):
        w.submit(job(name, 1_000 + i, 10 if name in ("x2", "x4") else 1))
    w.submit(job("g", 5_000, 2, gpus=2, tensor_parallel=2))
    assert moves(w.finish("x1", 3_601_000)) == []  # nowhere to move x2 or x4 to yet
    (move,) = moves(w.finish("x3", 3_611_000))
    assert (move["job_id"], move["reason"], move["for_job_id"]) == ("x4", "DEFRAGMENTATION", "g")
    book = w.s.book
    assert book.rooms == {"g": Room("g", "r", "n2", ("x4",))}
    assert set(book.state.jobs) == {"x2", "x4", "x4#move"}  # the room holds as movers leave
    released: list[str] = []
    w.migrated(move, 3_700_000, released=released)  # x4 left n2: its GPUs are held for g
    assert [(a.node_id, a.gpu_indices) for a in book.state.jobs["g#room"]] == [
        ("n2", (0,)),
        ("n2", (1,)),
    ]
    (placed,) = w.follow(w.s.after_release(released))
    assert placed.record["job_id"] == "g" and placed.record["outcome"] == "PLACED"
    assert [a["node_id"] for a in placed.record["assignments"]] == ["n2"]
    assert book.rooms == {} and "g#room" not in book.state.jobs
