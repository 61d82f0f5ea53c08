"""`gpuflow agent`: the node agent. Real GPUs through NVML, or `--simulate` for a twin."""

from __future__ import annotations

import logging
import signal
import socket
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from agents.errors import AgentError, NvmlUnavailable
from agents.node import NodeAgent, NodeIdentity, run_agent
from agents.reader import GpuReader, SimulatedReader
from agents.spec import load_fleet
from agents.tiers import TierPolicy
from gpuflow.commands.common import fail, running_config

__all__ = ["agent"]

log = logging.getLogger(__name__)
_HOST = socket.gethostname()


def _reader(simulate: bool, model: str, gpus: int, seed: int) -> GpuReader:
    if simulate:
        return SimulatedReader(model, gpus, seed=seed)
    from agents.nvml import NvmlReader

    try:
        return NvmlReader()
    except NvmlUnavailable as exc:
        raise fail(f"{exc}; run with --simulate to publish a simulated node instead") from None


def agent(
    node_id: Annotated[str, typer.Option(help="Node id (default: host name).")] = _HOST,
    region: Annotated[str, typer.Option(help="Region of this node.")] = "local",
    zone: Annotated[str, typer.Option(help="Availability zone.")] = "",
    rack: Annotated[str, typer.Option(help="Rack / top-of-rack switch.")] = "",
    cloud: Annotated[str, typer.Option(help="Cloud or site operating the node.")] = "",
    price: Annotated[float, typer.Option(min=0.0, help="Price per GPU-hour, USD.")] = 0.0,
    simulate: Annotated[bool, typer.Option(help="Publish a simulated node (no GPU).")] = False,
    gpu_model: Annotated[str, typer.Option(help="Simulated GPU model.")] = "H100",
    gpus: Annotated[int, typer.Option(min=1, max=64, help="Simulated GPUs.")] = 8,
    seed: Annotated[int, typer.Option(help="Seed of the simulated node.")] = 0,
    hz: Annotated[float, typer.Option(min=0.1, help="Real-time readings per second.")] = 1.0,
    tiers: Annotated[
        Path | None, typer.Option(help="Fleet YAML whose `tiers:` section sets cadence.")
    ] = None,
    duration: Annotated[float | None, typer.Option(help="Stop after this many seconds.")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Where `gpuflow up` keeps state.")] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Also run the jobs placed here (node executor).")
    ] = False,
    state_dir: Annotated[
        Path | None, typer.Option(help="Executor journal (default: DATA_DIR/executor/NODE).")
    ] = None,
    checkpoint_root: Annotated[
        Path | None,
        typer.Option(help="Jobs' checkpoint dirs, reachable by every node (DATA_DIR/checkpoints)."),
    ] = None,
    grace: Annotated[
        float,
        typer.Option(min=0.0, help="Checkpoint grace when neither job nor decision sets one."),
    ] = 30.0,
) -> None:
    """Publish this node's inventory and tiered GPU telemetry to the configured broker; with
    --execute, also carry out the placements for this node (docs/agents.md)."""
    reader = _reader(simulate, gpu_model, gpus, seed)
    try:
        config = running_config(data_dir)
        policy = load_fleet(tiers).tiers if tiers else TierPolicy()
        identity = NodeIdentity(node_id, region, zone, rack, cloud, price)
        node = NodeAgent(identity, reader, policy)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        typer.echo(f"gpuflow agent: node {node_id} ({len(node.gpus.gpus)} x "
                   f"{node.gpus.gpus[0].model}) -> {config.kafka.bootstrap_servers}")  # fmt: skip
        thread = (
            _spawn_executor(config, node, stop, state_dir, checkpoint_root, grace)
            if execute
            else None
        )
        try:
            stats = _run(config, node, hz, stop, duration)
        finally:
            stop.set()
            if thread is not None:
                thread.join(15)
    except AgentError as exc:
        raise fail(str(exc)) from None
    finally:
        reader.close()
    typer.echo(f"gpuflow agent: sent {stats.events} events ({stats.by_tier})")


def _spawn_executor(
    config: Any,
    node: NodeAgent,
    stop: threading.Event,
    state_dir: Path | None,
    checkpoint_root: Path | None,
    grace: float,
) -> threading.Thread:
    """The node executor in a thread beside the telemetry; SIGTERM stops both."""
    from agents.execution import ExecutorSettings, NodeExecutor
    from agents.execution.task import Timing
    from agents.models import physics

    node_id = node.identity.node_id
    settings = ExecutorSettings(
        node_ids=(node_id,),
        state_dir=state_dir or Path(config.data_dir) / "executor" / node_id,
        checkpoint_root=checkpoint_root or Path(config.data_dir) / "checkpoints",
        vendor=physics(node.gpus.gpus[0].model).vendor,
        timing=Timing(default_grace_s=grace),
    )
    executor = NodeExecutor(config, settings)
    thread = threading.Thread(target=executor.run, args=(stop,), name="executor", daemon=True)
    thread.start()
    typer.echo(
        f"gpuflow agent: executing placements for {node_id} "
        f"(journal {settings.state_dir}, checkpoints {settings.checkpoint_root})"
    )
    return thread


def _run(config: Any, node: NodeAgent, hz: float, stop: threading.Event,
         duration: float | None) -> Any:  # fmt: skip
    try:
        return run_agent(config, node, hz=hz, stop=stop, duration_s=duration)
    except KeyboardInterrupt:
        stop.set()
        raise typer.Exit(0) from None
