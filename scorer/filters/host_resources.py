"""Filter: the node's CPU and host memory are large enough (0 on either side = not declared).

Static: against the node's size. What is free now (assignments hold host CPU and memory too)
is the `capacity` filter's concern.
"""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, Insufficient, Status
from scorer.types import JobSpec

__all__ = ["NAME", "HostResourcesFilter"]

NAME = "host_resources"


class HostResourcesFilter:
    name = NAME
    static = True

    def static_key(self, job: JobSpec) -> tuple[object, ...]:
        """What the mask depends on besides the nodes' inventory: host CPU and memory."""
        return (job.cpu_milli, job.memory_mib)

    def filter(self, ctx: CycleContext) -> np.ndarray:
        s, job = ctx.state, ctx.job
        ok = np.ones(ctx.slots.shape[0], bool)
        if job.cpu_milli:
            ok &= fits(s.cpu_milli[ctx.slots], job.cpu_milli)
        if job.memory_mib:
            ok &= fits(s.memory_mib[ctx.slots], job.memory_mib)
        return ok

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        s, job = ctx.state, ctx.job
        reasons: list[Insufficient | str] = []
        if job.cpu_milli and not fits(s.cpu_milli[slot : slot + 1], job.cpu_milli)[0]:
            reasons.append(Insufficient("CPU", job.cpu_milli, int(s.cpu_milli[slot]), "cpu_milli"))
        if job.memory_mib and not fits(s.memory_mib[slot : slot + 1], job.memory_mib)[0]:
            reasons.append(
                Insufficient("host memory", job.memory_mib, int(s.memory_mib[slot]), "MiB")
            )
        return Status.unresolvable(*reasons) if reasons else Status.success()


def fits(capacity: np.ndarray, requested: int) -> np.ndarray:
    """Undeclared capacity (0) is not held against the job."""
    return (capacity == 0) | (capacity >= requested)
