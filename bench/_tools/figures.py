"""What a benchmark entry is: its script, its full and quick arguments, its headline figures.

A figure names where it sits in the result file, which way is better, how far it may move from
the last committed result before the run says so (`tolerance`, a fraction of the committed
value, never less than `floor` in the figure's own unit) and the target an issue set for it.

Wall-clock figures (latency, events/s) move with the load on a shared machine, so their
tolerance is wide; CPU time per unit of work moves less; figures on a virtual clock (replays)
move only when the code's decisions do.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

__all__ = ["CPU", "VIRTUAL", "WALL", "Bench", "Figure", "figure"]

WALL = 0.30  # wall-clock figure on a shared 2-core box
CPU = 0.20  # CPU seconds per unit of work
VIRTUAL = 0.02  # virtual-clock figure: moves only when decisions change


@dataclass(frozen=True)
class Figure:
    """One headline figure of a result file."""

    label: str
    path: tuple[str | int, ...]  # keys (and list indices) into the result JSON
    unit: str = ""
    higher_is_better: bool = False
    tolerance: float = WALL
    floor: float = 0.0
    target: str = ""  # as the issue states it, e.g. "≥ 5,000/s"
    scale: float = 1.0  # shown value = stored value x scale (fractions as %)


@dataclass(frozen=True)
class Bench:
    """One benchmark script (`bench/<module>.py`) and the result file it writes."""

    name: str  # result file stem: bench/results/<name>.json
    module: str  # python -m bench.<module>
    full: str  # arguments of the full run, as typed
    quick: str  # arguments of the quick run
    figures: tuple[Figure, ...]
    about: str
    minutes_full: float  # about how long the full run takes on the 2-core box

    def args(self, quick: bool) -> tuple[str, ...]:
        return tuple(shlex.split(self.quick if quick else self.full))


def figure(
    label: str, path: str, unit: str, target: str = "", up: bool = False, **kw: float
) -> Figure:
    """A figure at `path` ("a/b/-1/c": keys, and list indices as integers)."""
    keys = tuple(int(k) if k.lstrip("-").isdigit() else k for k in path.split("/"))
    return Figure(label, keys, unit, higher_is_better=up, target=target, **kw)
