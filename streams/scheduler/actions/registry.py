"""The actions by name, and the pipelines: which actions run, in which order, per trigger.

A pipeline is named the way a placer preset names its plugins; `Scheduler(actions=...)`
chooses one ("default" for every placer preset today).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from streams.scheduler.actions.backfill import Backfill
from streams.scheduler.actions.base import (
    Actions,
    ArrivalAction,
    Pipeline,
    RegionAction,
    SubmitAction,
)
from streams.scheduler.actions.defer import Defer
from streams.scheduler.actions.place import Place
from streams.scheduler.actions.preempt import Preempt
from streams.scheduler.actions.refuse import Refuse
from streams.scheduler.actions.replan import Replan, Rooms
from streams.scheduler.actions.route import Route

if TYPE_CHECKING:
    from streams.scheduler.protocols import Runs

__all__ = ["ARRIVAL", "PIPELINES", "REGION", "SUBMIT", "build"]

SUBMIT: dict[str, Callable[[Runs], SubmitAction]] = {"route": Route}
ARRIVAL: dict[str, Callable[[Runs], ArrivalAction]] = {
    "defer": Defer,
    "place": Place,
    "refuse": Refuse,
}
REGION: dict[str, Callable[[Runs], RegionAction]] = {
    "rooms": Rooms,
    "backfill": Backfill,
    "replan": Replan,
    "preempt": Preempt,
}

_PASS = ("rooms", "backfill", "replan")  # a region pass: freed rooms, the queue, re-planning
PIPELINES: dict[str, Pipeline] = {
    "default": Pipeline(
        submitted=("route",),
        arrival=("defer", "place", "refuse"),
        release=_PASS,
        tick=(*_PASS, "preempt"),
    ),
}


def build(name: str, s: Runs) -> Actions:
    """The actions of pipeline `name` for `s`; an unknown name says which are known."""
    if name not in PIPELINES:
        raise ValueError(f"actions must be one of {sorted(PIPELINES)}, not {name!r}")
    p = PIPELINES[name]
    return Actions(
        submitted=_made(SUBMIT, p.submitted, "submitted", s),
        arrival=_made(ARRIVAL, p.arrival, "arrival", s),
        release=_made(REGION, p.release, "release", s),
        tick=_made(REGION, p.tick, "tick", s),
    )


A = TypeVar("A")


def _made(
    known: Mapping[str, Callable[[Runs], A]], names: Sequence[str], trigger: str, s: Runs
) -> tuple[A, ...]:
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"no {trigger} action {unknown[0]!r}; known: {sorted(known)}")
    return tuple(known[n](s) for n in names)
