-- Tenancy (docs/tenancy.md). Numbered after the issue that added it, so migrations written in
-- parallel do not collide; versions only need to increase. No DEFAULT expressions: the history
-- sink inserts every column without one (rows written before this migration read 0 / '').
-- Placements have epochs (0 = first, +1 after each eviction), a priority class and, when
-- QUEUED, the reason the job waits; queue_wait_ms is measured from queued_ts (the submission,
-- or the eviction that requeued the job).
ALTER TABLE placement_decisions
    ADD COLUMN IF NOT EXISTS epoch UInt32,
    ADD COLUMN IF NOT EXISTS priority_class LowCardinality(String),
    ADD COLUMN IF NOT EXISTS queued_ts DateTime64(3, 'UTC'),
    ADD COLUMN IF NOT EXISTS wait_reason LowCardinality(String);

-- Who was preempted for whom, why (PRIORITY or RECLAIM), and the work it stood to lose.
ALTER TABLE preemption_decisions
    ADD COLUMN IF NOT EXISTS victim_epoch UInt32,
    ADD COLUMN IF NOT EXISTS victim_tenant LowCardinality(String),
    ADD COLUMN IF NOT EXISTS for_tenant LowCardinality(String),
    ADD COLUMN IF NOT EXISTS for_priority Int32,
    ADD COLUMN IF NOT EXISTS cause LowCardinality(String),
    ADD COLUMN IF NOT EXISTS grace_period_s Float64,
    ADD COLUMN IF NOT EXISTS deadline_ts Nullable(DateTime64(3, 'UTC')),
    ADD COLUMN IF NOT EXISTS expected_lost_gpu_s Float64;

-- The executor echoes the placement epoch, and says what an eviction threw away.
ALTER TABLE job_events
    ADD COLUMN IF NOT EXISTS epoch UInt32,
    ADD COLUMN IF NOT EXISTS lost_gpu_s Float64;

-- Proactive protection: checkpoint advisories, cordons and uncordons, per node.
CREATE TABLE IF NOT EXISTS node_advisories (
    ts DateTime64(3, 'UTC'), event_id String, schema UInt16,
    node_id String, region LowCardinality(String), action LowCardinality(String),
    reason LowCardinality(String), job_ids Array(String), value Float64, detail String
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (region, node_id, ts, event_id);
