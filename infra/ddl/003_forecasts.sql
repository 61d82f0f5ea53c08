-- Forecasts (DemandForecast v2) say which series they forecast, under which horizon plan, and
-- whether the model was the one chosen or the seasonal-naive baseline beside it. Rows written
-- before this migration read series '' and selected false.
ALTER TABLE demand_forecasts ADD COLUMN IF NOT EXISTS series LowCardinality(String);
ALTER TABLE demand_forecasts ADD COLUMN IF NOT EXISTS plan LowCardinality(String);
ALTER TABLE demand_forecasts ADD COLUMN IF NOT EXISTS selected Bool;

-- Backtest scores the forecast processor records at each refit: one row per model (and the
-- selection itself, model 'selected') and horizon, scored on rolling origins over the recent
-- history. `chosen` marks the model it publishes from then on, `window_mase` the record that
-- chose it (the models' MASE over the selection window that ends at `ts`). `points` and
-- `filled` say how long the series was and how many of its intervals were gaps, filled.
CREATE TABLE IF NOT EXISTS forecast_scores (
    ts DateTime64(3, 'UTC'), event_id String,
    region LowCardinality(String), gpu_model LowCardinality(String),
    series LowCardinality(String), plan LowCardinality(String), step_s UInt32,
    model LowCardinality(String), horizon_steps UInt16,
    smape Float64, mase Float64, coverage Float64, origins UInt32,
    chosen Bool, window_mase Float64, points UInt32, filled UInt32
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (region, series, gpu_model, plan, ts, model, horizon_steps, event_id);
