"""`gpuflow generate`: write a seeded synthetic trace (nodes.csv, jobs.csv) for `gpuflow replay`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agents.replay.generate import gavel_cluster, gavel_jobs, write_jobs, write_nodes
from agents.replay.packing import (
    CPU_NODES,
    HIGH_PRIORITY,
    PINNED,
    packing_cluster,
    packing_jobs,
)
from agents.replay.trace import TraceJob, TraceNode
from gpuflow.commands.common import fail
from gpuflow.commands.requests_gen import write_request_trace
from scorer import gavel_throughputs

__all__ = ["generate"]

RECIPES = ("gavel", "packing", "requests")


def _gavel(
    jobs: int, lam_s: float, seed: int
) -> tuple[tuple[TraceNode, ...], tuple[TraceJob, ...]]:
    return gavel_cluster(), gavel_jobs(gavel_throughputs(), jobs, lam_s, seed=seed)


def _packing(
    nodes: int, demand: float, lam_s: float, seed: int, mix: tuple[float, float, float]
) -> tuple[tuple[TraceNode, ...], tuple[TraceJob, ...]]:
    cpu_nodes, pinned, high = mix
    cluster = packing_cluster(nodes, seed=seed, cpu_nodes=cpu_nodes)
    jobs = packing_jobs(
        cluster, demand=demand, seed=seed, lam_s=lam_s, pinned_share=pinned, high_priority=high
    )
    return cluster, jobs


def generate(
    recipe_arg: Annotated[
        str | None, typer.Argument(metavar="[RECIPE]", help="Same as --recipe.")
    ] = None,
    recipe: Annotated[
        str | None, typer.Option(help="gavel (Gavel's cluster and jobs), packing or requests.")
    ] = None,
    out: Annotated[Path, typer.Option(help="Directory for the trace files.")] = Path("trace"),
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same trace).")] = 0,
    jobs: Annotated[int, typer.Option(help="gavel: number of jobs.")] = 200,
    lam: Annotated[float, typer.Option(help="Mean seconds between arrivals (0: all at t=0).")] = (
        600.0
    ),
    nodes: Annotated[int, typer.Option(help="packing: number of nodes.")] = 250,
    demand: Annotated[
        float, typer.Option(help="packing: jobs arrive until their GPU demand is this x capacity.")
    ] = 1.5,
    days: Annotated[float, typer.Option(help="requests: days of per-minute rates.")] = 8.0,
    service: Annotated[
        list[str] | None,
        typer.Option(help="requests: NAME=PEAK_RPS (repeat; default the four example services)."),
    ] = None,
    cpu_nodes: Annotated[
        float, typer.Option(help="packing: share of the nodes without GPUs (0..1).")
    ] = CPU_NODES,
    pinned: Annotated[
        float, typer.Option(help="packing: share of the GPU jobs pinned to one GPU model.")
    ] = PINNED,
    high_priority: Annotated[
        float, typer.Option(help="packing: share of the jobs at priority 1 (the rest 0).")
    ] = HIGH_PRIORITY,
) -> None:
    """Write a seeded trace: `gavel` (docs/traces.md), `packing` (FGD-style, for
    `gpuflow replay --arrivals-only`) or `requests` (per-minute request rates for
    `gpuflow serve --requests`, docs/services.md)."""
    recipe = recipe or recipe_arg
    if recipe is None:
        raise fail(f"give a recipe: {', '.join(RECIPES)} (`gpuflow generate requests --out DIR`)")
    if recipe == "requests":
        write_request_trace(out, days, seed, service or [])
        return
    if recipe not in RECIPES:
        raise fail(f"--recipe must be one of {', '.join(RECIPES)}, not {recipe!r}")
    if lam < 0 or jobs < 1 or nodes < 1 or demand <= 0:
        raise fail("--lam must be >= 0 and --jobs, --nodes, --demand > 0")
    if not all(0 <= share <= 1 for share in (cpu_nodes, pinned, high_priority)):
        raise fail("--cpu-nodes, --pinned and --high-priority are shares in 0..1")
    if recipe == "gavel":
        node_list, job_list = _gavel(jobs, lam, seed)
    else:
        mix = (cpu_nodes, pinned, high_priority)
        node_list, job_list = _packing(nodes, demand, lam or 60.0, seed, mix)
    out.mkdir(parents=True, exist_ok=True)
    write_nodes(out / "nodes.csv", node_list)
    write_jobs(out / "jobs.csv", job_list)
    gpus = sum(n.gpu_count for n in node_list)
    typer.echo(
        f"wrote {out / 'nodes.csv'} ({len(node_list)} nodes, {gpus} GPUs) and "
        f"{out / 'jobs.csv'} ({len(job_list)} jobs)"
    )
