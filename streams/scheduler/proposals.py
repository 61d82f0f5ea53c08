"""The placer's proposal for a job in a region, under its tenant's quota.

The tenancy gate gives tiers of GPU models (own quota first, then borrowed); the placer is
asked tier by tier, the job's spec limited to each tier's models. A gang that fits no single
region may span the regions this worker holds when the job allows it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from scorer import ClusterState, JobSpec, PlacementResult
from streams.scheduler.tenancy import CAPACITY, QUOTA
from streams.scheduler.waiting import CAPACITY_TEXT

if TYPE_CHECKING:
    from streams.scheduler.protocols import Proposes

__all__ = ["propose", "restrict"]


def propose(
    s: Proposes, routed: Mapping[str, Any], region: str, *, explain: bool = False
) -> tuple[PlacementResult, str, str]:
    """The placer's proposal under the tenant's quota: (result, wait code, wait reason).
    `explain`: a refusal carries its reasons (only one that is sent needs them)."""
    spec = s.spec_of(routed)
    gate = s.tenancy.gate(spec, region)
    if not gate.tiers:
        return PlacementResult(placed=False, reasons=(gate.reason,)), gate.code, gate.reason
    result: PlacementResult | None = None
    for models in gate.tiers:
        target = spec if models is None else restrict(s.state, spec, models)
        if target is None:
            continue
        result = s.placer.place(target, region, explain=explain)
        if result.placed:
            return result, "", ""
    if result is None:
        why = "quota: none of the job's allowed GPU models has quota here"
        return PlacementResult(placed=False, reasons=(why,)), QUOTA, why
    if s.cross_region and spec.cross_region_ok and spec.gpu_count > 1:
        wide = s.placer.place(spec, None, explain=explain)  # over the regions held here
        if wide.placed:
            return wide, "", ""
        if result.never_fits and not wide.never_fits:
            result = wide  # queue it: it fits once links or GPUs free
    return result, CAPACITY, CAPACITY_TEXT


def restrict(state: ClusterState, spec: JobSpec, models: Sequence[str]) -> JobSpec | None:
    """The spec limited to `models` (and the job's own allow-list); None when no model is
    left (an empty allow-list would mean "any")."""
    canon = state.catalog.canonical
    keep = tuple(
        m for m in models if not spec.allowed_gpu_models
        or canon(m) in {canon(a) for a in spec.allowed_gpu_models}
    )  # fmt: skip
    return dataclasses.replace(spec, allowed_gpu_models=keep) if keep else None
