"""Scoring never learns: a dry run leaves every plugin's state as it was; `Placer.observe` at
commit is the only step that changes what later placements see (issue 34, part 4)."""

from __future__ import annotations

import weakref
from dataclasses import replace
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

from scorer import Assignment, ClusterState, JobSpec, NodeSpec, Placer, default_catalog
from scorer.framework import Memo
from scorer.network import Link, LinkGraph, NetworkView
from scorer.registry import FILTERS, SCORES

MODELS = ("H100", "A100-80", "T4", "L4")


def _fleet() -> ClusterState:
    state, catalog = ClusterState(capacity=8), default_catalog()
    for i in range(16):
        model = MODELS[i % len(MODELS)]
        state.upsert_node(
            NodeSpec(
                node_id=f"n{i:02d}", region=("a", "b")[i % 2], zone=f"z{i % 3}", rack=f"k{i % 4}",
                gpu_model=model, gpu_count=8 if i % 3 else 4,
                gpu_memory_mib=catalog[model].memory_mib,
                cpu_milli=64_000 if i % 4 == 0 else 0, memory_mib=256_000 if i % 4 == 0 else 0,
            )
        )  # fmt: skip
    state.reserve("bg", [Assignment("n01", (0, 1, 2)), Assignment("n05", (0,), 400)])
    return state


def _placer(state: ClusterState, networked: bool = True) -> Placer:
    """Every registered plugin at once, so none escapes the check; with links between the
    regions, the plan plugins (communication fit) judge spread and cross-region gangs too."""
    links = [Link("a", "b", 20, 100, 0.02), Link("b", "a", 20, 100, 0.02)]
    network = NetworkView(LinkGraph(links)) if networked else None
    return Placer(state, filters=tuple(FILTERS), scores=tuple(SCORES), network=network)


JOBS = (
    JobSpec("whole", gpu_count=2, cpu_milli=4000, memory_mib=8000),
    JobSpec("share", kind="INFERENCE", params_b=1, precision="BF16", gpu_milli=300),
    JobSpec("pinned", gpu_count=1, allowed_gpu_models=("T4", "L4")),
    JobSpec(
        "gang",
        kind="TRAINING",
        params_b=7,
        precision="BF16",
        gpu_count=16,
        tensor_parallel=8,
        data_parallel=2,
    ),
    JobSpec("host", gpu_count=0, cpu_milli=2000, memory_mib=4000),
    JobSpec(
        "wide",
        kind="TRAINING",
        params_b=7,
        precision="BF16",
        gpu_count=16,
        tensor_parallel=4,
        data_parallel=4,
        cross_region_ok=True,
    ),
)


def _commit(placer: Placer, job: JobSpec) -> bool:
    result = placer.place(job)
    if result.placed:
        placer.state.reserve(job.job_id, result.assignments)
        placer.observe(job)
    return result.placed


def snapshot(value: Any, seen: set[int] | None = None) -> Any:
    """A deep, comparable copy of `value`; memos (`Memo`, `cached_property`) are left out:
    they are pure functions of the rest, filled by scoring for speed."""
    seen = set() if seen is None else seen
    if isinstance(value, Memo):
        return "<memo>"
    if value is None or isinstance(value, str | int | float | bool | np.generic):
        return value
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, weakref.ref) or (callable(value) and not hasattr(value, "__dict__")):
        return repr(type(value))
    if id(value) in seen:
        return "<cycle>"
    seen = seen | {id(value)}
    if isinstance(value, dict | MappingProxyType):
        return sorted((repr(k), snapshot(v, seen)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return [snapshot(v, seen) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(repr(v) for v in value)
    fields = dict(vars(value)) if hasattr(value, "__dict__") else {}
    for name in getattr(type(value), "__slots__", ()):
        if hasattr(value, name):
            fields[name] = getattr(value, name)
    memo = {k for k in fields if isinstance(getattr(type(value), k, None), cached_property)}
    return (type(value).__name__, sorted((k, snapshot(v, seen)) for k, v in fields.items()
                                         if k not in memo))  # fmt: skip


def _plugins(placer: Placer) -> list[Any]:
    return snapshot([*placer.filters, *placer.scores])


@pytest.mark.parametrize("networked", [True, False])
def test_a_dry_run_leaves_every_plugin_state_unchanged(networked: bool) -> None:
    placer = _placer(_fleet(), networked)
    for job in JOBS[:3]:  # some placements committed: the learned state is not empty
        assert _commit(placer, job)
    before = _plugins(placer)
    for i, job in enumerate(JOBS):
        probe = replace(job, job_id=f"dry-{i}")
        placer.place(probe)
        placer.place(probe, "a", explain=False)
        placer.options(probe)
        placer.usable(probe, "b")
    assert _plugins(placer) == before
    placer.observe(JOBS[3])  # a commit does change it: the snapshot can tell
    assert _plugins(placer) != before


def test_dry_runs_change_no_later_decision() -> None:
    dry, plain = _placer(_fleet()), _placer(_fleet())
    for n, job in enumerate(JOBS * 2):
        job = replace(job, job_id=f"{job.job_id}-{n}")
        for probe_id in ("probe-a", "probe-b"):  # scored, never placed
            dry.place(replace(job, job_id=probe_id))
            dry.options(job)
        got, want = dry.place(job), plain.place(job)
        assert got.assignments == want.assignments and got.score == want.score, job.job_id
        if got.placed:
            for placer in (dry, plain):
                placer.state.reserve(job.job_id, got.assignments)
                placer.observe(job)


def test_observe_counts_each_job_once() -> None:
    placer = _placer(_fleet())
    placer.observe(JOBS[2])
    once = _plugins(placer)
    placer.observe(JOBS[2])
    assert _plugins(placer) == once
