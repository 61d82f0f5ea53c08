"""CPU-only nodes and jobs, and a GPU model outside the catalogue, through `gpuflow replay`:
with `--catalog FILE` the model is described by the file; without, it is an opaque model with
the catalogue's defaults (V100-16's figures) and one warning line naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from gpuflow.commands.replay import replay
from scorer import default_catalog

NODES = """node_id,region,gpu_model,gpu_count,cpu_milli,memory_mib
cpu-1,r,,0,32000,131072
g-1,r,B200X,2,1000,65536
"""
# the CPU-only job asks for 8 cores: only cpu-1 has them (g-1 declares 1 core)
JOBS = """job_id,submit_s,num_gpus,duration_s,cpu_milli,memory_mib
train,0,2,3600,,
cpu-etl,0,0,1800,8000,16384
share,10,1,600,,
"""
CATALOG = """models:
  B200X: {fp32_tflops: 80, bf16_tflops: 2250, fp16_tflops: 2250, memory_gb: 180,
          memory_bandwidth_gbs: 8000, interconnect: nvlink, interconnect_gbs: 1800,
          power_w: 1000, price_per_gpu_hour: 10.0}
"""


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("replay")(replay)
    app.command("noop")(lambda: None)
    return app


def _run(tmp_path: Path, *extra: str) -> tuple[dict[str, object], list[str]]:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "jobs.csv").write_text(JOBS)
    out = tmp_path / "out"
    args = ["replay", "--nodes", str(tmp_path / "nodes.csv"), "--jobs", str(tmp_path / "jobs.csv")]
    res = CliRunner().invoke(_app(), [*args, *extra, "--out", str(out)])
    assert res.exit_code == 0, res.output
    warnings = [line for line in res.stderr.splitlines() if "warning" in line]
    return json.loads((out / "summary.json").read_text()), warnings


@pytest.mark.parametrize("with_catalog", [True, False])
def test_cpu_only_and_uncatalogued_models_round_trip(tmp_path: Path, with_catalog: bool) -> None:
    extra = []
    if with_catalog:
        (tmp_path / "catalog.yaml").write_text(CATALOG)
        extra = ["--catalog", str(tmp_path / "catalog.yaml")]
    summary, warnings = _run(tmp_path, *extra)
    # every job ran, the CPU-only one on the CPU-only node (nowhere else has 8 cores)
    assert (summary["jobs"], summary["completed"], summary["rejected"]) == (3, 3, 0)
    gpu_hours, cost = float(summary["gpu_hours"]), float(summary["cost"])  # type: ignore[arg-type]
    if with_catalog:
        assert warnings == []
        assert cost / gpu_hours == pytest.approx(10.0)  # the file's price per GPU-hour
        # B200X is far faster than the V100 the durations refer to: under 2 GPU-hours
        assert gpu_hours < 2.0
    else:
        assert len(warnings) == 1 and "'B200X'" in warnings[0] and "--catalog" in warnings[0]
        v100 = default_catalog().get("V100-16")
        assert v100 is not None
        assert cost / gpu_hours == pytest.approx(v100.price_per_gpu_hour)
        # as a V100-16: train 2 GPUs x 1 h + share 1 GPU x 600 s; the CPU-only job holds none
        assert gpu_hours == pytest.approx(2 * 1.0 + 600 / 3600)
