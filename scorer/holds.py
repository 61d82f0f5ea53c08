"""Tentative holds: GPUs reserved in `ClusterState` for something that is not (yet) a placement.

A hold is a `Hold(kind, job_id)`; this module is the one place that turns it into the string
key under which `ClusterState` (and, for moves, the `moves` changelog) stores it, and back.
The key forms are the ones records were written with before holds were typed, so every
changelog entry written earlier still parses:

  PREEMPTOR  "hold:<job>"     GPUs kept for a preemptor while its victims leave
  BACKFILL   "hold:backfill"  a backfill reservation's free GPUs, for one retry pass
  MOVE       "<job>#move"     a migration's target GPUs, from the decision until MIGRATED
  ROOM       "<gang>#room"    the node a defragmentation empties for a waiting gang
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "HOLD_PREFIX",
    "Hold",
    "HoldKind",
    "backfill_hold",
    "is_hold",
    "move_key",
    "parse_hold",
    "preemptor_hold",
]

HOLD_PREFIX = "hold:"  # keys of the preemptor and backfill holds (never a job id)
_MOVE, _ROOM = "#move", "#room"
_BACKFILL = HOLD_PREFIX + "backfill"


class HoldKind(enum.Enum):
    PREEMPTOR = "preemptor"
    BACKFILL = "backfill"
    MOVE = "move"
    ROOM = "room"


@dataclass(frozen=True)
class Hold:
    """What a hold is for; `job_id` is the job it is kept for (empty for BACKFILL)."""

    kind: HoldKind
    job_id: str = ""

    def __post_init__(self) -> None:
        if (self.kind is HoldKind.BACKFILL) != (not self.job_id):
            raise ValueError(f"hold {self.kind.name} with job_id {self.job_id!r}")

    @property
    def key(self) -> str:
        """The reservation key in `ClusterState` and the changelogs."""
        if self.kind is HoldKind.PREEMPTOR:
            return HOLD_PREFIX + self.job_id
        if self.kind is HoldKind.BACKFILL:
            return _BACKFILL
        return self.job_id + (_MOVE if self.kind is HoldKind.MOVE else _ROOM)


def preemptor_hold(job_id: str) -> Hold:
    return Hold(HoldKind.PREEMPTOR, job_id)


def backfill_hold() -> Hold:
    return Hold(HoldKind.BACKFILL)


def move_key(job_id: str) -> str:
    """The key that holds a move's target GPUs (what the `moves` table records)."""
    return Hold(HoldKind.MOVE, job_id).key


def parse_hold(key: str) -> Hold | None:
    """The hold a reservation key names; None for a placement's key (a job id)."""
    if key == _BACKFILL:
        return backfill_hold()
    if key.startswith(HOLD_PREFIX):
        return preemptor_hold(key[len(HOLD_PREFIX) :])
    for suffix, kind in ((_MOVE, HoldKind.MOVE), (_ROOM, HoldKind.ROOM)):
        if key.endswith(suffix) and len(key) > len(suffix):
            return Hold(kind, key[: -len(suffix)])
    return None


def is_hold(key: str) -> bool:
    return parse_hold(key) is not None
