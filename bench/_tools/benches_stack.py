"""The benches of the running stack: history, broker, telemetry, pipeline, soak, scale-out,
fuzz, the node executor, and the services replay (`bench._tools.registry` lists them after the
decision-core and replay benches)."""

from __future__ import annotations

from bench._tools.figures import CPU, VIRTUAL, Bench
from bench._tools.figures import figure as _f

__all__ = ["STACK_BENCHES"]

STACK_BENCHES: tuple[Bench, ...] = (
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
    Bench(
        "executor",
        "executor",
        "",
        "--seconds 15 --cancels 10",
        (
            _f("submit to process started p99", "submit_to_started_s/p99", "s", "≤ 1 s"),
            _f("cancel to process gone p99", "cancel_to_gone_s/p99", "s", "≤ grace + 1 s"),
            _f("executor CPU per job", "executor_cpu_s_per_job", "s", tolerance=CPU),
        ),
        "8 local node executors, 1-second jobs at 20 jobs/s",
        2,
    ),
    Bench(
        "services",
        "services",
        "",
        "--seeds 0 --days 2",
        (
            _f(
                "worst seed, minutes within SLO",
                "summary/worst_within_slo",
                "%",
                "≥ 99 %",
                up=True,
                tolerance=VIRTUAL,
                scale=100.0,
            ),
            _f(
                "worst seed, GPU-hours / static peak",
                "summary/worst_gpu_hours_vs_static",
                "x",
                "≤ 0.8 x",
                tolerance=VIRTUAL,
            ),
            _f(
                "worst seed, SLO-minutes missed / reactive",
                "summary/worst_missed_vs_reactive",
                "x",
                "≤ 0.5 x",
                tolerance=VIRTUAL,
            ),
            _f(
                "worst seed, replica utilisation",
                "summary/worst_utilisation",
                "%",
                "≥ 65 %",
                up=True,
                tolerance=VIRTUAL,
                scale=100.0,
            ),
        ),
        "4 inference services, a week of per-minute load, 3 seeds (virtual clock)",
        3,
    ),
    Bench(
        "slurm",
        "slurm",
        "--jobs 200 --rate 5",
        "--jobs 30 --rate 5",
        (
            _f("gpuflow adds at p99 over plain sbatch", "gpuflow_adds_p99_ms", "ms", "≤ 1,000 ms"),
            _f("submit to running p99, gpuflow", "gpuflow_submit_to_running_ms/p99", "ms"),
        ),
        "a real 4-node Slurm 22.05: the same jobs through gpuflow and through sbatch",
        3,
    ),
)
