"""What every command needs: config with the running stack's address, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from infra.config import Config, load_config
from infra.errors import ConfigError
from infra.signing import Signer, signer

__all__ = [
    "STACK_FILE",
    "fail",
    "running_config",
    "tenant_signer",
    "worker_url",
    "write_stack_file",
]

STACK_FILE = "stack.json"


def fail(message: str) -> typer.Exit:
    """Print one line to stderr and give the exit to raise."""
    typer.echo(f"gpuflow: {message}", err=True)
    return typer.Exit(2)


def tenant_signer(config: Config) -> Signer | None:
    """The configured tenant key (`[auth]`, GPUFLOW_AUTH_*), None without one; a bad one fails."""
    try:
        return signer(config.auth)
    except ConfigError as exc:
        raise fail(str(exc)) from None


def write_stack_file(config: Config) -> Path:
    path = config.data_dir / STACK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    info = {
        "bootstrap_servers": config.kafka.bootstrap_servers,
        "web": f"http://{config.worker.web_host}:{config.worker.web_port}",
        "region_order": config.kafka.region_order,  # agents started by hand must agree
    }
    path.write_text(json.dumps(info))
    return path


def worker_url(config: Config) -> str:
    """The running worker's web root: from `gpuflow up`'s stack file, else the configured port."""
    stack = config.data_dir / STACK_FILE
    if stack.is_file():
        try:
            return str(json.loads(stack.read_text())["web"])
        except (ValueError, KeyError):
            pass
    return f"http://{config.worker.web_host}:{config.worker.web_port}"


def running_config(data_dir: Path | None = None, **overrides: Any) -> Config:
    """Config for client commands: the configured broker, else the one `gpuflow up` started."""
    try:
        extra: dict[str, Any] = dict(overrides)
        if data_dir is not None:
            extra["data_dir"] = str(data_dir)
        config = load_config(**extra)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    if config.kafka.embedded:
        stack = config.data_dir / STACK_FILE
        if not stack.is_file():
            raise fail("no broker: run `gpuflow up` first, or set GPUFLOW_KAFKA_BOOTSTRAP_SERVERS")
        info = json.loads(stack.read_text())
        config = config.with_bootstrap(info["bootstrap_servers"])
        config = config.with_regions(r for r in info.get("region_order", "").split(",") if r)
    return config
