"""Replay plots (matplotlib, Agg): JCT CDF and allocated GPU share over virtual time."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gpuflow.replay.engine import ReplayResult
from gpuflow.replay.summary import allocation_series

__all__ = ["plot_allocation", "plot_jct_cdf"]


def _pyplot() -> Any:
    """matplotlib on the Agg backend, imported on first use (it costs ~0.3 s)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_jct_cdf(results: Mapping[str, ReplayResult], path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, result in results.items():
        jct = sorted(
            (r.end_s - r.submit_s) / 3600 for r in result.twin.runs.values() if r.end_s is not None
        )
        if jct:
            ax.step(jct, np.arange(1, len(jct) + 1) / len(jct), where="post", label=name)
    ax.set_xlabel("job completion time (hours)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("JCT CDF")
    _finish(fig, ax, path)


def plot_allocation(results: Mapping[str, ReplayResult], path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, result in results.items():
        t, a = allocation_series(result.twin, result.twin.now)
        ax.step(t / 3600, a * 100, where="post", label=name)
    ax.set_xlabel("virtual time (hours)")
    ax.set_ylabel("GPUs allocated (%)")
    ax.set_ylim(0, 105)
    ax.set_title("GPU allocation")
    _finish(fig, ax, path)


def _finish(fig: Any, ax: Any, path: Path) -> None:
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
