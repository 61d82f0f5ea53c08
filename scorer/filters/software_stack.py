"""Filter: the node runs the software stack the job was built for (a portable job runs anywhere).

Rules in `scorer/stacks.py`: same family; version at least the job's (ROCm and CANN: the same
major too); a node that declares no version satisfies any; a CUDA build runs only on GPU
architectures its toolkit could target.
"""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, Status
from scorer.stacks import STRICT_MAJOR, Stack, parse_stack, satisfies
from scorer.types import JobSpec

__all__ = ["NAME", "SoftwareStackFilter", "stack_ok"]

NAME = "software_stack"


class SoftwareStackFilter:
    name = NAME
    static = True

    def static_key(self, job: JobSpec) -> tuple[object, ...]:
        """What the mask depends on besides the nodes' inventory: the stack the job is built for."""
        return (job.software_stack,)

    def filter(self, ctx: CycleContext) -> np.ndarray:
        wanted = parse_stack(ctx.job.software_stack)
        if wanted is None:
            return np.ones(ctx.slots.shape[0], bool)
        family = ctx.state.stack_index(wanted.family)
        if family is None:
            return np.zeros(ctx.slots.shape[0], bool)
        s = ctx.state
        ok = stack_ok(s.stack_family[ctx.slots], s.stack_version[ctx.slots], family, wanted)
        if wanted.max_sm:
            ok &= s.compute_capability[ctx.slots] <= wanted.max_sm
        return ok

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        wanted = parse_stack(ctx.job.software_stack)
        s = ctx.state
        family = s.stack_families[int(s.stack_family[slot])]
        code, sm = int(s.stack_version[slot]), float(s.compute_capability[slot])
        if wanted is None or satisfies(family, code, wanted, sm):
            return Status.success()
        model = s.models[int(s.model[slot])]
        if family == wanted.family and wanted.max_sm and sm > wanted.max_sm:
            return Status.unresolvable(
                f"{model} is sm_{sm * 10:.0f}; a {wanted} build targets up to sm_"
                f"{wanted.max_sm * 10:.0f}"
            )
        have = f"{family}-{code // 1_000_000}.{code // 1_000 % 1_000}" if code else family
        return Status.unresolvable(f"{model} runs {have}; the job is built for {wanted}")


def stack_ok(node_family: np.ndarray, node_code: np.ndarray, family: int, job: Stack) -> np.ndarray:
    """Vectorised `satisfies`: same family, and version unknown or new enough."""
    ok = node_family == family
    if not job.version:
        return ok
    new_enough = (node_code == 0) | (node_code >= job.code)
    if job.family in STRICT_MAJOR:
        new_enough &= (node_code == 0) | (node_code // 1_000_000 == job.version[0])
    return ok & new_enough
