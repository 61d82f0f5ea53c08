"""Demand and grid series out of the history, on a regular grid, gaps filled and counted.

Each kind names the ready query that buckets it (`infra.store.forecast_queries`), the column
to read and how its gaps are filled: a level (GPUs in use) carries its last value, a flow (GPUs
requested) is 0 where nothing was asked for, a grid signal is interpolated. A requested
series is also kept per GPU model for jobs placed on one; '*' counts every job.

| series | unit | from |
| --- | --- | --- |
| gpus_in_use | GPUs (average of the interval) | RegionSummary: total - free, per model and '*' |
| gpus_requested | GPUs asked for by jobs submitted in it | JobSubmitted; region: first routing |
| training_gpus_requested | same, kind TRAINING | |
| inference_gpus_requested | same, kind INFERENCE | |
| inference_requests_per_s | INFERENCE jobs submitted per second | |
| carbon_g_per_kwh | gCO2e/kWh (average) | GridSignal ('*' only) |
| price_per_kwh | USD/kWh (average) | GridSignal ('*' only) |
| service_requests_per_s | requests/s of a service, summed over its zones | ServiceLoad ('*' only) |

A service's series is keyed by the service, not a region (`SeriesKind.by`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from forecast import Series, SeriesError
from forecast.series import on_grid
from infra.store import forecast_queries as Q
from infra.store._client import QueryResult
from infra.store.errors import StoreError

__all__ = ["GRID_SERIES", "SERIES", "SERVICE_SERIES", "SeriesKind", "fetch_series"]

Runner = Callable[[str, Mapping[str, Any]], QueryResult]


@dataclass(frozen=True)
class SeriesKind:
    name: str
    query: str
    column: str
    fill: str
    unit: str
    params: Mapping[str, str] = field(default_factory=dict)
    per_second: bool = False  # divide the bucket's value by step_s
    by: str = "region"  # the column naming whose series it is: a region, or a service


SERIES: dict[str, SeriesKind] = {
    "gpus_in_use": SeriesKind("gpus_in_use", Q.GPUS_IN_USE_SERIES, "value", "ffill", "GPUs"),
    "gpus_requested": SeriesKind(
        "gpus_requested", Q.GPUS_REQUESTED_SERIES, "gpus", "zero", "GPUs", {"kind": ""}
    ),
    "training_gpus_requested": SeriesKind(
        "training_gpus_requested",
        Q.GPUS_REQUESTED_SERIES,
        "gpus",
        "zero",
        "GPUs",
        {"kind": "TRAINING"},
    ),
    "inference_gpus_requested": SeriesKind(
        "inference_gpus_requested",
        Q.GPUS_REQUESTED_SERIES,
        "gpus",
        "zero",
        "GPUs",
        {"kind": "INFERENCE"},
    ),
    "inference_requests_per_s": SeriesKind(
        "inference_requests_per_s",
        Q.GPUS_REQUESTED_SERIES,
        "requests",
        "zero",
        "requests/s",
        {"kind": "INFERENCE"},
        per_second=True,
    ),
    "carbon_g_per_kwh": SeriesKind(
        "carbon_g_per_kwh", Q.GRID_SIGNAL_SERIES, "carbon_g_per_kwh", "interpolate", "g/kWh"
    ),
    "price_per_kwh": SeriesKind(
        "price_per_kwh", Q.GRID_SIGNAL_SERIES, "price_per_kwh", "interpolate", "USD/kWh"
    ),
    "service_requests_per_s": SeriesKind(
        "service_requests_per_s",
        Q.SERVICE_REQUESTS_SERIES,
        "requests_per_s",
        "ffill",  # a silent minute holds the last rate, as the autoscaler's own history does
        "requests/s",
        by="service",
    ),
}
GRID_SERIES = frozenset({"carbon_g_per_kwh", "price_per_kwh"})
SERVICE_SERIES = frozenset(k for k, spec in SERIES.items() if spec.by == "service")


def _ts(value: Any) -> float:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, str):  # through the worker's /sql/ page: ISO text
        moment = datetime.fromisoformat(value)
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    return float(value)


def _sql_time(epoch_s: int) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d %H:%M:%S")


def fetch_series(
    run: Runner,
    kind: str,
    *,
    since_s: int,
    until_s: int,
    step_s: int,
    region: str = "",
    service: str = "",
) -> dict[tuple[str, str], Series]:
    """(region, gpu_model) -> its series over [since_s, until_s) on the step's grid; for a
    service's kind, (service, '*').

    `since_s` and `until_s` are rounded down to the grid; keys with no value at all in the
    window are left out; `region` (`service`) '' reads every one. `run(sql, params)` runs a
    query (the store, or the worker's page).
    """
    try:
        spec = SERIES[kind]
    except KeyError:
        known = ", ".join(SERIES)
        raise StoreError(f"unknown series {kind!r} (known: {known})") from None
    start, end = since_s - since_s % step_s, until_s - until_s % step_s
    if end <= start:
        raise StoreError(f"series {kind}: the window holds no whole {step_s} s interval")
    params = {
        **spec.params,
        "since": _sql_time(start),
        "until": _sql_time(end),
        "step_s": str(step_s),
        **({"service": service} if spec.by == "service" else {"region": region}),
    }
    result = run(spec.query, params)
    rows: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for row in result.dicts():
        value = float(row[spec.column] or 0.0) / (step_s if spec.per_second else 1)
        rows[(str(row[spec.by]), str(row["gpu_model"]))].append((_ts(row["bucket"]), value))
    out = {}
    for (reg, model), points in sorted(rows.items()):
        name = f"{kind}/{reg}/{model}"
        try:
            out[(reg, model)] = on_grid(
                [t for t, _ in points],
                [v for _, v in points],
                start_s=start,
                step_s=step_s,
                points=(end - start) // step_s,
                fill=spec.fill,
                name=name,
            )
        except SeriesError as exc:
            raise StoreError(str(exc)) from exc
    return out
