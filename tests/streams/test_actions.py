"""The scheduler's actions run from the pipeline's ordered lists: the names say what runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scorer import ClusterState, Placer
from streams.scheduler.actions import registry
from streams.scheduler.actions.base import Pipeline
from streams.scheduler.core import Scheduler


def test_the_default_pipeline_per_trigger(world: Callable[..., Any]) -> None:
    actions = world().s.actions
    assert [a.name for a in actions.submitted] == ["route"]
    assert [a.name for a in actions.arrival] == ["defer", "place", "refuse"]
    assert [a.name for a in actions.release] == ["rooms", "backfill", "replan"]
    assert [a.name for a in actions.tick] == ["rooms", "backfill", "replan", "preempt"]


def _scheduler(actions: str) -> Scheduler:
    state = ClusterState()
    return Scheduler(
        state, Placer(state), reservations={}, queue={}, nodes={}, partitions=1, actions=actions
    )


def test_an_unknown_pipeline_or_action_names_the_known_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValueError, match=r"actions must be one of \['default'\]"):
        _scheduler("nope")
    odd = Pipeline(submitted=("route",), arrival=("place", "teleport"), release=(), tick=())
    monkeypatch.setitem(registry.PIPELINES, "odd", odd)
    with pytest.raises(ValueError, match="no arrival action 'teleport'; known: "):
        _scheduler("odd")


def test_only_the_listed_actions_decide(
    world: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without `refuse`, a job that does not fit is neither queued nor rejected: the list,
    not the scheduler, says which steps an arrival goes through."""
    default = registry.PIPELINES["default"]
    bare = Pipeline(default.submitted, ("defer", "place"), default.release, default.tick)
    monkeypatch.setitem(registry.PIPELINES, "default", bare)
    w = world()
    assert [d.record["outcome"] for d in w.submit("fits", gpu_count=8)] == ["PLACED"]
    assert w.submit("waits", gpu_count=8) == [] and "waits" not in w.s.queue
    monkeypatch.setitem(registry.PIPELINES, "default", default)
    w2 = world()
    w2.submit("fits", gpu_count=8)
    assert [d.record["outcome"] for d in w2.submit("waits", gpu_count=8)] == ["QUEUED"]
