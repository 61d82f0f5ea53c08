"""Whether the decision logs ever promised a GPU twice: the check every crash, fail-over and fuzz
test runs on what the worker wrote (`streams.ledger` folds the same logs for a rebuild)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from schemas import timestamp_ms
from streams.scheduler.job_end import ENDS

__all__ = ["overbooked"]


def overbooked(
    decisions: list[dict[str, Any]],
    events: list[dict[str, Any]],
    moves: Sequence[Mapping[str, Any]] = (),
) -> list[str]:
    """GPUs whose concurrent reservations exceed one whole GPU, from the logs alone.

    A placement (job, epoch) holds its GPUs from its decision's ts until that epoch's first
    ending event (FINISHED, FAILED, EVICTED) stamped at or after it (the placer only reuses
    GPUs after it consumed that event, so later decisions are later in ts). An ending event
    stamped before the placement (a stale or hostile one) cannot be placed on this timeline
    and is skipped, which can only make the check stricter.

    `moves` (MigrationDecisions) change what a placement holds: a move's target GPUs are held
    from its decision; when the job's next MIGRATED report (at or after the move) confirms it,
    the GPUs it left are free from that report on and the target is the job's until it ends or
    moves again; a move never confirmed holds its target until its `hold_until_ts`.
    """
    ends: dict[tuple[str, int], list[int]] = {}
    migrated: dict[str, list[int]] = {}
    for e in events:
        if e.get("type") in ENDS:
            ends.setdefault((e["job_id"], int(e.get("epoch") or 0)), []).append(int(e["ts"]))
        elif e.get("type") == "MIGRATED":
            migrated.setdefault(e["job_id"], []).append(int(e["ts"]))
    by_job: dict[str, list[Mapping[str, Any]]] = {}
    for m in moves:
        if m.get("to_assignments"):
            by_job.setdefault(m["job_id"], []).append(m)
    spans: dict[tuple[str, int], list[tuple[int, int, int]]] = {}

    def hold(assignments: Any, start: int, end: int) -> None:
        for a in assignments:
            for gpu in a["gpu_indices"]:
                spans.setdefault((a["node_id"], gpu), []).append((start, end, a["gpu_milli"]))

    for d in decisions:
        if d.get("outcome") != "PLACED":
            continue
        mine = ends.get((d["job_id"], int(d.get("epoch") or 0)), ())
        end = min((t for t in mine if t >= d["ts"]), default=2**62)
        start, current = int(d["ts"]), d["assignments"]
        reports = sorted(t for t in migrated.get(d["job_id"], ()) if d["ts"] <= t < end)
        for m in sorted(by_job.get(d["job_id"], ()), key=lambda m: timestamp_ms(m["ts"])):
            at = timestamp_ms(m["ts"])
            if not d["ts"] <= at < end:
                continue
            done = next((t for t in reports if t >= at), None)
            if done is None:  # never confirmed: the target was held until the hold ran out
                hold(m["to_assignments"], at, min(end, timestamp_ms(m.get("hold_until_ts")) or end))
                continue
            reports.remove(done)
            hold(current, start, done)  # what it left, freed by the confirmation
            start, current = at, m["to_assignments"]  # held from the decision on
        hold(current, start, end)
    bad = []
    for gpu, intervals in spans.items():
        points = sorted(
            [(s, m) for s, _, m in intervals] + [(e, -m) for _, e, m in intervals],
            key=lambda p: (p[0], p[1]),
        )
        held = 0
        for _, delta in points:
            held += delta
            if held > 1000:
                bad.append(f"{gpu[0]}[{gpu[1]}] holds {held} milli")
                break
    return bad
