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
| load_balance   | 3                                        |
| porting        | 10 (only a portable job's scores differ) |

The final score is sum(w x s) / sum(w) over the configured plugins, so it stays in 0..100.
"""

from __future__ import annotations

from collections.abc import Mapping

from scorer.types import JobSpec

__all__ = ["job_weights"]


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
        "load_balance": 3.0,
        "porting": 10.0,
    }
    if overrides:
        weights.update(overrides)
    return weights
