"""Quota hysteresis: re-issue only on a real change or before expiry, never over-commit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scorer.network import Hysteresis, NetworkError, QuotaLedger

H = Hysteresis(rel_change=0.1, abs_change_gbps=0.05, ttl_s=30, renew_before_s=10)
T0 = 1_000_000


def _reasons(changes: list) -> dict[tuple[str, str], str]:
    return {(c.job_id, c.link_id): c.reason for c in changes}


def test_new_then_small_change_held_then_big_change_issued() -> None:
    ledger = QuotaLedger(H)
    first = ledger.decide({("x", "l"): 10.0}, {"l": 20.0}, T0)
    assert _reasons(first) == {("x", "l"): "new"} and first[0].valid_until_ms == T0 + 30_000
    # 10 -> 10.9: |0.9| <= max(0.1 x 10, 0.05) = 1.0: held
    assert ledger.decide({("x", "l"): 10.9}, {"l": 20.0}, T0 + 1000) == []
    # 10 -> 11.2: 1.2 > 1.0: issued
    assert _reasons(ledger.decide({("x", "l"): 11.2}, {"l": 20.0}, T0 + 2000)) == {
        ("x", "l"): "change"
    }


def test_renewed_before_expiry_and_revoked_when_gone() -> None:
    ledger = QuotaLedger(H)
    ledger.decide({("x", "l"): 10.0}, {"l": 20.0}, T0)  # valid until T0 + 30 s
    assert ledger.decide({("x", "l"): 10.0}, {"l": 20.0}, T0 + 19_999) == []
    # at T0 + 20 s, 10 s remain = renew_before_s: renewed, at the current rate
    renewed = ledger.decide({("x", "l"): 10.3}, {"l": 20.0}, T0 + 20_000)
    assert _reasons(renewed) == {("x", "l"): "renew"} and renewed[0].gbps == 10.3
    gone = ledger.decide({}, {"l": 20.0}, T0 + 21_000)
    assert _reasons(gone) == {("x", "l"): "revoke"} and gone[0].gbps == 0.0
    assert ledger.issued == {}


def test_held_decrease_is_issued_when_an_increase_needs_its_room() -> None:
    ledger = QuotaLedger(H)
    ledger.decide({("x", "l"): 10.0, ("y", "l"): 5.0}, {"l": 20.0}, T0)
    # x 10 -> 9.2: 0.8 <= max(0.1 x 10, 0.05) = 1.0, alone it would be held; y 5 -> 10.8 is
    # issued. In force would be 10 + 10.8 = 20.8 > 20, so x's decrease is issued too
    out = ledger.decide({("x", "l"): 9.2, ("y", "l"): 10.8}, {"l": 20.0}, T0 + 1000)
    assert _reasons(out) == {("x", "l"): "capacity", ("y", "l"): "change"}
    assert [c.job_id for c in out] == ["x", "y"]  # the decrease first
    assert ledger.in_force("l", T0 + 1000) == pytest.approx(20.0)
    # a held increase is always safe: x 9.2 -> 9.9 stays at 9.2
    assert ledger.decide({("x", "l"): 9.9, ("y", "l"): 10.1}, {"l": 20.0}, T0 + 2000) == []


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3).map(tuple),
        min_size=1,
        max_size=25,
    ),
    st.sampled_from([5.0, 10.0, 40.0]),
)
def test_quotas_in_force_never_exceed_capacity(rounds: list[tuple[float, ...]], cap: float) -> None:
    """Any sequence of feasible targets (shares of the link adding up to <= capacity)."""
    ledger = QuotaLedger(H)
    for i, shares in enumerate(rounds):
        total = sum(shares) or 1.0
        target = {(f"j{k}", "l"): cap * s / max(total, 1.0) for k, s in enumerate(shares)}
        now = T0 + 1000 * i
        ledger.decide(target, {"l": cap}, now)
        assert ledger.in_force("l", now) <= cap * (1 + 1e-9) + 1e-9


def test_bad_hysteresis_is_refused() -> None:
    with pytest.raises(NetworkError):
        Hysteresis(ttl_s=5, renew_before_s=10)


def test_a_job_added_again_is_not_revoked_and_reissued() -> None:
    from scorer.network import BandwidthAllocator, Flow, Link, LinkGraph

    alloc = BandwidthAllocator(LinkGraph([Link("a", "b", 50, 20)]))
    ledger = QuotaLedger(H)
    flows = [Flow("x", "a", "b")]
    alloc.set_job("x", flows)
    assert [c.reason for c in ledger.decide_arrays(alloc.allocate(), T0)] == ["new"]
    alloc.set_job("x", flows)  # a repeated STARTED: nothing changes
    assert ledger.decide_arrays(alloc.allocate(), T0 + 500) == []
    alloc.remove("x")
    alloc.set_job("x", [Flow("x", "a", "b", peak_gbps=5.0)])  # moved: new index, same link
    out = ledger.decide_arrays(alloc.allocate(), T0 + 1000)
    # replaces the 19 Gbit/s in force (20 x 0.95 headroom), no revocation
    assert [(c.reason, c.gbps, c.previous_gbps) for c in out] == [("new", 5.0, 19.0)]


def test_a_shrinking_replacement_comes_before_anothers_increase() -> None:
    from scorer.network import BandwidthAllocator, Flow, Link, LinkGraph

    alloc = BandwidthAllocator(LinkGraph([Link("a", "b", 50, 20)]))  # 19 allocatable
    ledger = QuotaLedger(H)
    alloc.set_job("x", [Flow("x", "a", "b")])
    alloc.set_job("y", [Flow("y", "a", "b")])
    ledger.decide_arrays(alloc.allocate(), T0)  # 9.5 each
    alloc.remove("x")
    alloc.set_job("x", [Flow("x", "a", "b", peak_gbps=2.0)])  # moved: x 2, y 19 - 2 = 17
    out = ledger.decide_arrays(alloc.allocate(), T0 + 1000)
    # in order: x 9.5 -> 2 first (9.5 + 2 = 11.5 <= 19), then y 9.5 -> 17 (2 + 17 = 19)
    assert [(c.job_id, c.reason, c.gbps) for c in out] == [("x", "new", 2.0), ("y", "change", 17.0)]
