"""Every benchmark, with the arguments of its full and its quick run and its headline figures.

`python -m bench all` runs each entry's `full` arguments, `--quick` its `quick` ones; what an
entry holds is `bench._tools.figures`.
"""

from __future__ import annotations

from bench._tools.benches_stack import STACK_BENCHES
from bench._tools.figures import CPU, VIRTUAL, Bench, Figure
from bench._tools.figures import figure as _f

__all__ = ["BENCHES", "BY_NAME", "Bench", "Figure", "select"]

BENCHES: tuple[Bench, ...] = (
    Bench(
        "scorer",
        "scorer",
        "--nodes 10000",
        "--nodes 10000 --decisions 1000 --rounds 2",
        (
            _f(
                "single GPU",
                "results/single_gpu/decisions_per_s",
                "decisions/s",
                "≥ 5,000/s",
                up=True,
            ),
            _f("single-GPU p99", "results/single_gpu/p99_ms", "ms", "≤ 1 ms", floor=0.05),
            _f("8-GPU p99", "results/gpu8/p99_ms", "ms", "≤ 1 ms", floor=0.05),
            _f("64-GPU gang p99", "results/gang64/p99_ms", "ms", "≤ 2 ms", floor=0.05),
        ),
        "decision core, 10,000 nodes, decide only",
        1,
    ),
    Bench(
        "worker_costs",
        "worker_costs",
        "",
        "--nodes 300 --jobs 600 --hold 150",
        (
            _f(
                "worker CPU per job (own code)",
                "cpu_us_per_job_own_code",
                "µs",
                "≤ 1,000 µs",
                tolerance=CPU,
            ),
        ),
        "the worker's own code per job, in process",
        2,
    ),
    Bench(
        "queue_costs",
        "queue_costs",
        "",
        "--nodes 300 --jobs 1500 --arrivals 60 --releases 10",
        (
            _f("release, full fleet", "release_cpu_ms", "ms", tolerance=CPU, floor=1),
            _f("arrival, full fleet", "arrival_cpu_ms", "ms", tolerance=CPU, floor=1),
        ),
        "a release and an arrival with a long queue",
        2,
    ),
    Bench(
        "horizon",
        "horizon",
        "",
        "--sizes 1000,5000 --ticks 10 --nodes 300",
        (_f("heap per finished job", "heap_bytes_per_finished_job", "B", tolerance=CPU),),
        "memory and tick cost of the jobs a worker remembers",
        2,
    ),
    Bench(
        "ledger",
        "ledger",
        "--jobs 100000 --tail-jobs 1000",
        "--jobs 10000 --tail-jobs 200",
        (
            _f("fold whole logs", "whole_read_s", "s", tolerance=CPU, floor=0.2),
            _f("load saved ledger", "load_s", "s", tolerance=CPU, floor=0.05),
        ),
        "start-up: whole decision logs vs saved ledger + tail",
        2,
    ),
    Bench(
        "bandwidth",
        "bandwidth",
        "--rounds 300",
        "--skip-replay --rounds 60",
        (
            _f("recompute p99", "recompute/round_wall_ms/p99", "ms", "≤ 10 ms", floor=1),
            _f(
                "replay blind / aware JCT (min over seeds)",
                "replay/speedup_min",
                "x",
                "≥ 1.3x",
                up=True,
                tolerance=VIRTUAL,
            ),
        ),
        "bandwidth quotas: recompute round; network-aware replay",
        12,
    ),
    Bench(
        "spread",
        "spread",
        "",
        "--seconds 60",
        (
            _f(
                "largest region's share",
                "max_region_share",
                "%",
                "≤ 50 %",
                tolerance=0.1,
                scale=100,
            ),
        ),
        "the demo fleet's placements by region (virtual clock)",
        1,
    ),
    Bench(
        "packing",
        "packing",
        "",
        "--nodes 60 --seeds 0",
        (
            _f(
                "gpuflow allocation at 130 % demand",
                "policies/gpuflow/alloc_at_130_pct",
                "%",
                "≥ fgd",
                up=True,
                tolerance=VIRTUAL,
            ),
            _f(
                "fgd allocation at 130 % demand",
                "policies/fgd/alloc_at_130_pct",
                "%",
                up=True,
                tolerance=VIRTUAL,
            ),
        ),
        "packing traces, arrivals only (virtual clock)",
        6,
    ),
    Bench(
        "quality",
        "quality",
        "",
        "--jobs 150 --static-jobs 30 --lams 180 --seeds 0",
        (
            _f(
                "fifo / gpuflow JCT at 180 s",
                "loads/lam_180s/fifo_over_gpuflow_avg_jct",
                "x",
                "≥ 1.8x",
                up=True,
                tolerance=VIRTUAL,
            ),
            _f(
                "gpuflow / bound at 180 s",
                "loads/lam_180s/gpuflow_over_bound",
                "x",
                tolerance=VIRTUAL,
            ),
        ),
        "Gavel-recipe traces: average JCT against baselines (virtual clock)",
        35,
    ),
    Bench(
        "contention",
        "contention",
        "--jobs 2",
        "--hours 2 --jobs 2",
        (
            _f(
                "high-priority p99 wait (all)",
                "runs/all/high_priority_wait_s/p99",
                "s",
                tolerance=VIRTUAL,
                floor=30,
            ),
            _f(
                "GPU-hours lost (all)",
                "runs/all/lost_fraction",
                "%",
                "< 3 %",
                scale=100,
                tolerance=0.1,
                floor=0.05,
            ),
        ),
        "three tenants, preemption, quotas, backfill (virtual clock)",
        4,
    ),
    Bench(
        "forecast",
        "forecast",
        "",
        "--no-cli --series synthetic_demand,synthetic_shifts,taylor_hourly_day0",
        (
            _f(
                "worst selected / Holt-Winters MASE, 1 step",
                "summary/worst_ratio_1_steps",
                "x",
                "≤ 1.02 x",
                tolerance=VIRTUAL,
            ),
            _f(
                "worst selected / Holt-Winters MASE, 24 steps",
                "summary/worst_ratio_24_steps",
                "x",
                "≤ 1.02 x",
                tolerance=VIRTUAL,
            ),
            _f("`gpuflow forecast --backtest` wall", "cli/wall_s", "s", "< 60 s"),
        ),
        "rolling-origin backtests on nine series, three of them real demand",
        6,
    ),
    *STACK_BENCHES,
)

BY_NAME = {b.name: b for b in BENCHES}


def select(names: str | None) -> tuple[Bench, ...]:
    """The benches named (comma-separated), all of them for None; an unknown name is an error."""
    if not names:
        return BENCHES
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in BY_NAME]
    if unknown:
        raise ValueError(f"unknown bench {unknown[0]!r} (known: {', '.join(BY_NAME)})")
    return tuple(BY_NAME[n] for n in wanted)
