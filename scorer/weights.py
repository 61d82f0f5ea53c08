"""Per-job score weights, derived from the job's cost-versus-speed preference p (0..1).

| score          | weight                                   |
| -------------- | ---------------------------------------- |
| compute        | 10 + 40 p                                |
| cost           | 5 + 35 (1 - p)                           |
| memory_fit     | 10                                       |
| topology       | 0 for one GPU; 15, or 25 with TP/PP > 1  |
| carbon         | 5, or 15 when the job is deferrable      |
| data_affinity  | 10 when the job names a data region      |
| fragmentation  | 15                                       |
| fgd            | 15 (FGD's measure as each GPU model sees it) |
| model_pressure | 30                                       |
| load_balance   | 3                                        |
| communication  | 0 for one GPU; 20 for a gang             |
| porting        | 10 (only a portable job's scores differ) |

The final score is sum(w x s) / sum(w) over the configured plugins, so it stays in 0..100.

Under load (`under_load`, applied by the placer with the free share f of the GPUs in the scope
it places in): fragmentation weighs 15 / max(f, 1 / TIGHT_CAP), load_balance 3 x f and
model_pressure 30 x f (keeping a GPU model for the jobs pinned to it pays while there is room
to keep; on a full cluster what is left must be packed, whoever asks). A
stranded milli-GPU costs the jobs still to come a share of what is left free, 1 / f times more
on a cluster with f free than on an empty one, while spreading only pays while there is room
to spread into; this job's own speed and price matter the same at any load.
"""

from __future__ import annotations

from collections.abc import Mapping

from scorer.types import JobSpec

__all__ = ["TIGHT_CAP", "job_weights", "under_load"]

TIGHT_CAP = 10.0  # fragmentation grows at most 10x: from 10 % free on, it outweighs the rest


def job_weights(job: JobSpec, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Weights for `job`; `overrides` replace derived values (and add unknown names)."""
    p = min(1.0, max(0.0, job.cost_speed_preference))
    topology = 0.0
    if job.gpu_count > 1:
        topology = 25.0 if job.model_parallel > 1 else 15.0
    weights = {
        "compute": 10.0 + 40.0 * p,
        "cost": 5.0 + 35.0 * (1.0 - p),
        "memory_fit": 10.0,
        "topology": topology,
        "carbon": 15.0 if job.deferrable_until_ts is not None else 5.0,
        "data_affinity": 10.0 if job.data_region else 0.0,
        "fragmentation": 15.0,
        "fgd": 15.0,
        # pinned demand over free supply weighs twice the stranding: a job that may use one
        # model only has nowhere else to go, while stranded milli may still serve a share
        "model_pressure": 30.0,
        "load_balance": 3.0,
        "communication": 20.0 if job.gpu_count > 1 else 0.0,
        "porting": 10.0,
    }
    if overrides:
        weights.update(overrides)
    return weights


def under_load(weights: Mapping[str, float], free_share: float) -> dict[str, float]:
    """`weights` for a placement where `free_share` (0..1) of the GPUs in scope are free:
    fragmentation x 1 / max(f, 1 / TIGHT_CAP), load_balance and model_pressure x f; the rest
    unchanged.

    e.g. f 1.0: 15 and 3 as derived; f 0.5: 30 and 1.5; f 0.02: 15 x 10 = 150 and 0.06.
    """
    f = min(1.0, max(0.0, free_share))
    out = dict(weights)
    if "fragmentation" in out:
        out["fragmentation"] = out["fragmentation"] / max(f, 1.0 / TIGHT_CAP)
    if "load_balance" in out:
        out["load_balance"] = out["load_balance"] * f
    if "model_pressure" in out:  # keeping a model for pinned jobs pays while room is left
        out["model_pressure"] = out["model_pressure"] * f
    return out
