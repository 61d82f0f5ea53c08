"""Whether a reservation fits a ClusterState, and the milli-GPU it takes from each GPU.

Only over-allocation is refused (health is the filters' concern): every node must be known,
every GPU must exist and have the milli-GPU asked of it free, a share must be 1..1000 milli on
GPUs named once, and declared host CPU and memory are capacity too (undeclared: not held
against). The first reason a reservation does not fit is a ReservationError. It reads the
rows through `Capacity`, which ClusterState satisfies, so it needs no import of the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np

from scorer.errors import ReservationError, UnknownNodeError
from scorer.node_rows import FULL_GPU
from scorer.types import Assignment, NodeSpec

__all__ = ["Capacity", "reservation_need"]


class Capacity(Protocol):
    """The rows a reservation is checked against (by slot; per GPU for `free_milli`)."""

    @property
    def gpu_count(self) -> np.ndarray: ...
    @property
    def free_milli(self) -> np.ndarray: ...
    @property
    def cpu_milli(self) -> np.ndarray: ...
    @property
    def free_cpu(self) -> np.ndarray: ...
    @property
    def memory_mib(self) -> np.ndarray: ...
    @property
    def free_mem(self) -> np.ndarray: ...
    def slot_of(self, node_id: str) -> int: ...
    def spec(self, slot: int) -> NodeSpec: ...


def reservation_need(
    state: Capacity, job_id: str, assignments: tuple[Assignment, ...]
) -> dict[tuple[int, int], int]:
    """The milli-GPU `assignments` take from each (slot, GPU) of `state`, all or nothing: a
    ReservationError names the first thing that does not fit."""
    if not assignments or not any(
        a.gpu_indices or a.cpu_milli or a.memory_mib for a in assignments
    ):
        raise ReservationError(f"job {job_id}: empty reservation")
    need: dict[tuple[int, int], int] = {}
    host: dict[int, tuple[int, int]] = {}
    for a in assignments:
        try:
            slot = state.slot_of(a.node_id)
        except UnknownNodeError:
            raise ReservationError(f"job {job_id}: unknown node {a.node_id}") from None
        bad_share = a.gpu_indices and not 0 < a.gpu_milli <= FULL_GPU
        if bad_share or len(set(a.gpu_indices)) != len(a.gpu_indices):
            raise ReservationError(f"job {job_id}: bad share or repeated GPU on {a.node_id}")
        for gpu in a.gpu_indices:
            if not 0 <= gpu < state.gpu_count[slot]:
                raise ReservationError(f"job {job_id}: no GPU {gpu} on {a.node_id}")
            need[slot, gpu] = need.get((slot, gpu), 0) + a.gpu_milli
        cpu, mem = host.get(slot, (0, 0))
        host[slot] = (cpu + a.cpu_milli, mem + a.memory_mib)
    _check_host(state, job_id, host)
    for (slot, gpu), milli in need.items():
        if milli > state.free_milli[slot, gpu]:
            node_id = state.spec(slot).node_id
            raise ReservationError(
                f"job {job_id}: GPU {gpu} of {node_id} has {state.free_milli[slot, gpu]} "
                f"milli free, {milli} requested"
            )
    return need


def _check_host(state: Capacity, job_id: str, host: Mapping[int, tuple[int, int]]) -> None:
    """Declared host CPU and memory are capacity too (undeclared: not held against)."""
    for slot, (cpu, mem) in host.items():
        node_id = state.spec(slot).node_id
        if state.cpu_milli[slot] and cpu > state.free_cpu[slot]:
            raise ReservationError(
                f"job {job_id}: {node_id} has {state.free_cpu[slot]} cpu_milli free, {cpu} "
                "requested"
            )
        if state.memory_mib[slot] and mem > state.free_mem[slot]:
            raise ReservationError(
                f"job {job_id}: {node_id} has {state.free_mem[slot]} memory_mib free, {mem} "
                "requested"
            )
