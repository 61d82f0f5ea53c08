"""`gpuflow create-topics`: create gpuflow's topics on a Kafka cluster (the deployment's Job)."""

from __future__ import annotations

from typing import Annotated

import typer

from gpuflow.commands.common import fail
from infra.config import load_config
from infra.errors import ConfigError, InfraError
from infra.kafka import ensure_topics
from infra.topics import TOPICS

__all__ = ["create_topics"]


def create_topics(
    timeout: Annotated[
        float, typer.Option(min=1.0, help="Seconds to wait for the cluster.")
    ] = 60.0,
) -> None:
    """Create missing topics with the configured partitions and replication; list what exists."""
    try:
        config = load_config()
    except ConfigError as exc:
        raise fail(str(exc)) from None
    if config.kafka.embedded:
        raise fail("set GPUFLOW_KAFKA_BOOTSTRAP_SERVERS: create-topics talks to a Kafka cluster")
    try:
        created = ensure_topics(config.kafka, timeout_s=timeout)
    except InfraError as exc:
        raise fail(str(exc)) from None
    kafka = config.kafka
    for spec in TOPICS:
        state = "created" if spec.name in created else "exists"
        typer.echo(f"{state:8} {spec.name} partitions={kafka.partitions} "
                   f"replication={kafka.replication_factor}")  # fmt: skip
