"""Deciding again, the policy half: the speed-aware queue order, migration to a better match,
moves to cheaper or greener GPUs, progressive defragmentation, and the progress arithmetic
they share. Pure: the caller (the worker's `streams.replan.replanner`) commits the proposals, holds
GPUs and emits the decisions."""

from __future__ import annotations

from scorer.replan.config import ReplanConfig
from scorer.replan.defrag import Defrag, free_node_for
from scorer.replan.footprint import Footprint, cheaper_or_greener, footprint_saving
from scorer.replan.migration import (
    MoveProposal,
    Statement,
    better_match,
    hold_key,
    movable,
    next_checkpoint_ms,
)
from scorer.replan.progress import MoveCost, RunningJob, move_cost
from scorer.replan.queue import Ranked, Waiting, fifo_order, speed_aware_order

__all__ = [
    "Defrag",
    "Footprint",
    "MoveCost",
    "MoveProposal",
    "Ranked",
    "ReplanConfig",
    "RunningJob",
    "Statement",
    "Waiting",
    "better_match",
    "cheaper_or_greener",
    "fifo_order",
    "footprint_saving",
    "free_node_for",
    "hold_key",
    "movable",
    "move_cost",
    "next_checkpoint_ms",
    "speed_aware_order",
]
