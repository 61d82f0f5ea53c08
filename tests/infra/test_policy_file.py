"""The policy file: loaded at start (a bad one stops the worker with one line), reloaded when it
changes, and a bad edit leaves the policy in force."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infra.config import load_config
from infra.errors import ConfigError
from infra.policy import PolicyFile, load_policy
from schemas import SingleObjectCodec
from scorer import ClusterState, Placer
from streams.runtime.runtime import Runtime
from streams.scheduler.core import Scheduler

REPO = Path(__file__).resolve().parents[2]


def _write(path: Path, text: str, bump: int) -> None:
    path.write_text(text)
    stamp = 1_700_000_000 + bump  # a distinct mtime even within one clock tick
    os.utime(path, (stamp, stamp))


def test_the_example_policy_parses() -> None:
    policy = load_policy(REPO / "examples" / "policy.yaml")
    assert set(policy.tenants) == {"vision", "nlp", "research", "ads", "platform", "serving",
                                   "default"}  # fmt: skip
    assert policy.gpu_class("H200") == "hopper" and policy.gpu_class("T4") == "T4"


def test_the_example_policy_names_every_tenant_of_the_demo() -> None:
    """`gpuflow up --policy examples/policy.yaml`: no demo job waits for want of a quota."""
    from agents import demo_fleet
    from agents.jobgen import generate_jobs

    fleet = demo_fleet()
    jobs = generate_jobs(500, seed=0, regions=[r.name for r in fleet.regions], fleet=fleet)
    policy = load_policy(REPO / "examples" / "policy.yaml")
    assert {j["tenant"] for j in jobs} <= set(policy.tenants)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tenants: {v: {weight: -1}}\n", "policy.yaml: tenants.v.weight: must be >= 0, got -1"),
        ("tenants: [\n", "policy.yaml: not valid YAML"),
        ("- 1\n- 2\n", "policy.yaml: policy: must be a mapping of sections"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        PolicyFile(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_reload_takes_a_good_edit_and_refuses_a_bad_one(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    _write(path, "tenants: {a: {quotas: [{nominal: 4}]}}\n", 0)
    watched = PolicyFile(path)
    assert watched.reload() is None  # unchanged
    _write(path, "tenants: {a: {quotas: [{nominal: 8}]}}\n", 1)
    new = watched.reload()
    assert new is not None and new.tenants["a"].quotas[0].nominal == 8.0
    _write(path, "tenants: {a: {quotas: [{nominal: -8}]}}\n", 2)
    assert watched.reload() is None
    assert watched.error is not None and "tenants.a.quotas[0].nominal" in watched.error
    assert watched.policy.tenants["a"].quotas[0].nominal == 8.0  # the good one stays


def test_the_worker_runtime_applies_a_reload(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    _write(path, "preemption: {grace_period_s: 60}\n", 0)
    state = ClusterState()
    scheduler = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=4)
    rt = Runtime(load_config(env={}, data_dir=str(tmp_path)), SingleObjectCodec(), scheduler)
    rt.policy = PolicyFile(path)
    scheduler.tenancy.policy = rt.policy.policy
    _write(path, "preemption: {grace_period_s: 5}\nprotection: {window_s: 10}\n", 1)
    rt.reload_policy()
    assert scheduler.tenancy.policy.preemption.grace_period_s == 5.0
    assert rt.fleet.protection.health.policy.window_s == 10.0
