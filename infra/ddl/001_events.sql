-- One table per event type. Delivery is at-least-once, so every table is a
-- ReplacingMergeTree whose ORDER BY ends in event_id: replays collapse on merge, and queries
-- that must not double count read with FINAL (or count uniqExact(event_id)).
-- Timestamps are DateTime64(3, 'UTC'); region / model / tenant are LowCardinality(String).

CREATE TABLE IF NOT EXISTS node_inventory (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    node_id String, region LowCardinality(String), zone LowCardinality(String),
    rack String, cloud LowCardinality(String), gpu_model LowCardinality(String),
    gpu_count UInt16, gpu_memory_mib UInt32, interconnect LowCardinality(String),
    nvlink_islands Array(Array(UInt16)), cpu_milli UInt32, memory_mib UInt64,
    price_per_gpu_hour Float64, compute_capability Nullable(String),
    driver_version Nullable(String), mig_enabled Bool, labels Map(String, String)
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (region, node_id, ts, event_id);

-- One row per GPU sample; node-level fields (node_healthy, disk/net, energy) repeat on each
-- GPU row of the same event: aggregate them with any() per event_id. gpu_model is filled by
-- the history sink from the node's latest NodeInventory ('' when not yet known), so it stays
-- out of the sort key: a replay enriched differently still collapses with the original.
CREATE TABLE IF NOT EXISTS node_telemetry (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    node_id String, region LowCardinality(String), gpu_model LowCardinality(String),
    tier LowCardinality(String), full_snapshot Bool, node_healthy Bool,
    gpu_index UInt16, healthy Bool, util_pct Float32, mem_used_mib UInt32,
    mem_bw_util_pct Float32, nvlink_tx_mbps Float32, nvlink_rx_mbps Float32,
    temperature_c Float32, power_w Float32, sm_clock_mhz UInt32, throttle_reasons UInt64,
    ecc_errors UInt64, xid_events Array(Int32), perf_factor Float32,
    disk_read_mbps Nullable(Float32), disk_write_mbps Nullable(Float32),
    net_rx_mbps Nullable(Float32), net_tx_mbps Nullable(Float32),
    energy_j Nullable(Float64), perf_per_watt Nullable(Float32)
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (region, node_id, ts, gpu_index, event_id)
TTL toDateTime(ts) + INTERVAL 30 DAY;

CREATE TABLE IF NOT EXISTS link_telemetry (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    link_id String, src_region LowCardinality(String), dst_region LowCardinality(String),
    rtt_ms Float32, capacity_gbps Float32, used_gbps Float32
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (src_region, dst_region, ts, event_id)
TTL toDateTime(ts) + INTERVAL 30 DAY;

CREATE TABLE IF NOT EXISTS grid_signals (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    region LowCardinality(String), price_per_kwh Float64, carbon_g_per_kwh Float64,
    renewable_share Float32
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (region, ts, event_id);

CREATE TABLE IF NOT EXISTS jobs_submitted (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    job_id String, tenant LowCardinality(String), kind LowCardinality(String),
    model_family LowCardinality(String), job_type LowCardinality(String), params_b Float64,
    precision LowCardinality(String), data_parallel UInt16, tensor_parallel UInt16,
    pipeline_parallel UInt16, gpu_count UInt16, gpu_milli UInt32, min_gpu_memory_mib UInt32,
    cpu_milli UInt32, memory_mib UInt64, allowed_gpu_models Array(LowCardinality(String)),
    allowed_regions Array(LowCardinality(String)), cross_region_ok Bool,
    data_region Nullable(String), priority Int32, preemptible Bool,
    checkpoint_interval_s UInt32, deferrable_until_ts Nullable(DateTime64(3, 'UTC')),
    budget_usd Nullable(Float64), cost_speed_preference Float32,
    expected_duration_s Nullable(Float64), reference_gpu_model Nullable(String),
    total_steps Nullable(Int64)
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (tenant, ts, job_id, event_id);

CREATE TABLE IF NOT EXISTS job_events (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    job_id String, region LowCardinality(String), type LowCardinality(String),
    node_ids Array(String), phase LowCardinality(String), progress Float64, detail String
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (region, job_id, ts, event_id);

-- Free capacity per GPU model stays a Map; the capacity rollup ARRAY JOINs it.
CREATE TABLE IF NOT EXISTS region_state (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    region LowCardinality(String), window_start DateTime64(3, 'UTC'),
    window_end DateTime64(3, 'UTC'), nodes UInt32, healthy_nodes UInt32,
    total_gpus_by_model Map(LowCardinality(String), Int32),
    free_gpus_by_model Map(LowCardinality(String), Int32),
    max_free_per_node_by_model Map(LowCardinality(String), Int32),
    util_mean Float32, queue_depth UInt32, price_per_gpu_hour_mean Float64,
    carbon_g_per_kwh Float64
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (region, ts, event_id);

-- The embedded JobSubmitted keeps only the fields routing analysis needs.
CREATE TABLE IF NOT EXISTS jobs_routed (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    job_id String, tenant LowCardinality(String), priority Int32, gpu_count UInt16,
    submitted_ts DateTime64(3, 'UTC'), region LowCardinality(String),
    candidates Array(LowCardinality(String)), attempt UInt16, region_score Float64,
    refusals Map(String, Int32)
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (region, ts, event_id);

-- Assignments flatten to parallel arrays (nodes[i] got assignment_gpu_indices[i]) plus
-- derived node_count and queue_wait_ms (ts - submitted_ts).
CREATE TABLE IF NOT EXISTS placement_decisions (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    job_id String, outcome LowCardinality(String), region LowCardinality(String),
    tenant LowCardinality(String), priority Int32, gpu_model LowCardinality(String),
    gpu_count UInt16, nodes Array(String), assignment_gpu_indices Array(Array(UInt16)),
    assignment_gpu_milli Array(UInt32), node_count UInt16,
    expected_throughput Nullable(Float64), expected_duration_s Nullable(Float64),
    price_per_hour Nullable(Float64), score Float64,
    score_breakdown Map(LowCardinality(String), Float64), reasons Array(String),
    refusals Map(String, Int32), attempt UInt16, submitted_ts DateTime64(3, 'UTC'),
    queue_wait_ms Int64, worker_us UInt64
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (outcome, region, ts, event_id);

CREATE TABLE IF NOT EXISTS preemption_decisions (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    job_id String, for_job_id String, region LowCardinality(String),
    victim_nodes Array(String), victim_gpu_indices Array(Array(UInt16)),
    victim_gpu_milli Array(UInt32), victim_gpu_count UInt16, checkpoint_first Bool,
    victim_priority Int32, reason String
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (region, ts, event_id);

CREATE TABLE IF NOT EXISTS migration_decisions (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    job_id String, from_region LowCardinality(String), from_nodes Array(String),
    from_gpu_indices Array(Array(UInt16)), to_region LowCardinality(String),
    to_nodes Array(String), to_gpu_indices Array(Array(UInt16)), gpu_count UInt16,
    cross_region Bool, reason LowCardinality(String), expected_gain Float64
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (from_region, ts, event_id);

CREATE TABLE IF NOT EXISTS bandwidth_quotas (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    job_id String, link_id String, gbps Float64, valid_until_ts DateTime64(3, 'UTC'),
    phase LowCardinality(String)
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (link_id, ts, event_id);

-- Forecast points stay arrays: point i is for issued_ts + (i + 1) * step_s.
CREATE TABLE IF NOT EXISTS demand_forecasts (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    region LowCardinality(String), gpu_model LowCardinality(String),
    issued_ts DateTime64(3, 'UTC'), step_s UInt32, points Array(Float64),
    lower Array(Float64), upper Array(Float64), interval Float32,
    model LowCardinality(String)
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (region, gpu_model, ts, event_id);

CREATE TABLE IF NOT EXISTS dead_letters (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    source_topic LowCardinality(String), partition Int32, offset Int64,
    key Nullable(String), value Nullable(String), error String,
    consumer LowCardinality(String)
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (source_topic, ts, event_id);
