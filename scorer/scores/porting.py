"""Score: porting — a portable job runs on any stack, but moving it off its home costs effort.

A `portable` job scores 100 - penalty of the node's stack family (default: CUDA 0, ROCm 20,
CANN 35, any other family 35): it goes to ROCm or CANN when they are worth the porting, not
merely because they are there. A job built for one stack only reaches nodes of that stack
(the `software_stack` filter), so it scores 100 everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from scorer.framework import CycleContext, Memo
from scorer.stacks import parse_stack

__all__ = ["DEFAULT_PENALTIES", "NAME", "OTHER_PENALTY", "PortingScore", "porting_penalty"]

NAME = "porting"
DEFAULT_PENALTIES: Mapping[str, float] = MappingProxyType({"cuda": 0.0, "rocm": 20.0, "cann": 35.0})
OTHER_PENALTY = 35.0


class PortingScore:
    name = NAME

    def __init__(self, penalties: Mapping[str, float] | None = None) -> None:
        merged = {**DEFAULT_PENALTIES, **(penalties or {})}
        bad = {k: v for k, v in merged.items() if not 0 <= float(v) <= 100}
        if bad:
            raise ValueError(f"porting penalties must be within 0..100: {bad}")
        self.penalties = MappingProxyType({k: float(v) for k, v in merged.items()})
        self._table = _PenaltyTable()

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray | float:
        if parse_stack(ctx.job.software_stack) is not None:
            return 100.0
        return 100.0 - self._by_family(ctx.state.stack_families)[ctx.state.stack_family[slots]]

    def _by_family(self, families: tuple[str, ...]) -> np.ndarray:
        """Penalty per family index, rebuilt only when a new family appears."""
        memo = self._table
        if memo.families != families:
            memo.families = families
            memo.penalties = np.array([porting_penalty(f, self.penalties) for f in families])
        return memo.penalties


class _PenaltyTable(Memo):
    """The penalty of each stack family, for the families the state knows."""

    def __init__(self) -> None:
        self.families: tuple[str, ...] = ()
        self.penalties = np.zeros(0)


def porting_penalty(family: str, penalties: Mapping[str, float] = DEFAULT_PENALTIES) -> float:
    """Penalty (0..100) of running a portable job on `family`; e.g. rocm -> 20 -> scores 80."""
    return float(penalties.get(family, OTHER_PENALTY))
