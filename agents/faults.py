"""Injected faults for the simulated fleet, explicit (tests, demos) or drawn at spec rates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agents.spec import FaultRates

__all__ = ["FAULT_KINDS", "Fault", "draw_faults"]

FAULT_KINDS = ("gpu_lost", "ecc_error", "node_down", "link_degraded")


@dataclass(frozen=True)
class Fault:
    """One fault. `target` is a node_id (GPU/node faults) or a link_id ("a>b")."""

    kind: str
    target: str
    gpu: int = 0
    until_ms: int | None = None  # None: until cleared
    rtt_mult: float = 4.0  # link_degraded only
    capacity_mult: float = 0.25

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"fault kind {self.kind!r} not one of {FAULT_KINDS}")


def draw_faults(
    rates: FaultRates,
    nodes: list[tuple[str, int]],
    links: list[str],
    now_ms: int,
    dt_s: float,
    rng: np.random.Generator,
) -> list[Fault]:
    """Faults starting in the next `dt_s` seconds; `nodes` holds (node_id, gpu_count)."""
    out: list[Fault] = []
    hours = dt_s / 3600.0
    for _ in range(rng.poisson(rates.gpu_lost_per_node_hour * len(nodes) * hours)):
        node, gpus = nodes[int(rng.integers(len(nodes)))]
        out.append(Fault("gpu_lost", node, gpu=int(rng.integers(gpus))))
    for _ in range(rng.poisson(rates.node_down_per_node_hour * len(nodes) * hours)):
        node, _gpus = nodes[int(rng.integers(len(nodes)))]
        out.append(Fault("node_down", node, until_ms=now_ms + int(rng.uniform(60, 600) * 1000)))
    if links:
        for _ in range(rng.poisson(rates.link_degraded_per_link_hour * len(links) * hours)):
            link = links[int(rng.integers(len(links)))]
            until = now_ms + int(rng.uniform(60, 900) * 1000)
            out.append(Fault("link_degraded", link, until_ms=until))
    return out
