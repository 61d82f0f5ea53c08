"""Job specs from users (YAML files, CLI flags, JobSubmitted events), validated field by field.

`job_record(spec)` returns a JobSubmitted record ready to encode, or raises `JobSpecError`
naming the first bad field, so the CLI can print one line and the router can refuse with a
reason instead of crashing.
"""

from __future__ import annotations

import math
import re
import shlex
import signal
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from infra.durations import parse_time_limit
from infra.errors import InfraError
from schemas import default_schemas
from scorer.errors import InvalidSpecError
from scorer.stacks import parse_stack
from scorer.types import FINETUNES, OPTIMIZERS, SHARDINGS, choice

__all__ = ["JOB_KINDS", "PRECISIONS", "JobSpecError", "job_problems", "job_record", "load_job_file"]

JOB_KINDS = ("TRAINING", "INFERENCE", "BATCH", "NOTEBOOK")
PRECISIONS = ("FP32", "TF32", "BF16", "FP16", "FP8", "INT8")
_INT_FIELDS = (
    "data_parallel",
    "tensor_parallel",
    "pipeline_parallel",
    "gpu_count",
    "gpu_milli",
    "min_gpu_memory_mib",
    "cpu_milli",
    "memory_mib",
    "priority",
    "checkpoint_interval_s",
    "grad_accum_steps",  # issue 13: communication shape
    "micro_batch",  # issue 16: memory model; issue 13: communication shape too
    "seq_len",
    "retries",  # issue 31: what to run
    "time_limit_s",
)
_FLOAT_FIELDS = (
    "params_b",
    "cost_speed_preference",
    "expected_duration_s",
    "budget_usd",
    "checkpoint_grace_s",
)
_LIST_FIELDS = ("allowed_gpu_models", "allowed_regions", "allowed_zones")
# Avro long; the others are int
_LONG_FIELDS = ("memory_mib", "total_steps", "deferrable_until_ts", "time_limit_s")
_BOOL_FIELDS = (
    "preemptible",
    "checkpointable",
    "cross_region_ok",
    "optimizer_offload",
    "activation_checkpointing",
)
# issue 16: memory-model choices, normalised as the scorer does ("zero-3" -> "ZERO3")
_CHOICES = {"sharding": SHARDINGS, "finetune": FINETUNES, "optimizer": OPTIMIZERS}
_TRUE, _FALSE = ("1", "true", "yes"), ("0", "false", "no")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STAMPED = ("event_id", "ts", "schema", "key_id", "signature")  # set when sent, not by users


class JobSpecError(InfraError, ValueError):
    """A job spec field is missing, mistyped or out of range."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def _shown(value: Any, limit: int = 60) -> str:
    """A value as one short line: printable names as they are, anything else by repr."""
    text = value if isinstance(value, str) and value.isprintable() else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _job_fields() -> set[str]:
    return {f["name"] for f in default_schemas().get("JobSubmitted").source["fields"]}


def _nullable_fields() -> set[str]:
    fields = default_schemas().get("JobSubmitted").source["fields"]
    return {f["name"] for f in fields if isinstance(f["type"], list) and "null" in f["type"]}


def _coerce(name: str, value: Any) -> Any:
    if value is None:
        if name in _nullable_fields():
            return None
        raise JobSpecError(name, "must not be empty")
    try:
        if name == "time_limit_s" and isinstance(value, str):
            value = parse_time_limit(value)  # issue 31: "90", "30m", Slurm's "1-00:00:00"
        if name in _INT_FIELDS or name in ("total_steps", "deferrable_until_ts"):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            number = int(value)
            bits = 63 if name in _LONG_FIELDS else 31
            if not -(2**bits) <= number < 2**bits:  # Avro would write it, other readers fail
                raise ValueError
            return number
        if name in _FLOAT_FIELDS:
            real = float(value)
            if not math.isfinite(real):
                raise ValueError
            return real
        if name in _LIST_FIELDS:
            if isinstance(value, str):
                return [v.strip() for v in value.split(",") if v.strip()]
            return [str(v) for v in value]
        if name in _BOOL_FIELDS:
            text = str(value).lower()
            if isinstance(value, bool | int | str) and text in _TRUE + _FALSE:
                return text in _TRUE
            raise ValueError
        if name in ("kind", "precision"):
            return str(value).upper()
        if name in _CHOICES:
            return choice(value, _CHOICES[name], name, empty_ok=name == "sharding")
        if name == "software_stack":
            return str(value).strip().lower()
        if name == "command":
            return _command(value)
        if name == "env":
            return _environment(value)
        if name == "checkpoint_signal":
            return _signal_name(value)
    except InvalidSpecError as exc:
        raise JobSpecError(name, str(exc).partition(": ")[2]) from None
    except (TypeError, ValueError):
        raise JobSpecError(name, f"cannot use {_shown(value)}") from None
    return str(value)


def _command(value: Any) -> list[str]:
    """argv as a list, or one string split as a shell would (no shell runs it)."""
    if isinstance(value, str):
        return shlex.split(value)
    if isinstance(value, list | tuple) and all(isinstance(v, str | int | float) for v in value):
        return [str(v) for v in value]
    raise ValueError


def _environment(value: Any) -> dict[str, str]:
    """A mapping, or K=V strings (a list, or one string of them separated by commas)."""
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    pairs = value.items() if isinstance(value, Mapping) else (_pair(v) for v in value)
    out = {}
    for key, item in pairs:
        if not isinstance(key, str) or not _ENV_NAME.match(key) or isinstance(item, list | dict):
            raise ValueError
        out[key] = "" if item is None else str(item)
    return out


def _pair(text: Any) -> tuple[str, str]:
    key, sep, item = str(text).partition("=")
    if not sep:
        raise ValueError
    return key.strip(), item


def _signal_name(value: Any) -> str:
    """A signal by name (USR1, SIGUSR1) or number, written as SIGNAME; empty = the default."""
    text = str(value).strip().upper()
    if not text:
        return ""
    try:
        sig = (
            signal.Signals(int(text))
            if text.isdigit()
            else signal.Signals[text if text.startswith("SIG") else "SIG" + text]
        )
    except (KeyError, ValueError):
        raise ValueError from None
    return sig.name


def job_problems(job: Mapping[str, Any]) -> list[str]:
    """Every semantic problem of a decoded JobSubmitted record, as 'field: why'."""
    out = []
    if not str(job.get("job_id", "")).strip():
        out.append("job_id: must not be empty")
    if job.get("kind", "BATCH") not in JOB_KINDS:
        out.append(f"kind: must be one of {', '.join(JOB_KINDS)}")
    if job.get("precision", "FP32") not in PRECISIONS:
        out.append(f"precision: must be one of {', '.join(PRECISIONS)}")
    count, milli = int(job.get("gpu_count", 1)), int(job.get("gpu_milli", 1000))
    if count < 0:
        out.append(f"gpu_count: must be >= 0, got {count}")
    elif count == 0 and not (int(job.get("cpu_milli") or 0) or int(job.get("memory_mib") or 0)):
        out.append("gpu_count: a CPU-only job (gpu_count 0) needs cpu_milli or memory_mib")
    if not 1 <= milli <= 1000:
        out.append(f"gpu_milli: must be 1..1000, got {milli}")
    elif milli < 1000 and count != 1:
        out.append("gpu_milli: a GPU share below 1000 needs gpu_count 1")
    for degree in ("data_parallel", "tensor_parallel", "pipeline_parallel"):
        if int(job.get(degree, 1)) < 1:
            out.append(f"{degree}: must be >= 1")
    if not 0.0 <= float(job.get("cost_speed_preference", 0.5)) <= 1.0:
        out.append("cost_speed_preference: must be within 0..1")
    for name in ("params_b", "min_gpu_memory_mib", "cpu_milli", "memory_mib"):
        if float(job.get(name) or 0) < 0:
            out.append(f"{name}: must be >= 0")
    out.extend(_comm_problems(job))
    duration = job.get("expected_duration_s")
    if duration is not None and float(duration) <= 0:
        out.append("expected_duration_s: must be > 0")
    return out + _memory_and_stack_problems(job) + _run_problems(job)


def _run_problems(job: Mapping[str, Any]) -> list[str]:
    """What to run (issue 31): limits that cannot be negative, a workdir without a command."""
    out = []
    for name in ("time_limit_s", "retries", "checkpoint_grace_s"):
        if float(job.get(name) or 0) < 0:
            out.append(f"{name}: must be >= 0")
    if job.get("workdir") and not job.get("command"):
        out.append("workdir: a job without a command runs nothing there")
    return out


def _memory_and_stack_problems(job: Mapping[str, Any]) -> list[str]:
    """Issue 16's fields: memory-model choices, sizes and the software stack."""
    out = []
    for name, allowed in _CHOICES.items():
        default = "" if name == "sharding" else allowed[0]
        try:
            choice(job.get(name, default), allowed, name, empty_ok=name == "sharding")
        except InvalidSpecError as exc:
            out.append(str(exc))
    for name in ("micro_batch", "seq_len"):
        if int(job.get(name) or 0) < 0:
            out.append(f"{name}: must be >= 0")
    try:
        parse_stack(str(job.get("software_stack") or "portable"))
    except InvalidSpecError as exc:
        out.append(str(exc))
    return out


def _comm_problems(job: Mapping[str, Any]) -> list[str]:
    """The communication shape (issue 13): `micro_batch` and `seq_len`, which the network
    model shares with the memory model, are checked with the memory fields."""
    if int(job.get("grad_accum_steps", 1)) < 1:
        return ["grad_accum_steps: must be >= 1"]
    return []


def job_record(spec: Mapping[str, Any], *, now_ms: int | None = None) -> dict[str, Any]:
    """A validated JobSubmitted record from a user's spec (unknown fields are errors)."""
    fields = _job_fields()
    record: dict[str, Any] = {}
    for key, value in spec.items():
        name = str(key).replace("-", "_")
        if name not in fields or name in _STAMPED:
            raise JobSpecError(_shown(name), "unknown field")
        record[name] = _coerce(name, value)
    record.setdefault("job_id", f"job-{uuid.uuid4().hex[:12]}")
    record["event_id"] = str(uuid.uuid4())
    record["ts"] = now_ms if now_ms is not None else int(time.time() * 1000)
    problems = job_problems(record)
    if problems:
        field, _, why = problems[0].partition(": ")
        raise JobSpecError(field, why)
    return record


def load_job_file(path: Path) -> dict[str, Any]:
    """Read a YAML (or JSON) job spec; the file must hold one mapping."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise JobSpecError("file", f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise JobSpecError("file", f"{path} is not UTF-8 text") from exc
    except yaml.YAMLError as exc:
        raise JobSpecError("file", f"{path} is not valid YAML: {exc}".splitlines()[0]) from exc
    if not isinstance(data, Mapping):
        raise JobSpecError("file", f"{path} must hold a mapping of job fields")
    return dict(data)
