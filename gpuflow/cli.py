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

from gpuflow.commands.agent import agent
from gpuflow.commands.deploy import create_topics
from gpuflow.commands.forecast import forecast
from gpuflow.commands.generate import generate
from gpuflow.commands.jobs import submit, topics, watch
from gpuflow.commands.lifecycle import cancel, jobs, status
from gpuflow.commands.logs import logs
from gpuflow.commands.queue import policy, queue
from gpuflow.commands.replay import replay
from gpuflow.commands.schemas_cmd import schemas_command
from gpuflow.commands.serve import serve, services
from gpuflow.commands.slurm import slurm_bridge
from gpuflow.commands.sql import sql
from gpuflow.commands.top import top
from gpuflow.commands.up import up
from gpuflow_errors import GpuflowError

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
app.command("submit", context_settings={"ignore_unknown_options": True})(submit)
app.command("watch")(watch)
app.command("logs")(logs)
app.command("topics")(topics)
app.command("agent")(agent)
app.command("sql")(sql)
app.command("replay")(replay)
app.command("queue")(queue)
app.command("cancel")(cancel)
app.command("jobs")(jobs)
app.command("status")(status)
app.command("policy")(policy)
app.command("forecast")(forecast)
app.command("top")(top)
app.command("schemas")(schemas_command)
app.command("create-topics")(create_topics)
app.command("generate")(generate)
app.command("serve")(serve)
app.command("services")(services)
app.command("slurm-bridge")(slurm_bridge)


@app.command("worker")
def worker(
    config: Annotated[Path | None, typer.Option(help="gpuflow.toml to use.")] = None,
) -> None:
    """Run one stream-processing worker in the foreground (needs a broker)."""
    import os

    if config is not None:
        os.environ["GPUFLOW_CONFIG"] = str(config)
    from streams.worker.main import main as worker_main

    worker_main()


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
