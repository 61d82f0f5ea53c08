"""One policy on one engine, and the files a replay writes (summary.json and the plots)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agents.replay.trace import Trace
from agents.replay.twin import TwinConfig
from gpuflow.replay.engine import Decider, Progress, ReplayResult, run_replay
from gpuflow.replay.inprocess import InProcessDecider
from gpuflow.replay.plots import plot_allocation, plot_jct_cdf
from scorer import PRESETS
from scorer.errors import UnknownPluginError

__all__ = ["ENGINES", "replay_policy", "write_outputs"]

ENGINES = ("inprocess", "stream")


def _decider(trace: Trace, policy: str, engine: str) -> Decider:
    if policy not in PRESETS:
        known = ", ".join(sorted(PRESETS))
        raise UnknownPluginError(f"no policy {policy!r} (known: {known})")
    if engine == "inprocess":
        return InProcessDecider(policy, trace.throughput_model(), catalog=trace.catalog)
    if engine == "stream":
        from gpuflow.replay.stream import StreamDecider  # needs the broker and a worker

        return StreamDecider(policy, trace)
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
) -> ReplayResult:
    decider = _decider(trace, policy, engine)
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
