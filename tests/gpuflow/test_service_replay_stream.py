"""Two engines, one answer for services: the stream engine (the embedded broker and a real
worker on its event clock, its autoscaler asked for each look) scales like the in-process
service replay, minute by minute, and reports the same figures.

No tolerance is needed: the replay runs in lockstep on the event clock, so each look of the
worker's autoscaler sees exactly the rates, replicas and free/reclaimable GPUs the in-process
look sees, and both act on one plan (`scorer.services.plan_look`). A difference is a bug."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from agents.replay.service_fleet import FleetZone
from agents.replay.service_scalers import GpuflowScaler
from agents.replay.services import replay_services
from gpuflow.cli import app
from gpuflow.replay.service_stream import replay_services_stream
from scorer.services import ServiceSpec, parse_service

MINUTES, WARMUP = 40, 5
BASE = {
    "params_b": 1, "precision": "FP16", "gpus_per_replica": 1, "batch": 8, "context": 1024,
    "capacity_rps": {"H100": 100}, "min_replicas": 2, "max_replicas": 12, "regions": ["r1"],
    "max_zone_share": 0.5, "headroom": 0.15, "warm_pool": 1, "warm_share": 0.25,
    "service_ms": 20, "slo_p99_ms": 200, "scale_in_after_s": 300, "model_load_s": 60,
    "cold_start_s": 120,
}  # fmt: skip
# two zones of r1 and a small one in r2; training wants 50-60 % of each (COLD starts happen)
ZONES = (
    FleetZone("r1", "a", "H100", 16, 0.6),
    FleetZone("r1", "b", "H100", 16, 0.6),
    FleetZone("r2", "c", "H100", 8, 0.5),
)


def _world() -> tuple[list[ServiceSpec], dict[str, np.ndarray]]:
    """chat: a burst x3.5 at minutes 12..24 (scale-out through every tier, then scale-in
    after the hysteresis); code: a steady ramp over two regions (standbys step in)."""
    specs = [
        parse_service({**BASE, "name": "chat"}),
        parse_service({**BASE, "name": "code", "regions": ["r1", "r2"]}),
    ]
    t = np.arange(MINUTES)
    rates = {
        "chat": np.where((t >= 12) & (t < 25), 700.0, 200.0) + 5.0 * np.sin(t),
        "code": 150.0 + 15.0 * t,
    }
    return specs, rates


@pytest.mark.integration
@pytest.mark.timeout(150)
def test_stream_engine_scales_services_like_the_inprocess_engine() -> None:
    specs, rates = _world()
    fast, fast_share = replay_services(specs, rates, ZONES, GpuflowScaler(), warmup=WARMUP)
    started = time.monotonic()
    slow, slow_share = replay_services_stream(specs, rates, ZONES, warmup=WARMUP)
    took = time.monotonic() - started
    for a, b in zip(fast, slow, strict=True):
        assert len(b.looks) == MINUTES, b.looks
        for here, there in zip(a.looks, b.looks, strict=True):  # per minute: wanted, grants
            assert here == there, (here, there)
        assert a.p99_ms == b.p99_ms
        assert (a.minutes_within_slo, a.gpu_hours, a.utilisation, a.utilisation_held) == (
            b.minutes_within_slo, b.gpu_hours, b.utilisation, b.utilisation_held
        )  # fmt: skip
        assert dict(a.starts_by_tier) == dict(b.starts_by_tier)
        assert (a.warm_refills, a.degraded_minutes, a.peak_replicas) == (
            b.warm_refills, b.degraded_minutes, b.peak_replicas
        )  # fmt: skip
        assert dict(a.replica_minutes_by_zone) == dict(b.replica_minutes_by_zone)
    assert fast_share == slow_share
    # the trace exercises what is compared: every start tier, and a scale-in through cancels
    chat = fast[0]
    assert all(chat.starts_by_tier[t] > 0 for t in ("WARM", "NEIGHBOUR", "COLD")), chat
    assert any(look.stopped > 0 for look in chat.looks)
    assert fast[1].replica_minutes_by_zone.get("c", 0) > 0  # code spread into r2 too
    assert took < 120, f"the stream engine took {took:.0f} s"


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_gpuflow_replay_services_engine_stream_writes_what_inprocess_writes(tmp_path: Path) -> None:
    """The command line: `gpuflow replay --services --requests --engine stream`."""
    trace = tmp_path / "requests.csv"
    trace.write_text(
        "minute,service,rps\n" + "".join(f"{m},chat,{150 + 40 * m}\n" for m in range(12))
    )
    zones = tmp_path / "zones.csv"
    zones.write_text(
        "region,zone,gpu_model,gpus,training_share\nr1,a,H100,8,0.5\nr1,b,H100,8,0.5\n"
    )
    svc = tmp_path / "chat.yaml"
    svc.write_text(yaml.safe_dump({**BASE, "name": "chat"}))
    rows = {}
    for engine in ("inprocess", "stream"):
        out = tmp_path / engine
        args = ["replay", "--services", str(svc), "--requests", str(trace), "--zones", str(zones)]
        args += ["--warmup", "2", "--scaler", "gpuflow", "--engine", engine, "--out", str(out)]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        (rows[engine],) = json.loads((out / "services.json").read_text())
    assert rows["stream"] == rows["inprocess"]
    assert rows["stream"]["minutes"] == 10 and rows["stream"]["starts_by_tier"]["WARM"] > 0
