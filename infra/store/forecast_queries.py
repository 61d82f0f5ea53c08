"""The forecasting's ready queries: the demand and grid series a forecaster reads, bucketed
(`infra.store.series`), and how forecasts fared against what happened (docs/queries.md).
"""

from __future__ import annotations

__all__ = [
    "FORECAST_ERROR",
    "FORECAST_ERROR_BY_MODEL",
    "FORECAST_SCORES",
    "GPUS_IN_USE_SERIES",
    "GPUS_REQUESTED_SERIES",
    "GRID_SIGNAL_SERIES",
    "SERIES_PARAMS",
    "SERVICE_REQUESTS_SERIES",
]

# realized demand per region, GPU model and summary ('*': all models), for forecast error
_BUSY = """), busy AS (
    SELECT region, gm AS gpu_model, ts,
        total_gpus_by_model[gm] - free_gpus_by_model[gm] AS busy
    FROM region_state FINAL
    ARRAY JOIN mapKeys(total_gpus_by_model) AS gm
    UNION ALL
    SELECT region, '*' AS gpu_model, ts,
        arraySum(mapValues(total_gpus_by_model)) - arraySum(mapValues(free_gpus_by_model))
    FROM region_state FINAL
), realized AS ("""

FORECAST_ERROR = f"""\
WITH points AS (
    SELECT region, gpu_model, model, issued_ts, i, predicted,
        issued_ts + toIntervalSecond(step_s * (i - 1)) AS from_ts,
        issued_ts + toIntervalSecond(step_s * i) AS to_ts
    FROM demand_forecasts FINAL
    ARRAY JOIN points AS predicted, arrayEnumerate(points) AS i
    WHERE series = 'gpus_in_use'
{_BUSY}
    SELECT p.region AS region, p.gpu_model AS gpu_model, p.model AS model, p.issued_ts, p.i,
        any(p.predicted) AS predicted, avg(b.busy) AS actual
    FROM points AS p
    INNER JOIN busy AS b ON p.region = b.region AND p.gpu_model = b.gpu_model
    WHERE b.ts >= p.from_ts AND b.ts < p.to_ts
    GROUP BY p.region, p.gpu_model, p.model, p.issued_ts, p.i
)
SELECT region, gpu_model, model,
    count() AS points,
    round(avg(abs(predicted - actual)), 4) AS mae,
    round(100 * avg(abs(predicted - actual) / nullIf(actual, 0)), 2) AS mape_pct
FROM realized
GROUP BY region, gpu_model, model
ORDER BY region, gpu_model, model"""

GPUS_IN_USE_SERIES = """\
WITH per_minute AS (
    SELECT minute, region, gpu_model,
        avgMerge(total_gpus_avg) - avgMerge(free_gpus_avg) AS busy
    FROM capacity_1m
    WHERE minute >= {since:DateTime64(3)} AND minute < {until:DateTime64(3)}
        AND {region:String} IN ('', region)
    GROUP BY minute, region, gpu_model
), models AS (
    SELECT minute, region, gpu_model, busy FROM per_minute
    UNION ALL
    SELECT minute, region, '*', sum(busy) FROM per_minute GROUP BY minute, region
)
SELECT region, gpu_model,
    toDateTime(intDiv(toUnixTimestamp(minute), {step_s:UInt32}) * {step_s:UInt32}, 'UTC')
        AS bucket,
    avg(busy) AS value
FROM models
GROUP BY region, gpu_model, bucket
ORDER BY region, gpu_model, bucket"""

GPUS_REQUESTED_SERIES = """\
WITH routed AS (
    SELECT job_id, argMin(region, attempt) AS region
    FROM jobs_routed FINAL
    WHERE ts >= {since:DateTime64(3)}
    GROUP BY job_id
), placed AS (
    SELECT job_id, argMax(gpu_model, ts) AS gpu_model
    FROM placement_decisions FINAL
    WHERE outcome = 'PLACED' AND ts >= {since:DateTime64(3)}
    GROUP BY job_id
), jobs AS (
    SELECT s.ts AS ts, r.region AS region, p.gpu_model AS gpu_model,
        s.gpu_count * s.gpu_milli / 1000 AS gpus
    FROM (
        SELECT * FROM jobs_submitted FINAL
        WHERE ts >= {since:DateTime64(3)} AND ts < {until:DateTime64(3)}
            AND {kind:String} IN ('', kind)
    ) AS s
    INNER JOIN routed AS r ON s.job_id = r.job_id
    LEFT JOIN placed AS p ON s.job_id = p.job_id
    WHERE {region:String} IN ('', r.region)
)
SELECT region, gpu_model, bucket, sum(gpus) AS gpus, count() AS requests
FROM (
    SELECT region, gpu_model, gpus,
        toDateTime(intDiv(toUnixTimestamp(ts), {step_s:UInt32}) * {step_s:UInt32}, 'UTC')
            AS bucket
    FROM jobs
    WHERE gpu_model != ''
    UNION ALL
    SELECT region, '*', gpus,
        toDateTime(intDiv(toUnixTimestamp(ts), {step_s:UInt32}) * {step_s:UInt32}, 'UTC')
    FROM jobs
)
GROUP BY region, gpu_model, bucket
ORDER BY region, gpu_model, bucket"""

GRID_SIGNAL_SERIES = """\
SELECT region, '*' AS gpu_model,
    toDateTime(intDiv(toUnixTimestamp(ts), {step_s:UInt32}) * {step_s:UInt32}, 'UTC') AS bucket,
    avg(carbon_g_per_kwh) AS carbon_g_per_kwh,
    avg(price_per_kwh) AS price_per_kwh
FROM grid_signals FINAL
WHERE ts >= {since:DateTime64(3)} AND ts < {until:DateTime64(3)}
    AND {region:String} IN ('', region)
GROUP BY region, bucket
ORDER BY region, bucket"""

# a service's rate: each zone's mean report of a minute, summed over the zones reporting in it
SERVICE_REQUESTS_SERIES = """\
WITH per_zone AS (
    SELECT service, zone, toStartOfMinute(ts) AS minute, avg(requests_per_s) AS rps
    FROM service_load FINAL
    WHERE ts >= {since:DateTime64(3)} AND ts < {until:DateTime64(3)}
        AND {service:String} IN ('', service)
    GROUP BY service, zone, minute
), per_minute AS (
    SELECT service, minute, sum(rps) AS rps FROM per_zone GROUP BY service, minute
)
SELECT service, '*' AS gpu_model,
    toDateTime(intDiv(toUnixTimestamp(minute), {step_s:UInt32}) * {step_s:UInt32}, 'UTC')
        AS bucket,
    avg(rps) AS requests_per_s
FROM per_minute
GROUP BY service, bucket
ORDER BY service, bucket"""

FORECAST_SCORES = """\
SELECT region, series, gpu_model, plan, model, horizon_steps,
    argMax(smape, ts) AS smape_pct,
    argMax(mase, ts) AS mase,
    argMax(coverage, ts) AS coverage,
    argMax(origins, ts) AS origins,
    argMax(chosen, ts) AS chosen,
    max(ts) AS scored_at
FROM forecast_scores FINAL
GROUP BY region, series, gpu_model, plan, model, horizon_steps
ORDER BY region, series, gpu_model, plan, horizon_steps, mase"""

FORECAST_ERROR_BY_MODEL = f"""\
WITH points AS (
    SELECT region, gpu_model, model, selected, plan, issued_ts, i, predicted,
        issued_ts + toIntervalSecond(step_s * (i - 1)) AS from_ts,
        issued_ts + toIntervalSecond(step_s * i) AS to_ts
    FROM demand_forecasts FINAL
    ARRAY JOIN points AS predicted, arrayEnumerate(points) AS i
    WHERE series = 'gpus_in_use'
{_BUSY}
    SELECT p.region AS region, p.gpu_model AS gpu_model, p.plan AS plan, p.model AS model,
        p.selected AS selected, p.issued_ts, p.i,
        any(p.predicted) AS predicted, avg(b.busy) AS actual
    FROM points AS p
    INNER JOIN busy AS b ON p.region = b.region AND p.gpu_model = b.gpu_model
    WHERE b.ts >= p.from_ts AND b.ts < p.to_ts
    GROUP BY p.region, p.gpu_model, p.plan, p.model, p.selected, p.issued_ts, p.i
)
SELECT region, gpu_model, plan, model, selected,
    count() AS points,
    round(avg(abs(predicted - actual)), 4) AS mae,
    round(100 * avg(2 * abs(predicted - actual) / nullIf(abs(predicted) + abs(actual), 0)), 2)
        AS smape_pct
FROM realized
GROUP BY region, gpu_model, plan, model, selected
ORDER BY region, gpu_model, plan, selected DESC, model"""

# Parameters the bucketed series need (example values; `gpuflow sql --param`).
SERIES_PARAMS: dict[str, dict[str, str]] = {
    "gpus_in_use_series": {
        "since": "2026-01-01 00:00:00",
        "until": "2026-01-08 00:00:00",
        "step_s": "3600",
        "region": "",
    },
    "gpus_requested_series": {
        "since": "2026-01-01 00:00:00",
        "until": "2026-01-08 00:00:00",
        "step_s": "3600",
        "region": "",
        "kind": "TRAINING",
    },
    "service_requests_series": {
        "since": "2026-01-01 00:00:00",
        "until": "2026-01-04 00:00:00",
        "step_s": "60",
        "service": "",
    },
    "grid_signal_series": {
        "since": "2026-01-01 00:00:00",
        "until": "2026-01-08 00:00:00",
        "step_s": "3600",
        "region": "",
    },
}
