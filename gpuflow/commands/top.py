"""`gpuflow top`: a live view of the running stack, refreshed every second; Ctrl-C leaves."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated

import httpx
import typer
from rich.console import Console, RenderableType
from rich.live import Live

from gpuflow.commands.common import fail, running_config, worker_url
from gpuflow.top_view import Pages, render_top

__all__ = ["PAGES", "fetch_pages", "top"]

PAGES = ("state", "metrics", "activity")


def fetch_pages(base_url: str, client: httpx.Client) -> Pages:
    """The worker's JSON pages top reads; raises httpx.HTTPError when one cannot be had."""
    out = {}
    for name in PAGES:
        resp = client.get(f"{base_url}/{name}/")
        resp.raise_for_status()
        out[name] = resp.json()
    return out


def top(
    interval: Annotated[float, typer.Option(min=0.1, help="Seconds between refreshes.")] = 1.0,
    once: Annotated[bool, typer.Option("--once", help="Print one frame and exit.")] = False,
    rows: Annotated[int, typer.Option(min=0, help="Last decisions shown.")] = 8,
    data_dir: Annotated[Path, typer.Option(help="Where `gpuflow up` runs.")] = Path("gpuflow-data"),
) -> None:
    """Live view: GPUs by region and model, queues, decisions/s, last decisions, lag."""
    url = worker_url(running_config(data_dir))
    console = Console()
    with httpx.Client(timeout=httpx.Timeout(2.0)) as client:
        if once:
            try:
                pages = fetch_pages(url, client)
            except (httpx.HTTPError, ValueError) as exc:
                raise fail(f"worker at {url} not reachable: {type(exc).__name__}") from None
            console.print(render_top(url, pages, recent=rows))
            return
        # Ctrl-C sets a flag the loop checks, rather than raising KeyboardInterrupt wherever
        # the main thread is: raised between a lock's acquire and its `with`, it left Live's
        # lock held, and Live's exit (and the refresh thread) waited on it for ever.
        stop = threading.Event()
        previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
        try:
            with Live(render_top(url, None, "connecting"), console=console,
                      refresh_per_second=4, transient=False) as live:  # fmt: skip
                while not stop.is_set():
                    live.update(_frame(url, client, rows))
                    stop.wait(interval)
        finally:  # Live has restored the terminal; exit 0
            signal.signal(signal.SIGINT, previous)


def _frame(url: str, client: httpx.Client, rows: int) -> RenderableType:
    try:
        return render_top(url, fetch_pages(url, client), recent=rows)
    except (httpx.HTTPError, ValueError) as exc:
        return render_top(url, None, type(exc).__name__)
