"""Proactive protection windows: an advisory, then a move off and a cordon, then recovery."""

from __future__ import annotations

from scorer.protection import ADVISE, EVACUATE, UNCORDON, NodeHealth, ProtectionPolicy

POLICY = ProtectionPolicy(
    window_s=60, evacuate_after_s=120, error_window_s=600, uncordon_after_s=300
)


def gpu(index: int, bw: float, *, ecc: int = 0, xids: tuple[int, ...] = ()) -> dict:
    return {"index": index, "mem_bw_util_pct": bw, "ecc_errors": ecc, "xid_events": list(xids)}


def test_sustained_hbm_saturation_advises_then_cordons_then_recovers() -> None:
    h = NodeHealth(POLICY)
    seen = []
    # one sample every 10 s at 90 % on GPU 1 (GPU 0 idle): the node's level is its busiest GPU
    for t in range(0, 400, 10):
        for action in h.observe("n", t * 1000, [gpu(0, 10.0), gpu(1, 90.0)]):
            seen.append((t, action.action, action.reason))
    # the 60 s window is covered at t = 54+ -> first sample past it at 60: advisory; 120 s
    # later, still saturated: cordon
    assert seen == [(60, ADVISE, "HBM_SATURATION"), (180, EVACUATE, "HBM_SATURATION")]
    assert h.cordoned() == {"n": "HBM_SATURATION"}
    # at 400 GPU 1 drops to 10 %: the window (340..400) averages (6 x 90 + 10) / 7 = 78.6 < 85,
    # clean; the last saturated sample was 390, so 300 s clean lift the cordon at 690
    later = []
    for t in range(400, 900, 10):
        later += [(t, a.action) for a in h.observe("n", t * 1000, [gpu(1, 10.0)])]
    assert later == [(690, UNCORDON)]
    assert h.cordoned() == {}


def test_a_short_spike_is_not_saturation() -> None:
    h = NodeHealth(POLICY)
    out = []
    for t in range(0, 300, 10):
        bw = 99.0 if 100 <= t < 130 else 20.0  # 30 s at 99 %: the 60 s mean stays low
        out += h.observe("n", t * 1000, [gpu(0, bw)])
    assert out == []


def test_errors_advise_once_and_a_repeat_cordons() -> None:
    h = NodeHealth(POLICY)
    assert h.observe("n", 0, [gpu(0, 0, ecc=0)]) == []  # first sight: the count is a baseline
    [advice] = h.observe("n", 10_000, [gpu(0, 0, ecc=1)])  # the uncorrected count went up
    assert (advice.action, advice.reason) == (ADVISE, "GPU_ERRORS")
    assert h.observe("n", 20_000, [gpu(0, 0, ecc=1)]) == []  # no new error
    # a critical XID within the error window: second error -> cordon
    [cordon] = h.observe("n", 30_000, [gpu(0, 0, ecc=1, xids=(79,))])
    assert (cordon.action, cordon.reason) == (EVACUATE, "GPU_ERRORS")
    # XIDs outside NVIDIA's critical list are not errors here
    h2 = NodeHealth(POLICY)
    assert h2.observe("m", 0, [gpu(0, 0, xids=(13,))]) == []


def test_disabled_does_nothing() -> None:
    h = NodeHealth(ProtectionPolicy(enabled=False))
    assert h.observe("n", 0, [gpu(0, 100, ecc=5, xids=(79,))]) == []
