"""What an action is: a step of one trigger's ordered list (`registry.PIPELINES`).

Two kinds, by what they are run on:
  - an arrival action runs on one RoutedJob at its region's placer (an `Attempt`) and either
    decides it (the messages to send) or passes it on (None) to the next action in the list;
  - a region action runs on one region after capacity came back (release) or on the timer
    (tick), and returns what it decided there; every action of the list runs.
A submission (a JobSubmitted record) has one action, the router's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from scorer import PlacementResult
    from streams.base.outbox import Outgoing

__all__ = [
    "Actions",
    "ArrivalAction",
    "Attempt",
    "Pipeline",
    "Refusal",
    "RegionAction",
    "SubmitAction",
]


@dataclass(frozen=True)
class Refusal:
    """What the placer said when it did not place: the result, its wait code and reason."""

    result: PlacementResult
    code: str
    reason: str


@dataclass
class Attempt:
    """One RoutedJob at its region's placer, as the arrival actions pass it on."""

    routed: Mapping[str, Any]
    started_ns: int
    refusal: Refusal | None = None  # set by the action that proposed and was refused

    @property
    def region(self) -> str:
        return str(self.routed["region"])


class SubmitAction(Protocol):
    name: str

    def run(self, job: Mapping[str, Any], started_ns: int) -> list[Outgoing]: ...


class ArrivalAction(Protocol):
    name: str

    def run(self, attempt: Attempt) -> list[Outgoing] | None: ...


class RegionAction(Protocol):
    name: str

    def run(self, region: str) -> list[Outgoing]: ...


@dataclass(frozen=True)
class Pipeline:
    """The ordered action names per trigger."""

    submitted: tuple[str, ...]
    arrival: tuple[str, ...]
    release: tuple[str, ...]
    tick: tuple[str, ...]


@dataclass(frozen=True)
class Actions:
    """A pipeline's actions, made for one scheduler."""

    submitted: tuple[SubmitAction, ...]
    arrival: tuple[ArrivalAction, ...]
    release: tuple[RegionAction, ...]
    tick: tuple[RegionAction, ...]
