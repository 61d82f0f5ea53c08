"""The node agent: inventory, tiered telemetry with a fake clock, a GPU lost mid-run, /proc
readings, and the `gpuflow agent` command without a GPU or a broker."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from agents.host import HostStats, host_capacity
from agents.node import NodeAgent, NodeIdentity
from agents.nvml import NvmlReader
from agents.reader import SimulatedReader
from agents.tiers import TierPolicy
from schemas.codec import SingleObjectCodec

T0 = 1_767_225_600_000
POLICY = TierPolicy(nearline_s=15, slow_s=60, full_snapshot_s=30, heartbeat_s=5)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _ticks(agent: NodeAgent, clock: Clock, seconds: int) -> list[dict]:
    out = []
    for k in range(seconds):
        clock.t = float(k)
        out.extend(agent.tick(T0 + k * 1000))
    return out


def test_inventory_event_from_a_simulated_reader_encodes() -> None:
    ident = NodeIdentity("n1", "eu-west", "eu-west-1", "r01", "azure", 3.9, {"team": "ml"})
    agent = NodeAgent(ident, SimulatedReader("A100-80", 8), POLICY)
    inv = agent.inventory_event(T0)
    assert inv["gpu_model"] == "A100-80" and inv["gpu_count"] == 8
    assert inv["nvlink_islands"] == [list(range(8))] and inv["interconnect"] == "nvlink"
    assert inv["labels"]["team"] == "ml" and inv["cpu_milli"] > 0
    SingleObjectCodec().encode("NodeInventory", inv)


def test_simulated_agent_follows_the_tiers() -> None:
    clock = Clock()
    agent = NodeAgent(NodeIdentity("n1", "r"), SimulatedReader("H100", 4, clock=clock), POLICY)
    events = _ticks(agent, clock, 61)
    codec = SingleObjectCodec()
    for e in events:
        codec.encode("NodeTelemetry", e)
    full = [e["ts"] for e in events if e["full_snapshot"]]
    assert [(t - T0) // 1000 for t in full] == [0, 30, 60]
    tiers = [e["tier"] for e in events]
    assert tiers.count("NEARLINE") == 5 and tiers.count("SLOW") == 2  # t=0,15,30,45,60; 0,60
    slow = [e for e in events if e["tier"] == "SLOW"]
    assert slow[1]["energy_j"] > 0 and slow[1]["perf_per_watt"] > 0
    seconds = {(e["ts"] - T0) // 1000 for e in events}
    assert all(any(s - 5 <= t <= s for t in seconds) for s in range(61))  # never silent > 5 s


def test_nvml_agent_keeps_reporting_when_a_gpu_falls_off_the_bus(nv) -> None:
    gpus = nv.pairs(4)
    clock = Clock()
    agent = NodeAgent(NodeIdentity("n1", "r"), NvmlReader(nv.Nvml(gpus), clock=clock), POLICY)
    first = agent.tick(T0)
    assert len(first[0]["gpus"]) == 4
    gpus[3].lost = True
    clock.t = 1.0
    ev = agent.tick(T0 + 1000)
    realtime = next(e for e in ev if e["tier"] == "REALTIME")
    assert [g["index"] for g in realtime["gpus"]] == [3]  # only the change goes out
    assert realtime["gpus"][0]["healthy"] is False and realtime["gpus"][0]["xid_events"] == [79]
    assert realtime["node_healthy"] is True
    clock.t = 30.0
    snap = next(e for e in agent.tick(T0 + 30_000) if e["full_snapshot"])
    assert [g["healthy"] for g in snap["gpus"]] == [True, True, True, False]
    assert snap["gpus"][0]["util_pct"] == 50.0


def test_host_stats_from_proc(tmp_path: Path) -> None:
    (tmp_path / "net").mkdir()
    disk = "   8       0 sda 100 0 {r} 0 50 0 {w} 0 0 0 0\n   8       1 sda1 1 0 999999 0 1 0 9 0\n"
    net = ("Inter-|Receive\n face |bytes\n"
           "    lo: 999 0 0 0 0 0 0 0 999 0 0 0 0 0 0 0\n"
           "  eth0: {rx} 0 0 0 0 0 0 0 {tx} 0 0 0 0 0 0 0\n")  # fmt: skip
    clock = Clock()
    stats = HostStats(tmp_path, clock)
    (tmp_path / "diskstats").write_text(disk.format(r=0, w=0))
    (tmp_path / "net" / "dev").write_text(net.format(rx=0, tx=0))
    assert stats.rates() is None
    (tmp_path / "diskstats").write_text(disk.format(r=2_000_000, w=1_000_000))  # sectors
    (tmp_path / "net" / "dev").write_text(net.format(rx=50_000_000, tx=10_000_000))
    clock.t = 10.0
    rates = stats.rates()
    assert rates is not None
    assert rates.disk_read_mbps == pytest.approx(2_000_000 * 512 / 1e6 / 10, rel=1e-3)
    assert rates.net_rx_mbps == 5.0 and rates.net_tx_mbps == 1.0
    (tmp_path / "meminfo").write_text("MemTotal:       16384000 kB\n")
    assert host_capacity(tmp_path)[1] == 16000


def _app() -> typer.Typer:
    from gpuflow.commands.agent import agent

    app = typer.Typer()
    app.command()(agent)
    return app


def test_agent_without_nvml_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import agents.nvml
    from agents.errors import NvmlUnavailable

    def no_gpu() -> None:
        raise NvmlUnavailable("NVML is not available on this machine (Library Not Found)")

    monkeypatch.setattr(agents.nvml, "NvmlReader", no_gpu)
    result = CliRunner().invoke(_app(), [])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--simulate" in lines[0] and "Traceback" not in result.output


def test_agent_without_a_broker_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUFLOW_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(_app(), ["--simulate", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "gpuflow up" in result.output and "GPUFLOW_KAFKA_BOOTSTRAP_SERVERS" in result.output


@pytest.mark.integration
def test_agent_simulate_publishes(config, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFLOW_KAFKA_BOOTSTRAP_SERVERS", config.kafka.bootstrap_servers)
    result = CliRunner().invoke(_app(), ["--simulate", "--gpus", "2", "--duration", "1.5",
                                         "--node-id", "sim-1", "--hz", "4"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "sent" in result.output and "REALTIME" in result.output
