"""Re-planning settings: one frozen set of knobs, with the reason for each default."""

from __future__ import annotations

from dataclasses import dataclass

from scorer.types import JobSpec

__all__ = ["ReplanConfig"]


@dataclass(frozen=True)
class ReplanConfig:
    """How eagerly gpuflow decides again. Times are seconds."""

    enabled: bool = True
    restore_s: float = 60.0  # reloading a checkpoint on the new GPUs (the twin charges the same)
    checkpoint_interval_s: float = 1800.0  # periodic checkpoints of a job that declares none
    margin_s: float = 120.0  # a move must save this much beyond restore + lost work ...
    margin_frac: float = 0.05  # ... plus this share of the time the job still needs where it is
    hold_s: float = 300.0  # target GPUs are held this long for MIGRATED, then released
    job_cooldown_s: float = 1800.0  # a job moves at most once in this long
    max_moves_per_job: int = 4  # and at most this often in its life
    region_window_s: float = 300.0  # per region at most `region_max_moves` moves begin ...
    region_max_moves: int = 8  # ... in any such window (the executor's checkpoint bandwidth)
    max_moves_per_pass: int = 4  # better-match moves proposed per region and pass
    pass_gap_s: float = 2.0  # a region's move passes run at most this often: a burst of
    # releases tries the queue each time but looks for moves once (the timer catches up)
    defrag_moves_per_pass: int = 2  # defragmentation moves proposed per region and pass
    defrag_gangs: int = 4  # waiting gangs a region's pass tries to free a node for (oldest)
    defrag_nodes: int = 8  # nodes tried per gang (fewest seconds of moves first): the work of
    # a pass stays bounded however long the queue and however full the region
    # cheaper or greener (scorer.replan.footprint): a move must cut the job's remaining
    # footprint by this share, restore and lost work charged, weighted like the deferral's
    footprint: bool = True  # look for cheaper or greener places at all
    footprint_margin: float = 0.10  # 10 %: small price or grid swings do not move jobs
    footprint_every_s: float = 60.0  # a region's pass at most once a minute: price and grid
    # signals change over minutes to hours, and the pass asks the placer about many jobs
    footprint_candidates: int = 8  # jobs per pass the placer is asked about (best bound first)
    carbon_weight: float = 0.5  # 1: carbon only, 0: price only (forecast.deferral_carbon_weight)
    max_slowdown: float = 0.0  # a move may finish at most this share later (0: never later)
    cross_region: bool = True  # to other regions this worker holds (allowed_regions permitting)
    aging: float = 0.25  # queue: a second waited takes 0.25 s off a job's key (it outranks any
    # newcomer after waiting 4x its own expected time there, so nothing starves)

    def interval_s(self, job: JobSpec) -> float:
        """The job's checkpoint period: its own, else `checkpoint_interval_s`."""
        return float(job.checkpoint_interval_s or self.checkpoint_interval_s)

    def __post_init__(self) -> None:
        if not 0.0 <= self.carbon_weight <= 1.0:
            raise ValueError(f"carbon_weight: must be in [0, 1], got {self.carbon_weight}")
