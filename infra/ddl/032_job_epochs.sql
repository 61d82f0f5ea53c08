-- Job epochs (issue 31, docs/jobs.md; numbered 032 so the node executor's 031 cannot collide).
-- Every attempt of a job is an epoch: the executor's end report carries the command's exit
-- code (negative: killed by that signal), why the attempt ended and the last lines of stderr.
-- No DEFAULT expressions: rows written before this migration read NULL / ''.
ALTER TABLE job_events
    ADD COLUMN IF NOT EXISTS exit_code Nullable(Int32),
    ADD COLUMN IF NOT EXISTS cause LowCardinality(String),
    ADD COLUMN IF NOT EXISTS stderr_tail String;

-- One row per (job, epoch): where it ran, when it started and ended, how (end type, exit code,
-- cause), its GPUs (from the epoch's PLACED decision), GPU-hours, moves and the stderr tail.
-- `gpuflow status JOB` reads it; `ended` is NULL while the epoch runs.
CREATE VIEW IF NOT EXISTS job_epochs AS
WITH ends AS (
    SELECT job_id, epoch, any(region) AS region,
        minIf(ts, type = 'STARTED') AS first_start,
        countIf(type = 'STARTED') AS starts,
        argMaxIf(node_ids, ts, type = 'STARTED') AS started_on,
        countIf(type IN ('FINISHED', 'FAILED', 'EVICTED', 'TIMEOUT', 'CANCELLED')) AS ends,
        maxIf(ts, type IN ('FINISHED', 'FAILED', 'EVICTED', 'TIMEOUT', 'CANCELLED')) AS last_end,
        argMaxIf(type, ts, type IN ('FINISHED', 'FAILED', 'EVICTED', 'TIMEOUT', 'CANCELLED'))
            AS end_type,
        argMaxIf(exit_code, ts, type IN ('FINISHED', 'FAILED', 'TIMEOUT', 'CANCELLED'))
            AS exit_code,
        argMaxIf(cause, ts, type = 'FAILED') AS cause,
        argMaxIf(stderr_tail, ts, type IN ('FAILED', 'TIMEOUT')) AS stderr_tail,
        argMaxIf(node_ids, ts, type IN ('FINISHED', 'FAILED', 'EVICTED', 'TIMEOUT', 'CANCELLED'))
            AS ended_on,
        argMaxIf(progress, ts, type IN ('FINISHED', 'FAILED', 'EVICTED', 'TIMEOUT', 'CANCELLED'))
            AS progress,
        countIf(type = 'MIGRATED') AS moves,
        sumIf(lost_gpu_s, type = 'EVICTED') AS lost_gpu_s
    FROM job_events FINAL
    GROUP BY job_id, epoch
),
placed AS (
    SELECT job_id, epoch, argMax(ts, ts) AS placed_ts,
        argMax(gpu_count * if(length(assignment_gpu_milli) > 0,
                              arrayAvg(assignment_gpu_milli), 1000) / 1000, ts) AS gpus,
        argMax(nodes, ts) AS placed_on, argMax(tenant, ts) AS tenant
    FROM placement_decisions FINAL
    WHERE outcome = 'PLACED'
    GROUP BY job_id, epoch
)
SELECT p.job_id AS job_id, p.epoch AS epoch, p.tenant AS tenant,
    if(e.region = '', '', e.region) AS region,
    if(length(e.started_on) > 0, e.started_on, p.placed_on) AS nodes,
    p.gpus AS gpus, p.placed_ts AS placed,
    if(e.starts > 0, e.first_start, NULL) AS started,
    if(e.ends > 0, e.last_end, NULL) AS ended,
    if(e.ends > 0, e.end_type, 'RUNNING') AS state,
    e.exit_code AS exit_code, if(e.ends > 0, e.cause, '') AS cause,
    e.stderr_tail AS stderr_tail, e.progress AS progress, e.moves AS moves,
    e.lost_gpu_s AS lost_gpu_s,
    if(e.starts > 0 AND e.ends > 0,
       p.gpus * dateDiff('millisecond', e.first_start, e.last_end) / 3600000.0, 0)
        AS gpu_hours
FROM placed AS p LEFT JOIN ends AS e ON e.job_id = p.job_id AND e.epoch = p.epoch;
