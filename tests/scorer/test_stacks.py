"""Software stacks: parsing, compatibility, the stack filter, the porting score, the router."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scorer import JobSpec, Placer, RegionView, build_filter, build_score, rank_regions
from scorer.errors import InvalidSpecError
from scorer.scores.porting import PortingScore
from scorer.stacks import Stack, node_stack, parse_stack, satisfies


def test_parse_stack() -> None:
    assert parse_stack("cuda-12.4") == Stack("cuda", (12, 4))
    assert parse_stack("ROCm-6") == Stack("rocm", (6,))
    assert parse_stack("cann") == Stack("cann")
    assert parse_stack("portable") is None and parse_stack("") is None
    with pytest.raises(InvalidSpecError, match="software_stack"):
        parse_stack("cuda 12")
    assert Stack("cuda", (12, 4)).code == 12_004_000
    assert node_stack("", "amd") == Stack("rocm")  # undeclared: the vendor's, any version


CU124, CU118, ROCM62, CANN80 = 12_004_000, 11_008_000, 6_002_000, 8_000_000


@pytest.mark.parametrize(
    ("family", "code", "sm", "job", "ok"),
    [
        ("cuda", CU124, 9.0, "cuda-12.1", True),  # newer driver runs an older build
        ("cuda", CU118, 7.0, "cuda-12.1", False),  # 11.8 < 12.1
        ("cuda", 0, 9.0, "cuda-12.1", True),  # unknown version: accepted
        ("cuda", CU124, 9.0, "cuda", True),  # any CUDA
        ("rocm", ROCM62, 0.0, "cuda-12.1", False),  # another family
        ("rocm", ROCM62, 0.0, "rocm-6.0", True),
        ("rocm", 7_000_000, 0.0, "rocm-6.0", False),  # ROCm builds keep their major
        ("cann", CANN80, 0.0, "cann-7.0", False),  # so do CANN builds
        # CUDA 10.2 wheels target up to sm_75: a T4 yes, an A100 (sm_80) no
        ("cuda", CU124, 7.5, "cuda-10.2", True),
        ("cuda", CU124, 8.0, "cuda-10.2", False),
        ("cuda", CU124, 8.0, "cuda-11.0", True),  # 11.0 added sm_80
        ("cuda", CU124, 9.0, "cuda-11.0", False),
        ("cuda", CU124, 9.0, "cuda-11.8", True),  # 11.8 added sm_90 (Hopper)
    ],
)
def test_satisfies(family: str, code: int, sm: float, job: str, ok: bool) -> None:
    wanted = parse_stack(job)
    assert wanted is not None and satisfies(family, code, wanted, sm) is ok


@pytest.fixture
def stacked(fleet, node):
    # slots: h100 cuda-12.4, k80 cuda-11.4, mi300x rocm-6.2, ascend cann-8.0, t4 undeclared
    return fleet([
        replace(node("h100", "H100"), software_stack="cuda-12.4"),
        replace(node("k80", "K80"), software_stack="cuda-11.4"),
        replace(node("mi300x", "MI300X"), software_stack="rocm-6.2"),
        replace(node("ascend", "Ascend910B"), software_stack="cann-8.0"),
        node("t4", "T4", 4),
    ])  # fmt: skip


T, F = True, False


@pytest.mark.parametrize(
    ("stack", "mask"),
    [
        ("portable", [T, T, T, T, T]),
        ("cuda", [T, T, F, F, T]),
        ("cuda-12.1", [T, F, F, F, T]),  # K80's driver stops at 11.4; T4 declares no version
        ("cuda-10.2", [F, T, F, F, T]),  # sm_75 at most: not the H100 (sm_90)
        ("rocm-6.0", [F, F, T, F, F]),
        ("cann-8.0", [F, F, F, T, F]),
        ("oneapi", [F, F, F, F, F]),  # no such node at all
    ],
)
def test_stack_filter(context, stacked, stack: str, mask: list[bool]) -> None:
    ctx = context(stacked, JobSpec("j", software_stack=stack))
    assert build_filter("software_stack").filter(ctx).tolist() == mask


def test_stack_filter_explains(context, stacked) -> None:
    f = build_filter("software_stack")
    ctx = context(stacked, JobSpec("j", software_stack="cuda-12.1"))
    assert str(f.explain(ctx, 1)) == "K80 runs cuda-11.4; the job is built for cuda-12.1"
    assert str(f.explain(ctx, 2)) == "MI300X runs rocm-6.2; the job is built for cuda-12.1"
    old = context(stacked, JobSpec("j", software_stack="cuda-10.2"))
    assert str(f.explain(old, 0)) == "H100 is sm_90; a cuda-10.2 build targets up to sm_75"
    assert f.explain(ctx, 0).ok


@pytest.mark.parametrize(
    ("stack", "scores"),
    [
        # portable: 100 - penalty (CUDA 0, ROCm 20, CANN 35); the T4 is CUDA by vendor
        ("portable", [100, 100, 80, 65, 100]),
        ("cuda", 100.0),  # built jobs only meet their own stack: no penalty to compare
    ],
)
def test_porting_score(context, stacked, stack: str, scores) -> None:
    ctx = context(stacked, JobSpec("j", software_stack=stack))
    got = build_score("porting").score(ctx, ctx.slots)
    assert np.asarray(got).tolist() == scores


def test_porting_penalties_are_configurable(context, stacked) -> None:
    ctx = context(stacked, JobSpec("j"))
    score = PortingScore({"rocm": 0, "cann": 50})
    assert np.asarray(score.score(ctx, ctx.slots)).tolist() == [100, 100, 100, 50, 100]
    with pytest.raises(ValueError, match=r"0\.\.100"):
        PortingScore({"rocm": 120})


def test_placer_respects_stacks_and_says_so(stacked) -> None:
    placer = Placer(stacked)
    rocm = placer.place(JobSpec("j", precision="FP16", software_stack="rocm-6.0"))
    assert rocm.placed and rocm.gpu_model == "MI300X"
    # a CANN build that needs FP8: only the Ascend runs CANN, and it has no FP8 (nor do the
    # K80 and T4: 3 of 5 refused for precision; the stack refusals are the job's own choice)
    refused = placer.place(JobSpec("k", precision="FP8", software_stack="cann-8.0"))
    assert not refused.placed and refused.never_fits
    assert refused.reasons[0] == "precision: Ascend910B has no native FP8 arithmetic (3 of 5 nodes)"


def view(region: str, model: str, free: int = 8, price: float = 3.0) -> RegionView:
    return RegionView(region, {model: free}, {model: free}, {model: 8}, {model: price})


def test_router_considers_only_the_jobs_stack_and_charges_porting() -> None:
    views = {"amd": view("amd", "MI300X"), "nv": view("nv", "H100")}
    built = JobSpec("j", kind="TRAINING", precision="BF16", software_stack="cuda-12.1")
    ranked = dict(rank_regions(built, views))
    assert ranked["amd"] == 0.0 and ranked["nv"] > 0  # no CUDA in "amd": listed last
    portable = JobSpec("k", kind="TRAINING", precision="BF16")
    cheap = dict(rank_regions(portable, views))
    free_port = dict(rank_regions(portable, views, porting_penalties={"rocm": 0.0}))
    # weights at p = 0.5: compute 30 + cost 22.5 + available 40 + headroom 15 + carbon 5 +
    # queue 10 + porting 10 = 132.5; ROCm's penalty of 20 costs 20 x 10 / 132.5 = 1.51 points
    assert free_port["amd"] - cheap["amd"] == pytest.approx(20 * 10 / 132.5, abs=0.01)
    assert free_port["nv"] == cheap["nv"]


def test_bad_stack_names_the_field() -> None:
    with pytest.raises(InvalidSpecError, match="software_stack"):
        JobSpec("j", software_stack="cuda_12")
