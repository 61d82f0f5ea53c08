"""`gpuflow up`'s closing table: placements, utilisation and the verdict per region and model."""

from __future__ import annotations

from rich.console import Console

from gpuflow.usage import UsageTally, fleet_gpus, usage_table, verdict


def placed(job: str, region: str, model: str, gpus: int, duration: float) -> dict:
    return {"job_id": job, "outcome": "PLACED", "region": region, "gpu_model": model,
            "assignments": [{"node_id": "n", "gpu_indices": list(range(gpus)), "gpu_milli": 1000}],
            "expected_duration_s": duration}  # fmt: skip


def test_utilisation_counts_held_gpu_time_until_now() -> None:
    tally = UsageTally(time_scale=0.5, started=0.0)
    tally.on_decision(placed("a", "eu", "H100", 8, 100.0), now=10.0)  # held 10 -> 60 (100 x 0.5)
    tally.on_decision(placed("a", "eu", "H100", 8, 100.0), now=11.0)  # a duplicate: ignored
    tally.on_decision(placed("b", "us", "T4", 1, 1000.0), now=20.0)  # held 20 -> 520
    tally.on_decision({"job_id": "c", "outcome": "QUEUED"}, now=30.0)
    # at t = 100: H100 8 GPUs x 50 s = 400 GPU-s; T4 1 x 80 s = 80
    assert tally.busy_gpu_s(100.0) == {("eu", "H100"): 400.0, ("us", "T4"): 80.0}
    assert tally.busy_now(100.0) == {("us", "T4"): 1.0}
    gpus = fleet_gpus([{"region": "eu", "gpu_model": "H100", "gpu_count": 8},
                       {"region": "eu", "gpu_model": "H100", "gpu_count": 8},
                       {"region": "us", "gpu_model": "T4", "gpu_count": 4},
                       {"region": "us", "gpu_model": "K80", "gpu_count": 8}])  # fmt: skip
    console = Console(record=True, width=120)
    console.print(usage_table(tally, gpus, now=100.0))
    text = console.export_text()
    # eu H100: 400 GPU-s / (16 GPUs x 100 s) = 25 %; us T4: 80 / 400 = 20 %; us all: 80 / 1200
    assert "│ eu     │ H100      │ 16   │ 1      │ 50 %  │ 25 % │ 0        │" in text
    assert "│ us     │ T4        │ 4    │ 1      │ 50 %  │ 20 % │ 1        │" in text
    assert "│ us     │ all       │ 12   │ 1      │ 50 %  │ 7 %  │ 1        │" in text
    assert verdict(tally, gpus) == "largest region: eu with 50 % of 2 placements; no job on K80"
