"""Service files at the edge: YAML in, `ServiceSpec` out (scorer.services validates), and the
Avro `ServiceSpec` record both ways."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from scorer.services import ServiceSpec, ServiceSpecError, parse_service

__all__ = ["load_service_file", "service_from_record", "service_record"]

_RECORD_ONLY = ("event_id", "ts", "schema", "tenant", "deleted")


def load_service_file(path: Path) -> ServiceSpec:
    """A validated service from a YAML file; errors name the file and the field, one line."""
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ServiceSpecError(str(path), f"cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        where = f"{path}:{line + 1}" if line is not None else str(path)
        raise ServiceSpecError(where, "not valid YAML") from None
    try:
        return parse_service(doc if doc is not None else {})
    except ServiceSpecError as exc:
        raise ServiceSpecError(f"{path}: {exc.field}", str(exc).split(": ", 1)[1]) from None


def service_record(
    spec: ServiceSpec, *, now_ms: int | None = None, deleted: bool = False
) -> dict[str, Any]:
    """The Avro `ServiceSpec` record of a service."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    record: dict[str, Any] = {
        "event_id": f"{spec.name}:{uuid.uuid4().hex[:12]}",
        "ts": now,
        "schema": 1,
        "tenant": spec.name,
        "deleted": deleted,
    }
    for name, value in vars(spec).items():
        record[name] = list(value) if isinstance(value, tuple) else value
    record["capacity_rps"] = dict(spec.capacity_rps)
    return record


def service_from_record(record: Mapping[str, Any]) -> ServiceSpec:
    """The service an Avro record declares (validated again: a record is input too)."""
    return parse_service({k: v for k, v in record.items() if k not in _RECORD_ONLY})
