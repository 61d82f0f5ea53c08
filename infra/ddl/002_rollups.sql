-- 1-minute rollups by region and GPU model, kept by materialized views on insert.
-- Rollups see every inserted row, so they are only as duplicate-free as the inserts: the
-- history sink drops event_ids it already wrote in this process, but a redelivery after a
-- crash can count twice here. Exact figures come from the raw tables with FINAL.
-- Read them with the -Merge combinators, e.g. avgMerge(util_avg) GROUP BY minute, region.

CREATE TABLE IF NOT EXISTS gpu_util_1m (
    minute DateTime('UTC'), region LowCardinality(String), gpu_model LowCardinality(String),
    samples AggregateFunction(count), gpus AggregateFunction(uniq, String, UInt16),
    util_avg AggregateFunction(avg, Float32), util_max AggregateFunction(max, Float32),
    mem_bw_avg AggregateFunction(avg, Float32), power_avg AggregateFunction(avg, Float32),
    unhealthy AggregateFunction(sum, UInt8)
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(minute)
ORDER BY (region, gpu_model, minute)
TTL minute + INTERVAL 400 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS gpu_util_1m_mv TO gpu_util_1m AS
SELECT toStartOfMinute(ts) AS minute, region, gpu_model,
    countState() AS samples, uniqState(node_id, gpu_index) AS gpus,
    avgState(util_pct) AS util_avg, maxState(util_pct) AS util_max,
    avgState(mem_bw_util_pct) AS mem_bw_avg, avgState(power_w) AS power_avg,
    sumState(toUInt8(NOT healthy)) AS unhealthy
FROM node_telemetry
GROUP BY minute, region, gpu_model;

-- Free capacity per (region, model) from RegionSummary; queue depth is per region and
-- repeats on each of its models (one row per model per summary, so averages are unchanged).
CREATE TABLE IF NOT EXISTS capacity_1m (
    minute DateTime('UTC'), region LowCardinality(String), gpu_model LowCardinality(String),
    summaries AggregateFunction(count),
    total_gpus_avg AggregateFunction(avg, Int32), free_gpus_avg AggregateFunction(avg, Int32),
    free_gpus_min AggregateFunction(min, Int32), util_avg AggregateFunction(avg, Float32),
    queue_depth_avg AggregateFunction(avg, UInt32), queue_depth_max AggregateFunction(max, UInt32)
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(minute)
ORDER BY (region, gpu_model, minute)
TTL minute + INTERVAL 400 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS capacity_1m_mv TO capacity_1m AS
SELECT toStartOfMinute(ts) AS minute, region, gpu_model,
    countState() AS summaries,
    avgState(total_gpus_by_model[gpu_model]) AS total_gpus_avg,
    avgState(free_gpus_by_model[gpu_model]) AS free_gpus_avg,
    minState(free_gpus_by_model[gpu_model]) AS free_gpus_min,
    avgState(util_mean) AS util_avg,
    avgState(queue_depth) AS queue_depth_avg, maxState(queue_depth) AS queue_depth_max
FROM region_state
ARRAY JOIN mapKeys(total_gpus_by_model) AS gpu_model
GROUP BY minute, region, gpu_model;

-- Decision latency: worker_us is the worker's own time; queue_wait_ms is ts - submitted_ts.
CREATE TABLE IF NOT EXISTS decision_latency_1m (
    minute DateTime('UTC'), region LowCardinality(String), gpu_model LowCardinality(String),
    outcome LowCardinality(String), decisions AggregateFunction(count),
    worker_us_q AggregateFunction(quantilesTDigest(0.5, 0.99), UInt64),
    queue_wait_ms_q AggregateFunction(quantilesTDigest(0.5, 0.99), Int64),
    worker_us_avg AggregateFunction(avg, UInt64)
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(minute)
ORDER BY (region, gpu_model, outcome, minute)
TTL minute + INTERVAL 400 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS decision_latency_1m_mv TO decision_latency_1m AS
SELECT toStartOfMinute(ts) AS minute, region, gpu_model, outcome,
    countState() AS decisions,
    quantilesTDigestState(0.5, 0.99)(worker_us) AS worker_us_q,
    quantilesTDigestState(0.5, 0.99)(queue_wait_ms) AS queue_wait_ms_q,
    avgState(worker_us) AS worker_us_avg
FROM placement_decisions
GROUP BY minute, region, gpu_model, outcome;
