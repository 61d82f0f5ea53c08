"""The `gpuflow` command: run the embedded stack, submit jobs, watch decisions, list topics.

Errors a user can fix (bad flag, bad job spec, no broker) print one line and exit 2.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gpuflow.commands.jobs import submit, topics, watch
from gpuflow.commands.up import up
from scorer.errors import GpuflowError

__all__ = ["app", "main"]

app = typer.Typer(
    name="gpuflow",
    help="Event-streaming scheduler matching AI workloads to heterogeneous GPUs across regions.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
err = Console(stderr=True)

app.command("up")(up)
app.command("submit")(submit)
app.command("watch")(watch)
app.command("topics")(topics)


@app.command("worker")
def worker(
    config: Annotated[Path | None, typer.Option(help="gpuflow.toml to use.")] = None,
) -> None:
    """Run one stream-processing worker in the foreground (needs a broker)."""
    import os

    if config is not None:
        os.environ["GPUFLOW_CONFIG"] = str(config)
    from streams.worker import main as worker_main

    worker_main()


def _optional_commands() -> None:
    # Commands whose modules pull heavier dependencies register themselves when present.
    try:
        from gpuflow.commands.agent import agent

        app.command("agent")(agent)
    except ImportError as exc:  # pragma: no cover - only when the module is absent
        logging.getLogger(__name__).debug("agent command unavailable: %s", exc)
    try:
        from gpuflow.commands.sql import sql

        app.command("sql")(sql)
    except ImportError as exc:  # pragma: no cover
        logging.getLogger(__name__).debug("sql command unavailable: %s", exc)


_optional_commands()


def main() -> None:
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    try:
        app()
    except GpuflowError as exc:
        err.print(f"[red]gpuflow:[/red] {exc}", highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
