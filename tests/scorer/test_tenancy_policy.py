"""The tenancy policy: parsing names the bad field; classes resolve; quota admission tables."""

from __future__ import annotations

from typing import Any

import pytest

from scorer import JobSpec
from scorer.tenancy import (
    DEFAULT_CLASSES,
    PolicyError,
    QuotaRule,
    TenantPolicy,
    admit,
    allowance_left,
    borrowed,
    parse_policy,
    resolve_priority,
)

POLICY: dict[str, Any] = {
    "gpu_classes": {"hopper": ["H100", "H200"]},
    "tenants": {
        "vision": {
            "cohort": "shared",
            "quotas": [
                {"region": "eu", "gpu_class": "hopper", "nominal": 8, "borrowing_limit": 4},
                {"region": "*", "gpu_class": "*", "nominal": 2},
            ],
        },
        "nlp": {
            "cohort": "shared",
            "quotas": [{"region": "eu", "gpu_class": "hopper", "nominal": 8}],
        },
        "solo": {"quotas": [{"region": "eu", "gpu_class": "hopper", "nominal": 4}]},
    },
}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"tenants": {"v": {"quotas": [{"nominal": -1}]}}}, "tenants.v.quotas[0].nominal"),
        ({"tenants": {"v": {"quotas": [{"region": "eu"}]}}}, "tenants.v.quotas[0].nominal"),
        ({"tenants": {"v": {"weight": 0}}}, "tenants.v.weight"),
        ({"tenants": {"v": {"wieght": 1}}}, "tenants.v.wieght"),
        ({"tenants": {"v": {"quotas": [{"nominal": "lots"}]}}}, "tenants.v.quotas[0].nominal"),
        ({"tenants": ["v"]}, "tenants"),
        ({"preemption": {"grace_period_s": True}}, "preemption.grace_period_s"),
        ({"preemption": {"reclaim": "sometimes"}}, "preemption.reclaim"),
        ({"backfill": {"enabled": "yes"}}, "backfill.enabled"),
        (
            {"priority_classes": [{"name": "a", "value": 1}, {"name": "a", "value": 2}]},
            "priority_classes[1].name",
        ),
        ({"priority_classes": [{"name": "a", "value": 1.5}]}, "priority_classes[0].value"),
        ({"gpu_classes": {"x": ["H100"], "y": ["H100"]}}, "gpu_classes.y"),
        ({"quotas": {}}, "policy.quotas"),
        ({"protection": {"hbm_saturation_pct": -5}}, "protection.hbm_saturation_pct"),
    ],
)
def test_a_bad_policy_names_its_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy(raw)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ") and "\n" not in str(err.value)


def test_no_policy_is_no_quotas_and_the_built_in_classes() -> None:
    policy = parse_policy(None)
    assert not policy.quotas_enabled
    assert [c.name for c in policy.classes] == [
        "online-inference", "urgent-training", "batch", "best-effort",
    ]  # fmt: skip
    assert policy.preemption.enabled and policy.backfill.enabled


def test_the_most_specific_quota_rule_wins() -> None:
    vision = parse_policy(POLICY).tenants["vision"]
    assert vision.rule("eu", "hopper") == QuotaRule("eu", "hopper", 8.0, 4.0)
    assert vision.rule("us", "hopper") == QuotaRule("*", "*", 2.0, None)
    assert TenantPolicy("x").rule("eu", "hopper") is None


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # a named class gives its value and its default preemptibility
        ({"priority_class": "online-inference"}, ("online-inference", 1000, False, False)),
        ({"priority_class": "batch"}, ("batch", 0, True, False)),
        # no class: the highest class the integer reaches; 150 >= 100 (urgent), < 1000
        ({"priority": 150}, ("urgent-training", 150, True, False)),
        # below every class: the lowest one
        ({"priority": -500}, ("best-effort", -500, True, False)),
        # asking for protection a preemptible class does not give: requested, and granted
        # only within the tenant's allowance (the gate checks it)
        ({"priority_class": "batch", "preemptible": False}, ("batch", 0, False, True)),
        # a non-preemptible class needs no request
        (
            {"priority_class": "online-inference", "preemptible": False},
            ("online-inference", 1000, False, False),
        ),
    ],
)
def test_priority_resolution(fields: dict[str, Any], expected: tuple[Any, ...]) -> None:
    got = resolve_priority(JobSpec("j", **fields), DEFAULT_CLASSES)
    assert not isinstance(got, str)
    assert (got.class_name, got.value, got.preemptible, got.protection_requested) == expected


def test_an_unknown_class_is_a_one_line_problem() -> None:
    got = resolve_priority(JobSpec("j", priority_class="vip"), DEFAULT_CLASSES)
    assert isinstance(got, str) and got.startswith("priority_class: unknown class 'vip'")


M = 1000  # milli-GPUs per GPU


@pytest.mark.parametrize(
    ("usage", "tenant", "need", "preemptible", "ok", "borrowing", "why"),
    [
        # vision holds 6 of nominal 8: 6 + 2 = 8 <= 8, within nominal
        ({("vision", "eu", "hopper"): 6 * M}, "vision", 2, True, True, False, ""),
        # 6 + 4 = 10 > 8: borrows; own cap 8 + 4 = 12 >= 10; cohort nominal 8 + 8 = 16,
        # cohort use 6 + 0 + 4 = 10 <= 16
        ({("vision", "eu", "hopper"): 6 * M}, "vision", 4, True, True, True, ""),
        # 6 + 7 = 13 > 8 + 4 = 12: over its borrowing limit
        (
            {("vision", "eu", "hopper"): 6 * M},
            "vision",
            7,
            True,
            False,
            False,
            "borrowing limit 12",
        ),
        # cohort full: vision 10 + 2 = 12 <= 12, but the cohort 15 + 2 = 17 > 8 + 8
        (
            {("vision", "eu", "hopper"): 10 * M, ("nlp", "eu", "hopper"): 5 * M},
            "vision",
            2,
            True,
            False,
            False,
            "nothing left to lend",
        ),
        # non-preemptible work never borrows: 6 + 4 = 10 > 8
        ({("vision", "eu", "hopper"): 6 * M}, "vision", 4, False, False, False, "within nominal"),
        # no cohort, no borrowing: solo 4 + 1 > 4
        ({("solo", "eu", "hopper"): 4 * M}, "solo", 1, True, False, False, "in no cohort"),
        # a tenant the policy does not list waits
        ({}, "ghost", 1, True, False, False, "has no quota"),
        # a share counts its fraction: 7.75 + 0.25 = 8 <= 8
        ({("vision", "eu", "hopper"): 7750}, "vision", 0.25, True, True, False, ""),
    ],
)
def test_quota_admission(
    usage: dict[Any, int], tenant: str, need: float, preemptible: bool, ok: bool,
    borrowing: bool, why: str,
) -> None:  # fmt: skip
    policy = parse_policy(POLICY)
    got = admit(policy, usage, tenant, "eu", "hopper", round(need * M), preemptible=preemptible)
    assert (got.ok, got.borrowing) == (ok, borrowing)
    assert why in got.reason and (got.reason.startswith("quota: ") or ok)


def test_borrowed_and_allowance() -> None:
    policy = parse_policy(
        {
            **POLICY,
            "tenants": {
                **POLICY["tenants"],
                "nlp": {"cohort": "shared", "non_preemptible_gpus": 3},
            },
        }
    )
    usage = {("vision", "eu", "hopper"): 11 * M}
    assert borrowed(policy, usage, "vision", "eu", "hopper") == 3 * M  # 11 - 8
    assert borrowed(policy, usage, "vision", "us", "hopper") == 0
    assert allowance_left(policy, {("nlp", "eu"): 1 * M}, "nlp", "eu") == 2 * M  # 3 - 1
    assert allowance_left(policy, {}, "vision", "eu") is None  # no cap beyond nominal


def test_without_quotas_everything_is_admitted() -> None:
    policy = parse_policy({})
    assert admit(policy, {}, "anyone", "eu", "H100", 64 * M).ok
