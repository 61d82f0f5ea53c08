"""A forecast picture: the recent history, the forecast and its interval (matplotlib, Agg)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from forecast.base import Forecast
from forecast.series import Series

__all__ = ["plot_forecast"]


def _times(ts: Sequence[int] | np.ndarray) -> np.ndarray:
    """Epoch seconds as numpy datetimes (UTC), which matplotlib draws as dates."""
    return np.asarray(ts, dtype=np.int64).astype("datetime64[s]")


def plot_forecast(
    series: Series,
    forecasts: Sequence[Forecast],
    path: str | Path,
    *,
    history_points: int | None = None,
    title: str = "",
) -> Path:
    """Write a PNG: history (filled gaps marked), each forecast with its shaded interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keep = history_points or max(3 * max((len(f) for f in forecasts), default=1), 48)
    keep = min(keep, len(series))
    ts = series.timestamps(len(series) - keep, len(series))
    fig, ax = plt.subplots(figsize=(11, 4.2))
    ax.plot(_times(ts), series.values[-keep:], color="black", linewidth=1.0, label="history")
    filled = series.filled[-keep:]
    if filled.any():
        ax.scatter(
            _times(ts[filled]),
            series.values[-keep:][filled],
            s=8,
            color="grey",
            label="filled gap",
            zorder=3,
        )
    for f in forecasts:
        when = _times(f.timestamps())
        (line,) = ax.plot(when, f.point, linewidth=1.4, label=f"{f.model}")
        ax.fill_between(
            when,
            f.lower,
            f.upper,
            color=line.get_color(),
            alpha=0.2,
            label=f"{f.model} {round(100 * f.level)}% interval",
        )
    ax.set_title(title or series.name)
    ax.set_xlabel("time (UTC)")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
