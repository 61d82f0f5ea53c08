"""`gpuflow slurm-bridge --region R`: a Slurm cluster as a gpuflow region (docs/slurm.md)."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from gpuflow.commands.common import fail, running_config

__all__ = ["slurm_bridge"]


def slurm_bridge(
    region: Annotated[str, typer.Option(help="The region this Slurm cluster is.")],
    data_dir: Annotated[Path | None, typer.Option(help="Where `gpuflow up` keeps state.")] = None,
) -> None:
    """Publish a Slurm cluster's nodes, run gpuflow's placements in it with sbatch, report
    their states; settings in the config file's [slurm] section."""
    from agents.slurm.bridge import SlurmBridge
    from agents.slurm.errors import SlurmError

    logging.getLogger("agents.slurm").setLevel(logging.INFO)
    config = running_config(data_dir)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        bridge = SlurmBridge(config, region)
        bridge.cli.nodes()  # fail early when the cluster does not answer
        typer.echo(f"gpuflow slurm-bridge: region {region} -> {config.kafka.bootstrap_servers}")
        bridge.run(stop)
    except SlurmError as exc:
        raise fail(str(exc)) from None
