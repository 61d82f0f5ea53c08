"""One policy on one engine, and the files a replay writes (summary.json and the plots)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agents.replay.network import NetworkTwinConfig, TwinNetwork
from agents.replay.trace import Trace
from agents.replay.twin import TwinConfig
from gpuflow.replay.engine import Decider, Progress, ReplayResult, run_replay
from gpuflow.replay.inprocess import InProcessDecider
from gpuflow.replay.plots import plot_allocation, plot_jct_cdf
from scorer import PRESETS
from scorer.errors import UnknownPluginError
from scorer.network import LinkGraph, NetworkView

__all__ = [
    "ENGINES",
    "REPLAN_TICK_S",
    "ROUND_POLICIES",
    "known_policies",
    "replay_policy",
    "write_outputs",
]

ENGINES = ("inprocess", "stream")
REPLAN_TICK_S = 60.0  # virtual seconds between re-planning passes of policies that re-plan


def _gavel(trace: Trace) -> Decider:
    from gpuflow.replay.gavel import GavelDecider  # scipy is needed only here

    return GavelDecider(trace.throughput_model(), trace.catalog)


# policies that are their own decider (round-based), not a placer preset: name -> (build, tick)
ROUND_POLICIES: dict[str, tuple[Callable[[Trace], Decider], float]] = {
    "gavel": (_gavel, 360.0),  # Gavel's 6-minute rounds
}


def known_policies() -> tuple[str, ...]:
    return tuple(sorted({*PRESETS, *ROUND_POLICIES}))


def _decider(trace: Trace, policy: str, engine: str, try_once: bool = False) -> Decider:
    if policy not in PRESETS and policy not in ROUND_POLICIES:
        raise UnknownPluginError(f"no policy {policy!r} (known: {', '.join(known_policies())})")
    if policy in ROUND_POLICIES:
        if engine != "inprocess":
            raise UnknownPluginError(f"policy {policy!r} runs on the inprocess engine only")
        return ROUND_POLICIES[policy][0](trace)
    if engine == "inprocess":  # with links: network-aware placement, cross-region gangs
        view = NetworkView(LinkGraph(trace.links)) if trace.links else None
        return InProcessDecider(
            policy, trace.throughput_model(), catalog=trace.catalog, network=view,
            cross_region=bool(trace.links), try_once=try_once,
        )  # fmt: skip
    if engine == "stream":
        from gpuflow.replay.stream import StreamDecider  # needs the broker and a worker

        return StreamDecider(policy, trace, try_once=try_once)
    raise UnknownPluginError(f"no engine {engine!r} (known: {', '.join(ENGINES)})")


def replay_policy(
    trace: Trace,
    policy: str,
    *,
    engine: str = "inprocess",
    arrivals_only: bool = False,
    twin_config: TwinConfig | None = None,
    progress: Progress | None = None,
    tick_s: float | None = None,
    quotas: str = "elastic",
) -> ReplayResult:
    """Replay `trace` under `policy`. `tick_s`: the scheduler's timer in virtual seconds
    (default: `REPLAN_TICK_S` for a policy that re-plans, none otherwise). A trace with links
    gets a network twin whose quotas are `quotas` (elastic or equal) unless `twin_config` says
    otherwise."""
    decider = _decider(trace, policy, engine, try_once=arrivals_only)
    if trace.links and twin_config is None:
        network = TwinNetwork.for_trace(trace, NetworkTwinConfig(mode=quotas))
        twin_config = TwinConfig(network=network)
    if policy in ROUND_POLICIES and twin_config is None:
        # a round policy stops and resumes jobs within one tick (a lease not renewed, then the
        # round's new placement): its checkpoint is taken as instant, its restore still paid
        twin_config = TwinConfig(checkpoint_s=0.0)
    if tick_s is None and policy in ROUND_POLICIES:
        tick_s = ROUND_POLICIES[policy][1]
    elif tick_s is None and PRESETS[policy].replan:
        tick_s = REPLAN_TICK_S
    try:
        return run_replay(
            trace,
            decider,
            arrivals_only=arrivals_only,
            twin_config=twin_config,
            progress=progress,
            tick_s=tick_s,
        )
    finally:
        decider.close()


def write_outputs(
    out: Path, results: Mapping[str, ReplayResult], summaries: Mapping[str, dict[str, Any]]
) -> None:
    """DIR/summary.json (one policy: its summary; several: by policy, each also in
    DIR/<policy>/summary.json), DIR/jct_cdf.png, DIR/allocation.png."""
    out.mkdir(parents=True, exist_ok=True)
    if len(summaries) == 1:
        doc: dict[str, Any] = next(iter(summaries.values()))
    else:
        doc = {"policies": dict(summaries)}
        for name, summary in summaries.items():
            (out / name).mkdir(exist_ok=True)
            (out / name / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.json").write_text(json.dumps(doc, indent=2) + "\n")
    plot_jct_cdf(results, out / "jct_cdf.png")
    plot_allocation(results, out / "allocation.png")
