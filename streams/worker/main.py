"""Run a worker: the Faust app plus, when available, the history sink that owns ClickHouse."""

from __future__ import annotations

import logging
import sys

from infra.config import load_config
from infra.errors import ConfigError
from streams.worker.app import create_app

__all__ = ["main"]

log = logging.getLogger(__name__)


def main() -> None:
    try:
        config = load_config()
    except ConfigError as exc:
        print(f"gpuflow worker: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if config.kafka.embedded:
        print(
            "gpuflow worker: set GPUFLOW_KAFKA_BOOTSTRAP_SERVERS (or run `gpuflow up`)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    try:
        app, _runtime = create_app(config)
    except ConfigError as exc:
        print(f"gpuflow worker: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    from streams.worker.shutdown import GracefulWorker

    # The history sink and the consumer threads share the GIL with the event loop; a shorter
    # switch interval (default 5 ms) keeps a busy thread from stalling a decision that long.
    sys.setswitchinterval(0.001)

    sys.argv = sys.argv[:1]  # Faust's worker parses argv; ours is already applied
    GracefulWorker(
        app,
        loglevel=config.worker.log_level,
        quiet=True,
        shutdown_timeout_s=config.worker.shutdown_timeout_s,
    ).execute_from_commandline()
