"""Throughput: measured Gavel table first, roofline otherwise; per-GPU memory needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from scorer import CatalogError, JobSpec, ThroughputModel, load_gavel_csv

RESNET = "ResNet-50 (batch size 64)"


def test_gavel_table_loads_all_rows(gavel: ThroughputModel) -> None:
    assert len(gavel.measured) == 492  # every row of the file
    assert gavel.knows(RESNET) and not gavel.knows("nope")
    assert gavel.steps_per_s(RESNET, "v100") == gavel.measured[(RESNET, "V100-16", 1, True)]


def test_measured_speed_is_relative_to_v100(gavel: ThroughputModel) -> None:
    job = JobSpec("j", job_type=RESNET)
    k80 = gavel.measured[(RESNET, "K80", 1, True)]
    v100 = gavel.measured[(RESNET, "V100-16", 1, True)]
    assert gavel.relative_speed(job, "V100-16") == pytest.approx(1.0)
    assert gavel.relative_speed(job, "K80") == pytest.approx(k80 / v100)


def test_ranking_differs_by_job_type(gavel: ThroughputModel) -> None:
    # the README's example: the recommendation model at batch 1024 is faster on P100 than V100
    rec = JobSpec("r", job_type="Recommendation (batch size 1024)")
    res = JobSpec("s", job_type=RESNET)
    assert gavel.relative_speed(rec, "P100") > gavel.relative_speed(rec, "V100-16")
    assert gavel.relative_speed(res, "P100") < gavel.relative_speed(res, "V100-16")


def test_measured_zero_means_cannot_run(gavel: ThroughputModel) -> None:
    job = JobSpec("j", job_type="ResNet-50 (batch size 128)", gpu_count=2)
    assert gavel.relative_speed(job, "K80") == 0.0


def test_unmeasured_model_is_scaled_by_roofline_from_a_measured_one(
    gavel: ThroughputModel,
) -> None:
    # H100 is not in Gavel: V100 measured x (H100 fp32 67 / V100 fp32 15.7) = 4.27
    job = JobSpec("j", job_type=RESNET)
    assert gavel.relative_speed(job, "H100") == pytest.approx(67 / 15.7)


def test_gang_scale_factor_and_spread(gavel: ThroughputModel) -> None:
    # scale 4 consolidated vs spread are separate measurements
    job = JobSpec("j", job_type="ResNet-18 (batch size 64)", gpu_count=4)
    one_node = gavel.steps_per_s(job.job_type, "V100-16", 4, True)
    spread = gavel.steps_per_s(job.job_type, "V100-16", 4, False)
    assert one_node and spread and one_node >= spread
    # 16 GPUs are not measured: scale 8 x 16 / 8
    assert gavel.steps_per_s(job.job_type, "V100-16", 16) == pytest.approx(
        gavel.measured[(job.job_type, "V100-16", 8, True)] * 2
    )


def test_a_spread_gang_is_slower_than_the_same_gang_on_one_node(gavel: ThroughputModel) -> None:
    # both are measured against the reference on one node, so the spread cost stays visible
    job = JobSpec("j", job_type="ResNet-18 (batch size 64)", gpu_count=4)
    one_node = gavel.measured[(job.job_type, "V100-16", 4, True)]
    spread = gavel.measured[(job.job_type, "V100-16", 4, False)]
    assert spread < one_node
    assert gavel.relative_speed(job, "V100-16") == pytest.approx(1.0)
    assert gavel.relative_speed(job, "V100-16", consolidated=False) == pytest.approx(
        spread / one_node
    )


@pytest.mark.parametrize(
    ("kind", "precision", "model", "expected"),
    [
        ("TRAINING", "BF16", "H100", 989.5 / 125),  # compute: H100 bf16 / V100 fp16 (fallback)
        ("TRAINING", "FP32", "A100-80", 19.5 / 15.7),  # fp32 vs fp32
        ("INFERENCE", "FP16", "H200", 4800 / 900),  # decode: memory bandwidth ratio
        ("TRAINING", "FP8", "A100-80", 0.0),  # no FP8 on Ampere
        ("NOTEBOOK", "FP16", "V100-16", 1.0),
    ],
)
def test_roofline_ratios(kind: str, precision: str, model: str, expected: float) -> None:
    job = JobSpec("j", kind=kind, precision=precision, params_b=7)
    assert ThroughputModel().relative_speed(job, model) == pytest.approx(expected)


def test_reference_gpu_can_be_chosen_per_job() -> None:
    job = JobSpec("j", kind="INFERENCE", precision="FP16", reference_gpu_model="H100")
    assert ThroughputModel().relative_speed(job, "H200") == pytest.approx(4800 / 3350)


def test_expected_duration_from_reference_duration_or_steps(gavel: ThroughputModel) -> None:
    job = JobSpec("j", job_type=RESNET, expected_duration_s=3600)
    assert gavel.expected_duration_s(job, "V100-16", 0.5) == pytest.approx(7200)
    steps = JobSpec("k", job_type=RESNET, total_steps=1000)
    v100 = gavel.measured[(RESNET, "V100-16", 1, True)]
    assert gavel.expected_duration_s(steps, "V100-16", 1.0) == pytest.approx(1000 / v100)
    assert gavel.expected_duration_s(job, "K80", 0.0) is None


def test_bad_csv_raises_catalog_error(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_type,gpu_type\nx,k80\n")
    with pytest.raises(CatalogError):
        load_gavel_csv(path)
    with pytest.raises(CatalogError):
        load_gavel_csv(tmp_path / "absent.csv")
