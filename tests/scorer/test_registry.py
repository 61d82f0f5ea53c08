"""Registry and framework: plugins by name, custom plugins, Status helpers."""

from __future__ import annotations

import numpy as np
import pytest

from scorer import (
    FILTERS,
    SCORES,
    ClusterState,
    CycleContext,
    FilterPlugin,
    Insufficient,
    JobSpec,
    Placer,
    ScorePlugin,
    Status,
    UnknownPluginError,
    build_filter,
    build_score,
    register_score,
)


def test_every_registered_plugin_builds_and_meets_its_protocol() -> None:
    for name in FILTERS:
        plugin = build_filter(name)
        assert isinstance(plugin, FilterPlugin) and plugin.name == name
    for name in SCORES:
        scorer = build_score(name)
        assert isinstance(scorer, ScorePlugin) and scorer.name == name


@pytest.mark.parametrize("build", [build_filter, build_score])
def test_unknown_names_raise(build) -> None:
    with pytest.raises(UnknownPluginError, match="known:"):
        build("does-not-exist")


class _PreferCheap:
    name = "cheap_test"

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        return 100.0 * (ctx.state.price[slots] < 1.0)


def test_a_custom_score_plugin_steers_the_placer(fleet, node) -> None:
    register_score("cheap_test", _PreferCheap)
    try:
        state: ClusterState = fleet([node("h100", "H100"), node("t4", "T4", 4)])
        placer = Placer(state, scores=["compute", "cheap_test"], weights={"cheap_test": 500})
        assert placer.place(JobSpec("j", precision="FP16")).assignments[0].node_id == "t4"
    finally:
        SCORES.pop("cheap_test")


def test_status_helpers() -> None:
    assert Status.success().ok and str(Status.success()) == "Success"
    status = Status.unschedulable(Insufficient("gpus", 8, 3), "node cordoned")
    assert not status.ok and str(status) == "gpus: needs 8, has 3; node cordoned"
    assert str(Insufficient("host memory", 2048, 1024.5, "MiB")) == (
        "host memory: needs 2.0 GiB, has 1.0 GiB"
    )
    assert Status.unresolvable("x").code == "UnschedulableAndUnresolvable"
