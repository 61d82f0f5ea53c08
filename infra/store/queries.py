"""Ready queries over the history, one constant each; docs/queries.md shows the same text.

The forecasting ones (demand series, forecast error and scores) are `infra.store.forecast_queries`,
named here too: `QUERIES` is every ready query by name.

Dedup rule: raw tables are ReplacingMergeTree on event_id, so exact figures read them with
FINAL. The 1-minute rollups (gpu_util_1m, capacity_1m, decision_latency_1m) are fast and
exact unless a redelivery after a crash re-inserted rows the sink could not recognise.
"""

from __future__ import annotations

from infra.store.forecast_queries import (
    FORECAST_ERROR,
    FORECAST_ERROR_BY_MODEL,
    FORECAST_SCORES,
    GPUS_IN_USE_SERIES,
    GPUS_REQUESTED_SERIES,
    GRID_SIGNAL_SERIES,
    SERIES_PARAMS,
    SERVICE_REQUESTS_SERIES,
)

__all__ = [
    "BUSIEST_LINKS_BY_HOUR",
    "CARBON_BY_REGION",
    "DECISION_LATENCY",
    "DECISION_LATENCY_1M",
    "FORECAST_ERROR",
    "FORECAST_ERROR_BY_MODEL",
    "FORECAST_SCORES",
    "FREE_CAPACITY_AND_QUEUE_1M",
    "GPUS_IN_USE_SERIES",
    "GPUS_REQUESTED_SERIES",
    "GPU_HOURS_AND_COST_BY_TENANT",
    "GPU_HOURS_LOST_TO_PREEMPTION_BY_TENANT",
    "GRID_SIGNAL_SERIES",
    "JOB_EPOCHS",
    "PREEMPTIONS_AND_MIGRATIONS",
    "QUERIES",
    "QUERY_PARAMS",
    "QUEUE_WAIT_BY_PRIORITY",
    "QUEUE_WAIT_BY_TENANT_AND_CLASS",
    "SERVICE_REQUESTS_SERIES",
    "UTILISATION_BY_REGION_MODEL",
]

UTILISATION_BY_REGION_MODEL = """\
SELECT minute, region, gpu_model,
    round(avgMerge(util_avg), 2) AS util_pct,
    maxMerge(util_max) AS util_max_pct,
    uniqMerge(gpus) AS gpus,
    countMerge(samples) AS samples
FROM gpu_util_1m
GROUP BY minute, region, gpu_model
ORDER BY minute, region, gpu_model"""

FREE_CAPACITY_AND_QUEUE_1M = """\
SELECT minute, region, gpu_model,
    round(avgMerge(total_gpus_avg), 2) AS total_gpus,
    round(avgMerge(free_gpus_avg), 2) AS free_gpus,
    minMerge(free_gpus_min) AS free_gpus_min,
    round(avgMerge(queue_depth_avg), 2) AS queue_depth,
    maxMerge(queue_depth_max) AS queue_depth_max
FROM capacity_1m
GROUP BY minute, region, gpu_model
ORDER BY minute, region, gpu_model"""

QUEUE_WAIT_BY_PRIORITY = """\
SELECT priority,
    count() AS placed,
    quantileExact(0.5)(queue_wait_ms) AS p50_wait_ms,
    quantileExact(0.99)(queue_wait_ms) AS p99_wait_ms
FROM placement_decisions FINAL
WHERE outcome = 'PLACED'
GROUP BY priority
ORDER BY priority DESC"""

DECISION_LATENCY = """\
SELECT region, outcome,
    count() AS decisions,
    quantileExact(0.5)(worker_us) AS p50_worker_us,
    quantileExact(0.99)(worker_us) AS p99_worker_us,
    max(worker_us) AS max_worker_us
FROM placement_decisions FINAL
GROUP BY region, outcome
ORDER BY region, outcome"""

DECISION_LATENCY_1M = """\
SELECT minute, region, gpu_model,
    countMerge(decisions) AS decisions,
    quantilesTDigestMerge(0.5, 0.99)(worker_us_q) AS worker_us_p50_p99,
    quantilesTDigestMerge(0.5, 0.99)(queue_wait_ms_q) AS queue_wait_ms_p50_p99
FROM decision_latency_1m
GROUP BY minute, region, gpu_model
ORDER BY minute, region, gpu_model"""

GPU_HOURS_AND_COST_BY_TENANT = """\
WITH placed AS (
    SELECT job_id, argMax(tenant, ts) AS tenant, argMax(gpu_count, ts) AS gpus,
        argMax(ifNull(price_per_hour, 0), ts) AS price_per_hour
    FROM placement_decisions FINAL
    WHERE outcome = 'PLACED'
    GROUP BY job_id
), runs AS (
    SELECT job_id, minIf(ts, type = 'STARTED') AS started,
        maxIf(ts, type IN ('FINISHED', 'FAILED', 'EVICTED')) AS ended
    FROM job_events FINAL
    GROUP BY job_id
    HAVING countIf(type = 'STARTED') > 0 AND countIf(type IN ('FINISHED', 'FAILED', 'EVICTED')) > 0
)
SELECT p.tenant AS tenant,
    count() AS jobs,
    round(sum(p.gpus * dateDiff('millisecond', r.started, r.ended) / 3600000.0), 4) AS gpu_hours,
    round(sum(p.price_per_hour * dateDiff('millisecond', r.started, r.ended) / 3600000.0), 4)
        AS cost_usd
FROM placed AS p
INNER JOIN runs AS r USING (job_id)
GROUP BY tenant
ORDER BY tenant"""

CARBON_BY_REGION = """\
WITH per_gpu AS (
    SELECT region, toStartOfHour(ts) AS hour, toStartOfMinute(ts) AS minute, node_id,
        gpu_index, avg(power_w) AS watts
    FROM node_telemetry FINAL
    GROUP BY region, hour, minute, node_id, gpu_index
), energy AS (
    SELECT region, hour, sum(watts) / 1000 / 60 AS kwh
    FROM per_gpu
    GROUP BY region, hour
), grid AS (
    SELECT region, toStartOfHour(ts) AS hour, avg(carbon_g_per_kwh) AS g_per_kwh
    FROM grid_signals FINAL
    GROUP BY region, hour
)
SELECT e.region AS region,
    round(sum(e.kwh), 4) AS kwh,
    round(sum(e.kwh * g.g_per_kwh) / 1000, 4) AS kg_co2
FROM energy AS e
INNER JOIN grid AS g ON e.region = g.region AND e.hour = g.hour
GROUP BY region
ORDER BY region"""

PREEMPTIONS_AND_MIGRATIONS = """\
SELECT region,
    sum(preemptions) AS preemptions,
    sum(preempted_gpus) AS preempted_gpus,
    sum(migrations) AS migrations,
    sum(cross_region) AS cross_region_migrations
FROM (
    SELECT region, count() AS preemptions, sum(victim_gpu_count) AS preempted_gpus,
        toUInt64(0) AS migrations, toUInt64(0) AS cross_region
    FROM preemption_decisions FINAL
    GROUP BY region
    UNION ALL
    SELECT from_region AS region, toUInt64(0), toUInt64(0), count(), countIf(cross_region)
    FROM migration_decisions FINAL
    GROUP BY region
)
GROUP BY region
ORDER BY region"""

BUSIEST_LINKS_BY_HOUR = """\
WITH quota AS (
    SELECT link_id, job_id, tenant, ts, gbps,
        least(valid_until_ts, leadInFrame(ts, 1, valid_until_ts) OVER (
            PARTITION BY job_id, link_id ORDER BY ts
            ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)) AS until
    FROM bandwidth_quotas FINAL
), used AS (
    SELECT toStartOfHour(ts) AS hour, link_id, job_id, any(tenant) AS tenant,
        sum(gbps * greatest(0, dateDiff('millisecond', ts, until))) / 1000 / 8 AS gb
    FROM quota
    GROUP BY hour, link_id, job_id
    HAVING gb > 0
), granted AS (
    SELECT hour, link_id, sum(gb) AS granted_gb,
        arraySlice(arrayReverseSort(u -> u.3, groupArray((job_id, tenant, round(gb, 3)))), 1, 3)
            AS top_users
    FROM used
    GROUP BY hour, link_id
), link AS (
    SELECT toStartOfHour(ts) AS hour, link_id, avg(capacity_gbps) AS link_gbps,
        avg(used_gbps) AS cross_gbps
    FROM link_telemetry FINAL
    GROUP BY hour, link_id
)
SELECT l.hour AS hour, l.link_id AS link_id,
    round(l.link_gbps, 2) AS capacity_gbps,
    round(100 * l.cross_gbps / l.link_gbps, 2) AS cross_traffic_pct,
    round(g.granted_gb, 3) AS granted_gb,
    round(100 * g.granted_gb * 8 / (l.link_gbps * 3600), 2) AS granted_pct,
    round(100 * l.cross_gbps / l.link_gbps + 100 * g.granted_gb * 8 / (l.link_gbps * 3600), 2)
        AS busy_pct,
    g.top_users AS top_users
FROM link AS l
LEFT JOIN granted AS g ON l.hour = g.hour AND l.link_id = g.link_id
ORDER BY hour, busy_pct DESC, link_id"""
GPU_HOURS_LOST_TO_PREEMPTION_BY_TENANT = """\
WITH evicted AS (
    SELECT job_id, epoch, max(lost_gpu_s) AS lost_gpu_s
    FROM job_events FINAL
    WHERE type = 'EVICTED'
    GROUP BY job_id, epoch
)
SELECT p.victim_tenant AS tenant,
    count() AS preemptions,
    countIf(p.cause = 'RECLAIM') AS reclaims,
    sum(p.victim_gpu_count) AS gpus_evicted,
    countIf(e.job_id = '') AS not_reported,
    round(sum(if(e.job_id = '', p.expected_lost_gpu_s, e.lost_gpu_s)) / 3600, 4) AS gpu_hours_lost
FROM preemption_decisions AS p FINAL
LEFT JOIN evicted AS e ON e.job_id = p.job_id AND e.epoch = p.victim_epoch
GROUP BY tenant
ORDER BY gpu_hours_lost DESC, tenant"""

QUEUE_WAIT_BY_TENANT_AND_CLASS = """\
SELECT tenant, priority_class,
    epoch > 0 AS requeued,
    count() AS placed,
    quantileExact(0.5)(queue_wait_ms) AS p50_wait_ms,
    quantileExact(0.99)(queue_wait_ms) AS p99_wait_ms
FROM placement_decisions FINAL
WHERE outcome = 'PLACED'
GROUP BY tenant, priority_class, requeued
ORDER BY tenant, priority_class, requeued"""
JOB_EPOCHS = """\
SELECT epoch, state, region, nodes, gpus, placed, started, ended, exit_code, cause,
    round(gpu_hours, 4) AS gpu_hours, moves, round(progress, 3) AS progress, stderr_tail
FROM job_epochs
WHERE job_id = {job:String}
ORDER BY epoch"""

QUERIES: dict[str, str] = {
    "utilisation_by_region_model": UTILISATION_BY_REGION_MODEL,
    "free_capacity_and_queue_1m": FREE_CAPACITY_AND_QUEUE_1M,
    "queue_wait_by_priority": QUEUE_WAIT_BY_PRIORITY,
    "decision_latency": DECISION_LATENCY,
    "decision_latency_1m": DECISION_LATENCY_1M,
    "gpu_hours_and_cost_by_tenant": GPU_HOURS_AND_COST_BY_TENANT,
    "carbon_by_region": CARBON_BY_REGION,
    "preemptions_and_migrations": PREEMPTIONS_AND_MIGRATIONS,
    "forecast_error": FORECAST_ERROR,
    "busiest_links_by_hour": BUSIEST_LINKS_BY_HOUR,
    "gpu_hours_lost_to_preemption_by_tenant": GPU_HOURS_LOST_TO_PREEMPTION_BY_TENANT,
    "queue_wait_by_tenant_and_class": QUEUE_WAIT_BY_TENANT_AND_CLASS,
    "forecast_error_by_model": FORECAST_ERROR_BY_MODEL,
    "forecast_scores": FORECAST_SCORES,
    "gpus_in_use_series": GPUS_IN_USE_SERIES,
    "gpus_requested_series": GPUS_REQUESTED_SERIES,
    "grid_signal_series": GRID_SIGNAL_SERIES,
    "service_requests_series": SERVICE_REQUESTS_SERIES,
    "job_epochs": JOB_EPOCHS,
}

# Parameters the parametrised ready queries need (example values; `gpuflow sql --param`).
QUERY_PARAMS: dict[str, dict[str, str]] = {"job_epochs": {"job": "job-1"}, **SERIES_PARAMS}
