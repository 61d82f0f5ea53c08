"""Trace replay on the digital twin: engines (in process / stream), summary and plots.

Pure parsing, adapters, the generator and the twin live in `agents.replay`; this package
orchestrates, because the in-process engine calls the worker's `streams.scheduling` directly.
"""

from __future__ import annotations

from gpuflow.replay.engine import BASE_MS, Decider, ReplayResult, run_replay
from gpuflow.replay.inprocess import InProcessDecider
from gpuflow.replay.run import ENGINES, replay_policy, write_outputs
from gpuflow.replay.summary import summarize

__all__ = [
    "BASE_MS",
    "ENGINES",
    "Decider",
    "InProcessDecider",
    "ReplayResult",
    "replay_policy",
    "run_replay",
    "summarize",
    "write_outputs",
]
