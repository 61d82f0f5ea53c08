"""The capability catalogue: 14 models, vendor figures, aliases, precision support, overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scorer import CatalogError, default_catalog, load_catalog

NAMES = (
    "K80", "P100", "V100-16", "V100-32", "T4", "A10G", "L4", "L40S",
    "A100-40", "A100-80", "H100", "H200", "Ascend910B", "MI300X",
)  # fmt: skip


def test_catalogue_holds_the_fourteen_models() -> None:
    assert set(NAMES) <= set(default_catalog().names)
    assert len(default_catalog()) >= 14


@pytest.mark.parametrize(
    ("alias", "name"), [("k80", "K80"), ("p100", "P100"), ("v100", "V100-16"), ("H100", "H100")]
)
def test_gavel_names_map_to_catalogue_names(alias: str, name: str) -> None:
    assert default_catalog().canonical(alias) == name
    assert default_catalog()[alias].name == name


@pytest.mark.parametrize("name", NAMES)
def test_every_model_has_the_figures_the_scores_need(name: str) -> None:
    spec = default_catalog()[name]
    assert spec.fp32_tflops > 0
    assert spec.memory_gb > 0 and spec.memory_bandwidth_gbs > 0
    assert spec.power_w > 0 and spec.price_per_gpu_hour > 0 and spec.interconnect_gbs > 0


FP8 = {"H100", "H200", "L40S", "L4", "MI300X"}
NO_BF16 = {"K80", "P100", "V100-16", "V100-32", "T4"}


@pytest.mark.parametrize("name", NAMES)
def test_precision_support_follows_the_architecture(name: str) -> None:
    spec = default_catalog()[name]
    assert spec.supports("FP8") == (name in FP8)
    assert spec.fp8 == (name in FP8)
    assert spec.supports("BF16") == (name not in NO_BF16)


@pytest.mark.parametrize(
    ("name", "mib"), [("A100-40", 40960), ("A100-80", 81920), ("H100", 81920), ("T4", 16384)]
)
def test_memory_in_mib_matches_what_nvml_shows(name: str, mib: int) -> None:
    assert default_catalog()[name].memory_mib == mib


def test_mig_and_flash_attention_flags() -> None:
    cat = default_catalog()
    assert cat["A100-80"].mig and cat["H100"].mig and not cat["V100-16"].mig
    assert cat["H100"].flash_attention and not cat["K80"].flash_attention


def test_load_catalog_from_json_overrides_and_adds(tmp_path: Path) -> None:
    path = tmp_path / "cat.json"
    b200 = {"fp32_tflops": 80, "fp8_tflops": 4500}
    models = {"H100": {"price_per_gpu_hour": 2.5}, "B200": b200}
    doc = {"models": models, "aliases": {"b200": "B200"}}
    path.write_text(json.dumps(doc))
    cat = load_catalog(path)
    assert cat["H100"].price_per_gpu_hour == 2.5
    assert cat["H100"].bf16_tflops == default_catalog()["H100"].bf16_tflops  # untouched fields
    assert cat["b200"].fp8
    assert default_catalog()["H100"].price_per_gpu_hour != 2.5  # the default stays as it was


def test_load_catalog_from_yaml_list(tmp_path: Path) -> None:
    path = tmp_path / "cat.yaml"
    path.write_text("models:\n  - name: Gaudi3\n    vendor: intel\n    bf16_tflops: 1835\n")
    assert load_catalog(path)["Gaudi3"].supports("BF16")


@pytest.mark.parametrize(
    "text", ["models: {H100: {warp_speed: 9}}", "- just a list", "models: {H100: 3}"]
)
def test_malformed_catalogues_raise_catalog_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(CatalogError):
        load_catalog(path)


def test_missing_catalogue_file_raises_catalog_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError):
        load_catalog(tmp_path / "absent.yaml")
