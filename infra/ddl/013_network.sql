-- The network (docs/network.md): quotas the bandwidth processor granted, link utilisation, and
-- the communication shape of jobs. Columns are added without DEFAULT expressions (the sink
-- inserts only plain columns): rows written before this migration read 0 or '' there.

ALTER TABLE link_telemetry ADD COLUMN IF NOT EXISTS loss_pct Float32;

ALTER TABLE bandwidth_quotas
    ADD COLUMN IF NOT EXISTS src_region LowCardinality(String),
    ADD COLUMN IF NOT EXISTS dst_region LowCardinality(String),
    ADD COLUMN IF NOT EXISTS tenant LowCardinality(String),
    ADD COLUMN IF NOT EXISTS demand_gbps Float64,
    ADD COLUMN IF NOT EXISTS weight Float64,
    ADD COLUMN IF NOT EXISTS capacity_gbps Float64,
    ADD COLUMN IF NOT EXISTS reason LowCardinality(String);

ALTER TABLE jobs_submitted
    ADD COLUMN IF NOT EXISTS grad_accum_steps UInt32,
    ADD COLUMN IF NOT EXISTS micro_batch UInt32,
    ADD COLUMN IF NOT EXISTS seq_len UInt32;

-- Link utilisation per minute: cross traffic over capacity, RTT and loss, from LinkTelemetry.
-- Read with the -Merge combinators, e.g. avgMerge(util_avg) GROUP BY minute, link_id.
CREATE TABLE IF NOT EXISTS link_util_1m (
    minute DateTime('UTC'), link_id String, src_region LowCardinality(String),
    dst_region LowCardinality(String), samples AggregateFunction(count),
    capacity_avg AggregateFunction(avg, Float32), used_avg AggregateFunction(avg, Float32),
    used_max AggregateFunction(max, Float32), util_avg AggregateFunction(avg, Float64),
    util_max AggregateFunction(max, Float64), rtt_avg AggregateFunction(avg, Float32),
    loss_max AggregateFunction(max, Float32)
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(minute)
ORDER BY (src_region, dst_region, link_id, minute)
TTL minute + INTERVAL 400 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS link_util_1m_mv TO link_util_1m AS
SELECT toStartOfMinute(ts) AS minute, link_id, src_region, dst_region,
    countState() AS samples, avgState(capacity_gbps) AS capacity_avg,
    avgState(used_gbps) AS used_avg, maxState(used_gbps) AS used_max,
    avgState(used_gbps / greatest(capacity_gbps, 1e-9)) AS util_avg,
    maxState(used_gbps / greatest(capacity_gbps, 1e-9)) AS util_max,
    avgState(rtt_ms) AS rtt_avg, maxState(loss_pct) AS loss_max
FROM link_telemetry
GROUP BY minute, link_id, src_region, dst_region;
