"""`gpuflow up`: the whole embedded stack with a live stream of decisions."""

from __future__ import annotations

import contextlib
import queue
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from agents.executor import ExecutorTwin
from agents.jobgen import DEMO_MEAN_DURATION_S, generate_jobs, run_jobgen
from gpuflow.commands.common import STACK_FILE, fail, write_stack_file
from gpuflow.render import decision_line
from gpuflow.stack import Stack
from gpuflow.usage import UsageTally, fleet_gpus, usage_table
from infra.config import load_config
from infra.errors import ConfigError, InfraError
from infra.policy import load_policy

__all__ = ["up"]


def _fleet(path: Path | None, nodes: int, seed: int) -> Any:
    from agents import SimulatedFleet, demo_fleet, generate_nodes, load_fleet

    spec = load_fleet(path) if path else demo_fleet()
    return SimulatedFleet(spec, generate_nodes(spec, nodes, seed), seed)


def up(
    duration: Annotated[float | None, typer.Option(help="Stop after this many seconds.")] = None,
    nodes: Annotated[int, typer.Option(min=1, help="Simulated GPU nodes.")] = 400,
    rate: Annotated[float, typer.Option(min=0.0, help="Jobs submitted per second.")] = 5.0,
    time_scale: Annotated[
        float, typer.Option(min=0.0, help="Run each job for this share of its expected time.")
    ] = 0.2,
    mean_duration: Annotated[
        float, typer.Option(min=1.0, help="Mean job run time on the reference V100, s.")
    ] = DEMO_MEAN_DURATION_S,
    fleet: Annotated[Path | None, typer.Option(help="Fleet YAML (default: demo fleet).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the fleet and the job mix.")] = 0,
    data_dir: Annotated[Path, typer.Option(help="Logs, history and state.")] = Path("gpuflow-data"),
    quiet: Annotated[bool, typer.Option(help="Print only the summary.")] = False,
    workers: Annotated[
        int, typer.Option(min=1, help="Worker processes sharing the regions' partitions.")
    ] = 1,
    policy: Annotated[
        Path | None, typer.Option(help="Tenancy policy file: tenants, quotas, classes (YAML).")
    ] = None,
    execute: Annotated[
        bool,
        typer.Option(
            "--execute", help="Add local nodes whose executors run real processes, and the example."
        ),
    ] = False,
    local_nodes: Annotated[
        int, typer.Option(min=1, max=8, help="With --execute: local 1-GPU executor nodes.")
    ] = 2,
) -> None:
    """Run broker, worker, simulated fleet, executor twin and a job generator; show decisions.
    With --execute, also local executor nodes running real processes (docs/agents.md)."""
    try:
        extra: dict[str, Any] = {"worker": {"policy_file": str(policy.resolve())}} if policy else {}
        config = load_config(data_dir=str(data_dir), **extra)
        if config.worker.policy_file:
            load_policy(config.worker.policy_file)  # a bad file: one line now, not a dead worker
        fleet_obj = _fleet(fleet, nodes, seed)
        # one partition a region while there are enough
        config = config.with_regions(r.name for r in fleet_obj.spec.regions)
        stack_obj = Stack(config, workers=workers)
    except (ConfigError, InfraError, OSError, ValueError) as exc:
        raise fail(str(exc)) from None
    console = Console()
    decisions: queue.Queue[dict[str, Any]] = queue.Queue()
    counts: Counter[str] = Counter()
    tally = UsageTally(time_scale=time_scale)
    started = time.monotonic()
    with stack_obj as stack:
        write_stack_file(stack.config)
        cfg = stack.config
        pids = ",".join(str(w.pid) for w in stack.workers) or "-"
        web = ", ".join(f"{w.config.worker.web_host}:{w.config.worker.web_port}/ui/"
                        for w in stack.workers)  # fmt: skip
        engine = f"embedded {cfg.broker.engine}" if stack.broker is not None else "external"
        console.print(
            f"[bold]gpuflow[/bold] broker {cfg.kafka.bootstrap_servers} ({engine})  "
            f"worker{'s' if len(stack.workers) > 1 else ''} pid {pids}  "
            f"{len(fleet_obj.nodes)} nodes in {len(fleet_obj.spec.regions)} regions  "
            f"logs {cfg.data_dir}\n  web view http://{web}",
            highlight=False,
        )
        from agents import run_fleet

        regions = [r.name for r in fleet_obj.spec.regions]
        local = _start_local(cfg, regions, local_nodes, console, stack) if execute else []
        twin = _twin(cfg, {n.node_id for n in local}, time_scale, decisions.put)
        stack.spawn("fleet", run_fleet, cfg, fleet_obj)
        stack.spawn("executor", twin.run)
        jobs = generate_jobs(
            max(1000, int(rate * (duration or 3600)) + 10),
            seed=seed,
            regions=regions,
            prefix=f"job{int(time.time()) % 100000}",
            fleet=fleet_obj.spec,
            mean_duration_s=mean_duration,
        )
        tally.started = time.monotonic()  # utilisation counts from the first submission
        stack.spawn("jobgen", run_jobgen, cfg, jobs, rate_per_s=max(rate, 1e-3))
        try:
            while duration is None or time.monotonic() - started < duration:
                _drain(decisions, counts, console, quiet, tally)
                stack.check_worker()
                time.sleep(0.1)
        except KeyboardInterrupt:
            console.print("stopping...")
        finally:
            ended = time.monotonic()
            _drain(decisions, counts, console, quiet, tally)
            for node in local:
                node.stop()
            with contextlib.suppress(OSError):
                (cfg.data_dir / STACK_FILE).unlink()
    console.print(usage_table(tally, fleet_gpus(fleet_obj.nodes), ended))
    console.print(
        f"[bold]done[/bold] in {time.monotonic() - started:.0f}s: "
        + ", ".join(f"{k.lower()} {v}" for k, v in sorted(counts.items()))
        + f"; jobs finished {twin.stats.finished}, evicted {twin.stats.evicted}, "
        f"running {len(twin.stats.running)}"
    )


def _twin(cfg: Any, local: set[str], time_scale: float, put: Any) -> ExecutorTwin:
    if not local:
        return ExecutorTwin(cfg, time_scale=time_scale, on_decision=put)
    from agents.execution.demo import TwinBesideExecutors

    return TwinBesideExecutors(cfg, local, time_scale=time_scale, on_decision=put)


def _start_local(cfg: Any, regions: list[str], n: int, console: Console, stack: Any) -> list[Any]:
    """`n` local executor nodes (1 L4 each) in us-east, and the example's story."""
    from agents.execution.demo import EXAMPLE, LOCAL_MODEL, local_nodes, run_story

    if not EXAMPLE.is_file():
        raise fail(f"--execute needs {EXAMPLE} (run from a gpuflow checkout)")
    region = "us-east" if "us-east" in regions else regions[0]
    nodes = [node.start() for node in local_nodes(cfg, cfg.data_dir / "local", region, n)]
    console.print(
        f"  executing: {n} local {LOCAL_MODEL} nodes in {region} "
        f"({', '.join(x.node_id for x in nodes)}; logs {cfg.data_dir / 'local'})",
        highlight=False,
    )

    def say(line: str) -> None:
        console.print(f"[bold magenta]{line}[/bold magenta]", highlight=False)

    pages = [f"http://{w.config.worker.web_host}:{w.config.worker.web_port}/state/"
             for w in stack.workers]  # fmt: skip
    stack.spawn("story", run_story, cfg, region, say, pages=pages, local_gpus=n)
    return nodes


def _drain(
    decisions: queue.Queue[dict[str, Any]],
    counts: Counter[str],
    console: Console,
    quiet: bool,
    tally: UsageTally,
) -> None:
    while True:
        try:
            decision = decisions.get_nowait()
        except queue.Empty:
            return
        counts[decision["outcome"]] += 1
        tally.on_decision(decision)
        if not quiet:
            console.print(decision_line(decision), highlight=False, soft_wrap=True)
