"""Filter: the node is healthy and has enough healthy GPUs (ECC/XID faults mark GPUs sick)."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, Insufficient, Status

__all__ = ["NAME", "HealthFilter"]

NAME = "health"


class HealthFilter:
    name = NAME
    static = False

    def filter(self, ctx: CycleContext) -> np.ndarray:
        s = ctx.state
        return healthy(s.node_ok[ctx.slots], s.healthy_count[ctx.slots], _needed(ctx))

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        s = ctx.state
        reasons: list[Insufficient | str] = []
        if not s.node_ok[slot]:
            reasons.append("node marked unhealthy")
        if s.healthy_count[slot] < _needed(ctx):
            reasons.append(Insufficient("healthy GPUs", _needed(ctx), int(s.healthy_count[slot])))
        return Status.unschedulable(*reasons) if reasons else Status.success()


def _needed(ctx: CycleContext) -> int:
    return 1 if ctx.fractional else ctx.chunk


def healthy(node_ok: np.ndarray, healthy_gpus: np.ndarray, needed: int) -> np.ndarray:
    return node_ok & (healthy_gpus >= needed)
