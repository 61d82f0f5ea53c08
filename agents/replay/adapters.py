"""Adapters from public trace formats to the replay format (see docs/traces.md).

- Gavel (stanford-futuredata/gavel `traces/*.trace`): tab-separated job_type, command,
  working_directory, num_steps_arg, needs_data_dir, total_steps, scale_factor,
  priority_weight, SLO, arrival_time. duration_s = total_steps / steps_per_sec on the
  reference V100 at the job's scale (the fastest model with a non-zero rate when V100 has 0).
- Philly (msr-fiddle/philly-traces `cluster_job_log`): a JSON list of jobs with jobid,
  submitted_time, attempts[{start_time, end_time, detail[{ip, gpus}]}], status, user, vc.
  job_id = jobid; submit_s = submitted_time minus the earliest one; num_gpus = the largest
  attempt's GPU count (summed over its machines); duration_s = the sum of the attempts' run
  times (the work done, whatever the status); tenant = vc; reference_model = the most common
  GPU model of the nodes (Philly's logs do not name one). Jobs that never ran (no attempt
  with both times) are skipped.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from agents.replay.csvio import positive, read_rows, to_float, to_int
from agents.replay.errors import TraceError
from agents.replay.trace import Trace, TraceJob, TraceNode
from scorer import ThroughputModel

__all__ = ["GAVEL_COLUMNS", "load_gavel_trace", "load_philly_trace"]

GAVEL_COLUMNS = (
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "priority_weight",
    "slo",
    "arrival_time",
)
REFERENCE = "V100-16"


def _gavel_reference(tp: ThroughputModel, job_type: str, scale: int) -> tuple[str, float] | None:
    rates = {
        m: r for (jt, m, s, c), r in tp.measured.items() if jt == job_type and s == scale and c
    }
    if rates.get(REFERENCE, 0) > 0:
        return REFERENCE, rates[REFERENCE]
    positive_rates = {m: r for m, r in rates.items() if r > 0}
    if not positive_rates:
        return None
    best = max(positive_rates, key=lambda m: positive_rates[m])
    return best, positive_rates[best]


def load_gavel_trace(
    nodes: Sequence[TraceNode], path: str | Path, throughput: ThroughputModel | None
) -> Trace:
    if throughput is None:
        raise TraceError(str(path), "a Gavel trace needs --throughputs (Gavel's table)")
    jobs: list[TraceJob] = []
    rows = read_rows(path, GAVEL_COLUMNS, delimiter="\t", header=GAVEL_COLUMNS)
    for i, row in enumerate(rows):  # Gavel traces have no header line
        job_type = row.get("job_type")
        scale = row.required("scale_factor", positive(to_int))
        ref = _gavel_reference(throughput, job_type, scale)
        if ref is None:
            raise row.error("job_type", f"no throughput for {job_type!r} at {scale} GPUs")
        steps = row.required("total_steps", positive(to_float))
        jobs.append(
            TraceJob(
                job_id=f"gavel-{i:05d}",
                submit_s=row.required("arrival_time", positive(to_float, strict=False)),
                num_gpus=scale,
                duration_s=steps / ref[1],
                job_type=job_type,
                reference_model=ref[0],
                priority=int(row.parse("priority_weight", to_float, 1.0)),
            )
        )
    if not jobs:
        raise TraceError(str(path), "no jobs")
    return Trace(tuple(nodes), tuple(sorted(jobs, key=lambda j: j.submit_s)), throughput)


def _when(value: Any) -> datetime | None:
    if value in (None, "", "None"):
        return None
    return datetime.strptime(str(value), "%Y-%m-%d %H:%M:%S")


def _line_of(text: str, jobid: str) -> int | None:
    at = text.find(f'"{jobid}"')
    return text.count("\n", 0, at) + 1 if at >= 0 else None


def _philly_job(raw: Any, origin: datetime, ref: str) -> TraceJob | None:
    submitted = _when(raw["submitted_time"])
    run_s, gpus = 0.0, 0
    for attempt in raw.get("attempts") or ():
        start, end = _when(attempt.get("start_time")), _when(attempt.get("end_time"))
        if start is None or end is None:
            continue
        run_s += max(0.0, (end - start).total_seconds())
        gpus = max(gpus, sum(len(d.get("gpus") or ()) for d in attempt.get("detail") or ()))
    if submitted is None or run_s <= 0 or gpus <= 0:
        return None
    return TraceJob(
        job_id=str(raw["jobid"]),
        submit_s=(submitted - origin).total_seconds(),
        num_gpus=gpus,
        duration_s=run_s,
        tenant=str(raw.get("vc") or "default"),
        reference_model=ref,
    )


def load_philly_trace(
    nodes: Sequence[TraceNode], path: str | Path, throughput: ThroughputModel | None = None
) -> Trace:
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
        raw_jobs = json.loads(text)
    except OSError as exc:
        raise TraceError(name, f"cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        # an error at the very end of a file whose last line ends in a newline is reported
        # on the (empty) line after it: name the last line there is
        line = min(exc.lineno, max(1, len(text.splitlines())))
        column = exc.colno if line == exc.lineno else 1
        raise TraceError(name, f"bad JSON: {exc.msg}", line=line, column=column) from None
    if not isinstance(raw_jobs, list):
        raise TraceError(name, "expected a JSON list of jobs", line=1, column=1)
    ref = Counter(n.gpu_model for n in nodes for _ in range(n.gpu_count)).most_common(1)[0][0]
    try:
        origin = min(t for j in raw_jobs if (t := _when(j.get("submitted_time"))) is not None)
    except (ValueError, TypeError, AttributeError) as exc:
        raise TraceError(name, f"no valid submitted_time: {exc}") from None
    jobs = []
    for i, raw in enumerate(raw_jobs):
        try:
            job = _philly_job(raw, origin, ref)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            jobid = str(raw.get("jobid", f"#{i}")) if isinstance(raw, dict) else f"#{i}"
            raise TraceError(
                name, f"job {jobid}: {type(exc).__name__}: {exc}", line=_line_of(text, jobid)
            ) from None
        if job is not None:
            jobs.append(job)
    if not jobs:
        raise TraceError(name, "no job with a start and an end time")
    return Trace(tuple(nodes), tuple(sorted(jobs, key=lambda j: j.submit_s)), throughput)
