"""`gpuflow replay`: run a trace on the digital twin under one or several placement policies."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from agents.replay.adapters import load_gavel_trace, load_philly_trace
from agents.replay.network import load_links
from agents.replay.trace import Trace
from agents.replay.trace_fields import ModelResolver
from agents.replay.trace_reader import load_nodes, load_throughputs, load_trace
from gpuflow.commands.common import fail
from gpuflow.commands.serve import load_services, report_rows, report_table, service_replay
from gpuflow.replay.engine import ReplayResult
from gpuflow.replay.run import replay_policy, write_outputs
from gpuflow.replay.summary import summarize
from gpuflow_errors import GpuflowError
from scorer import GAVEL_CSV, load_catalog
from scorer.network import MODES

__all__ = ["replay"]


def _replay_services(
    files: list[Path],
    requests: Path,
    zones: Path | None,
    scaler: str,
    warmup: int,
    out: Path,
    engine: str,
) -> None:
    """The service replay (docs/services.md), as `gpuflow serve --requests` runs it; with
    `--engine stream`, through the broker and a worker (gpuflow's scaler only)."""
    specs = load_services(files)
    rows = service_replay(specs, requests, zones, scaler, warmup, seed=0, engine=engine)
    Console().print(report_table(rows))
    out.mkdir(parents=True, exist_ok=True)
    (out / "services.json").write_text(json.dumps(report_rows(rows), indent=1) + "\n")
    typer.echo(f"wrote {out / 'services.json'}")


_COLUMNS = (  # summary key, header, format, scale (seconds shown in hours)
    ("completed", "done", "{:.0f}", 1.0),
    ("rejected", "rej", "{:.0f}", 1.0),
    ("avg_jct_s", "avg JCT h", "{:.2f}", 1 / 3600),
    ("p99_jct_s", "p99 JCT h", "{:.2f}", 1 / 3600),
    ("avg_wait_s", "avg wait h", "{:.2f}", 1 / 3600),
    ("makespan_s", "makespan h", "{:.1f}", 1 / 3600),
    ("gpu_alloc_rate", "alloc", "{:.1%}", 1.0),
    ("gpu_hours", "GPU h", "{:,.0f}", 1.0),
    ("cost", "cost", "{:,.0f}", 1.0),
    ("first_refusal_alloc_rate", "1st refusal", "{:.1%}", 1.0),
    ("final_alloc_rate", "final alloc", "{:.1%}", 1.0),
)


def _load(
    nodes: Path, jobs: Path, throughputs: Path | None, jobs_format: str, catalog: Path | None
) -> Trace:
    if throughputs is not None and str(throughputs) == "gavel" and not throughputs.exists():
        throughputs = GAVEL_CSV  # the table shipped with gpuflow
    base = load_catalog(catalog) if catalog is not None else None
    if jobs_format == "csv":
        return load_trace(nodes, jobs, throughputs, base)
    if jobs_format not in ("gavel", "philly"):
        raise fail(f"--jobs-format must be csv, gavel or philly, not {jobs_format!r}")
    models = ModelResolver(base)
    node_list = load_nodes(nodes, models)
    tp = load_throughputs(throughputs, models.catalog) if throughputs else None
    loader = load_gavel_trace if jobs_format == "gavel" else load_philly_trace
    trace = loader(node_list, jobs, tp)
    return replace(trace, catalog=models.catalog, warnings=models.warnings)


def _table(summaries: dict[str, dict[str, Any]]) -> Table:
    table = Table(title="trace replay")
    table.add_column("policy")
    shown = [c for c in _COLUMNS if any(s.get(c[0]) is not None for s in summaries.values())]
    for _, header, _, _ in shown:
        table.add_column(header, justify="right")
    for name, s in summaries.items():
        cells = [f.format(s[k] * x) if s.get(k) is not None else "-" for k, _, f, x in shown]
        table.add_row(name, *cells)
    return table


def _advance(bar: Progress, task: TaskID) -> Callable[[int, int], None]:
    def update(done: int, _total: int) -> None:
        bar.update(task, completed=done)

    return update


def _run_all(
    trace: Trace,
    policies: list[str],
    engine: str,
    arrivals_only: bool,
    console: Console,
    quotas: str = "elastic",
) -> tuple[dict[str, ReplayResult], dict[str, dict[str, Any]]]:
    results: dict[str, ReplayResult] = {}
    summaries: dict[str, dict[str, Any]] = {}
    steps = len(trace.jobs) * (1 if arrivals_only else 2)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as bar:
        for name in policies:
            task = bar.add_task(f"{name} ({engine})", total=steps)
            result = replay_policy(
                trace,
                name,
                engine=engine,
                arrivals_only=arrivals_only,
                progress=_advance(bar, task),
                quotas=quotas,
            )
            results[name] = result
            summaries[name] = summarize(result, policy=name, engine=engine)
    return results, summaries


def replay(
    nodes: Annotated[Path | None, typer.Option(help="nodes.csv (see docs/traces.md).")] = None,
    jobs: Annotated[Path | None, typer.Option(help="jobs.csv, or a Gavel / Philly trace.")] = None,
    throughputs: Annotated[
        Path | None,
        typer.Option(
            help="throughputs.csv, Gavel's throughput table, or `gavel` for the shipped one."
        ),
    ] = None,
    policy: Annotated[str, typer.Option(help="gpuflow, fifo, bestfit, fgd or gavel-like.")] = (
        "gpuflow"
    ),
    compare: Annotated[
        str | None, typer.Option(help="Comma-separated policies to run side by side.")
    ] = None,
    engine: Annotated[str, typer.Option(help="inprocess (fast) or stream (broker+worker).")] = (
        "inprocess"
    ),
    arrivals_only: Annotated[
        bool, typer.Option("--arrivals-only", help="Jobs never finish: how full can it pack?")
    ] = False,
    jobs_format: Annotated[str, typer.Option(help="csv, gavel or philly.")] = "csv",
    catalog: Annotated[
        Path | None,
        typer.Option(help="YAML/JSON catalogue adding or overriding GPU models (docs/scoring.md)."),
    ] = None,
    out: Annotated[Path, typer.Option(help="Directory for summary.json and plots.")] = Path(
        "replay-out"
    ),
    links: Annotated[
        Path | None,
        typer.Option(help="links.csv: inter-region links; the twin then models communication."),
    ] = None,
    quotas: Annotated[
        str, typer.Option(help="With --links: elastic (water-filling by phase) or equal shares.")
    ] = "elastic",
    services: Annotated[
        list[Path] | None,
        typer.Option("--services", help="Service YAML (repeat): replay them too (--requests)."),
    ] = None,
    requests: Annotated[
        Path | None, typer.Option(help="With --services: the minute,service,rps trace.")
    ] = None,
    zones: Annotated[
        Path | None, typer.Option(help="With --services: the fleet's zones.csv (default: demo).")
    ] = None,
    scaler: Annotated[
        str, typer.Option(help="With --services: gpuflow, static-peak, reactive-hpa or all.")
    ] = "all",
    warmup: Annotated[
        int, typer.Option(help="With --services: minutes of history, not scored.")
    ] = 1440,
) -> None:
    """Replay a trace on the digital twin; write DIR/summary.json, jct_cdf.png, allocation.png.
    With --services and --requests, replay inference services too (DIR/services.json)."""
    if (nodes is None) != (jobs is None):
        raise fail("--nodes and --jobs go together")
    if nodes is None and not services:
        raise fail("nothing to replay: give --nodes and --jobs, or --services with --requests")
    if bool(services) != (requests is not None):
        raise fail("--services and --requests go together")
    if services and requests is not None:
        _replay_services(services, requests, zones, scaler, warmup, out, engine)
    if nodes is None or jobs is None:
        return
    policies = [p.strip() for p in (compare or policy).split(",") if p.strip()]
    console = Console()
    try:
        trace = _load(nodes, jobs, throughputs, jobs_format, catalog)
        for warning in trace.warnings:
            typer.echo(f"gpuflow: warning: {warning}", err=True)
        if links is not None:
            trace = dataclasses.replace(trace, links=load_links(links))
        if quotas not in MODES:
            raise fail(f"--quotas must be one of {', '.join(MODES)}, not {quotas!r}")
        results, summaries = _run_all(trace, policies, engine, arrivals_only, console, quotas)
        write_outputs(out, results, summaries)
    except GpuflowError as exc:
        raise fail(str(exc)) from None
    console.print(_table(summaries))
    console.print(f"wrote {out / 'summary.json'}, {out / 'jct_cdf.png'}, {out / 'allocation.png'}")
