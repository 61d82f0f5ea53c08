-- Inference services' observed load (issue 33): every ServiceLoad report, one row per service
-- and zone ('' = the whole service) and window. The forecast processor reads a service's
-- request rate from it (per minute, summed over its zones: `service_requests_per_s`), so a
-- restarted worker's autoscaler has a forecast from stored history, not only from the load it
-- heard since the restart. `p99_ms` is NULL where the serving side does not measure it.
CREATE TABLE IF NOT EXISTS service_load (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    service LowCardinality(String), zone LowCardinality(String), window_s UInt32,
    requests_per_s Float64, p99_ms Nullable(Float64)
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (service, zone, ts, event_id)
TTL toDateTime(ts) + INTERVAL 30 DAY;

-- Forecasts (DemandForecast v3) of a service's rate name the service; rows of a region's series,
-- and rows written before this migration, read ''.
ALTER TABLE demand_forecasts ADD COLUMN IF NOT EXISTS service LowCardinality(String);
