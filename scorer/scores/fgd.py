"""Score: Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation", ATC '23).

FGD places a task where the expected fragmentation (`scorer.fragmix`: FGD's measure, host CPU
and memory included) grows least, against the target workload distribution learned online from
the jobs this plugin has scored (each job counted once, no prior), so it follows the trace:
score = 50 - 50 x (F_after - F_before) / requested milli, clipped to 0..100.
"""

from __future__ import annotations

import numpy as np

from scorer.fragmix import FULL, LearnedMix, MixClasses, Profile, fragmentation
from scorer.framework import CycleContext
from scorer.scores.fragmentation import NodeFragmentation, growth_score, placement_growth

__all__ = ["NAME", "FgdScore", "expected_fragmentation"]

NAME = "fgd"


class FgdScore:
    name = NAME

    def __init__(self) -> None:
        self.mix = LearnedMix(prior=None)
        self.before = NodeFragmentation()

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        job = ctx.job
        self.mix.observe(job.job_id, job.gpu_count, job.gpu_milli, job.cpu_milli, job.memory_mib)
        growth, requested = placement_growth(ctx, slots, self.mix, self.before)
        return growth_score(growth, requested)


def expected_fragmentation(free: np.ndarray, classes: dict[tuple[int, int], float]) -> np.ndarray:
    """Mix-weighted free milli-GPU each node cannot give to a task class, per row of `free`
    (host resources not considered).

    e.g. free [1000, 300, 0, 0], classes {(1 GPU, 1000): 1.0}: the 300 on the partly used GPU
    is a fragment -> 300; with {(2 GPUs, 1000): 1.0}: only one whole GPU -> all 1300.
    """
    keys = list(classes)
    total = sum(classes.values()) or 1.0
    mix = MixClasses(
        np.array([k[0] for k in keys], np.int64),
        np.array([k[1] if k[1] < FULL else FULL for k in keys], np.int64),
        np.zeros(len(keys)),
        np.zeros(len(keys)),
        np.array([classes[k] / total for k in keys]),
    )
    return fragmentation(Profile.of_free(free), mix)
