"""Every benchmark, with the arguments of its full and its quick run and its headline figures.

`python -m bench all` runs each entry's `full` arguments, `--quick` its `quick` ones. A figure
names where it sits in the result file, which way is better, how far it may move from the last
committed result before the run says so (`tolerance`, a fraction of the committed value, never
less than `floor` in the figure's own unit) and the target an issue set for it, if any.

Wall-clock figures (latency, events/s) move with the load on a shared machine, so their
tolerance is wide; CPU time per unit of work moves less; figures on a virtual clock (replays)
move only when the code's decisions do.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

WALL = 0.30  # wall-clock figure on a shared 2-core box
CPU = 0.20  # CPU seconds per unit of work
VIRTUAL = 0.02  # virtual-clock figure: moves only when decisions change


@dataclass(frozen=True)
class Figure:
    """One headline figure of a result file."""

    label: str
    path: tuple[str | int, ...]  # keys (and list indices) into the result JSON
    unit: str = ""
    higher_is_better: bool = False
    tolerance: float = WALL
    floor: float = 0.0
    target: str = ""  # as the issue states it, e.g. "≥ 5,000/s"
    scale: float = 1.0  # shown value = stored value x scale (fractions as %)


@dataclass(frozen=True)
class Bench:
    """One benchmark script (`bench/<module>.py`) and the result file it writes."""

    name: str  # result file stem: bench/results/<name>.json
    module: str  # python -m bench.<module>
    full: str  # arguments of the full run, as typed
    quick: str  # arguments of the quick run
    figures: tuple[Figure, ...]
    about: str
    minutes_full: float  # about how long the full run takes on the 2-core box

    def args(self, quick: bool) -> tuple[str, ...]:
        return tuple(shlex.split(self.quick if quick else self.full))


def _f(label: str, path: str, unit: str, target: str = "", up: bool = False, **kw: float) -> Figure:
    """A figure at `path` ("a/b/-1/c": keys, and list indices as integers)."""
    keys = tuple(int(k) if k.lstrip("-").isdigit() else k for k in path.split("/"))
    return Figure(label, keys, unit, higher_is_better=up, target=target, **kw)


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
        "--no-cli",
        (
            _f(
                "selected sMAPE, 1 step",
                "targets/selected_smape_1_step_le_8pct/measured",
                "%",
                "≤ 8 %",
                tolerance=VIRTUAL,
            ),
            _f("`gpuflow forecast --backtest` wall", "cli/wall_s", "s", "< 60 s"),
        ),
        "rolling-origin backtest on examples/demand.csv",
        2,
    ),
    Bench(
        "history",
        "history",
        "",
        "--rows 2000000 --live-events 30000",
        (
            _f("bulk insert", "rows_per_s", "rows/s", "≥ 500,000", up=True),
            _f("live sink", "live_sink_events_per_s", "events/s", "≥ 50,000", up=True),
            _f("1-minute rollup of a day", "rollup_query_s", "s", "≤ 1 s", floor=0.05),
        ),
        "chDB bulk insert, rollup query, live sink through the broker",
        2,
    ),
    Bench(
        "broker_fetch",
        "broker_fetch",
        "--engine logbroker",
        "--engine logbroker --stages 0,5000 --fetches 50",
        (
            _f(
                "broker CPU per stored batch per fetch",
                "broker_cpu_us_per_stored_batch_per_fetch",
                "µs",
                "flat (0)",
                floor=0.5,
            ),
        ),
        "embedded broker: fetch cost against what a partition holds",
        3,
    ),
    Bench(
        "broker_fetch_wait",
        "broker_fetch_wait",
        "",
        "--stored 500 --seconds 6 --settings wait50,wait1000_min1",
        (_f("broker CPU, 50 ms waits", "by_setting/wait50/broker_cpu_pct", "%", floor=2),),
        "embedded broker: CPU per consumer fetch setting",
        2,
    ),
    Bench(
        "broker_codec",
        "broker_codec",
        "",
        "--codecs zstd --nodes 300 --seconds 30",
        (
            _f(
                "broker RSS growth, zstd telemetry",
                "by_codec/zstd/broker_rss_growth_mb_per_min",
                "MB/min",
                floor=1,
            ),
        ),
        "embedded broker memory per producer codec",
        4,
    ),
    Bench(
        "broker_rollover",
        "broker_rollover",
        "",
        "",
        (),
        "what deleting a topic does to clients (Tansu)",
        1,
    ),
    Bench(
        "telemetry_full",
        "telemetry",
        "--nodes 10000 --seconds 30 --full",
        "--nodes 2000 --seconds 10 --warmup 3 --full",
        (
            _f("lag p99, every GPU every second", "lag_p99_ms", "ms", "≤ 1,000 ms"),
            _f(
                "worker CPU per event",
                "cpu_us_per_ingested_event/worker",
                "µs",
                "≤ 90 µs",
                tolerance=CPU,
            ),
        ),
        "telemetry at full rate through the worker",
        2,
    ),
    Bench(
        "telemetry_tiered",
        "telemetry",
        "--nodes 10000 --seconds 30",
        "--nodes 2000 --seconds 12 --warmup 8",
        (_f("lag p99, tiered cadence", "lag_p99_ms", "ms", "≤ 1,000 ms"),),
        "telemetry at the agents' tiered cadence",
        2,
    ),
    Bench(
        "pipeline",
        "pipeline",
        "--nodes 1000 --rate 100 --seconds 60",
        "--nodes 300 --rate 50 --seconds 15 --warmup 3 --idle 3",
        (
            _f("end-to-end p99", "p99_ms", "ms"),
            _f("worker CPU per decided job", "cpu_ms_per_decided_job/worker", "ms", tolerance=CPU),
            _f("broker CPU per decided job", "cpu_ms_per_decided_job/broker", "ms", tolerance=CPU),
        ),
        "the embedded stack end to end at a fixed rate",
        2,
    ),
    Bench(
        "pipeline_sweep",
        "pipeline",
        "--sweep --rates 150,175,200,225,250,300,400 --seconds 30",
        "--sweep --rates 100,200 --seconds 12 --warmup 3 --nodes 300 --idle 3",
        (
            _f(
                "highest sustained rate",
                "max_sustained_jobs_per_s",
                "jobs/s",
                "≥ 400 jobs/s, p99 ≤ 1 s",
                up=True,
            ),
        ),
        "rising rates until one is not held",
        5,
    ),
    Bench(
        "soak",
        "soak",
        "--minutes 10 --mean-duration-s 12",
        "--minutes 2 --rate 50 --nodes 300 --mean-duration-s 12",
        (
            _f("p99 in the last minute", "last_minute_p99_ms", "ms", "≤ 1,000 ms"),
            _f("last / first minute p99", "p99_ratio_last_over_first", "x", "≤ 1.5x"),
        ),
        "latency and memory per minute over a long run",
        11,
    ),
    Bench(
        "scaleout",
        "scaleout",
        "--workers 1,2,3 --nodes 300 --rate 20 --seconds 30 --drain 90",
        "--workers 1,2 --nodes 120 --rate 10 --seconds 10 --drain 30 --idle 3",
        (_f("decided jobs/s, most workers", "runs/-1/jobs_per_s", "jobs/s", up=True),),
        "one to three workers of one app",
        6,
    ),
    Bench(
        "fuzz",
        "fuzz",
        "--per-topic 10000",
        "--per-topic 40 --rate 200",
        (
            _f("GPUs promised twice", "double_bookings", "", "0", floor=0.5),
            _f("worker restarts", "worker_restarts", "", "0", floor=0.5),
        ),
        "hostile records on every consumed topic",
        60,
    ),
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
