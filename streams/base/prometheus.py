"""Prometheus metrics of one worker, served as the standard text format on `/metrics`.

Counters and histograms are updated where things happen; gauges that describe state (free
GPUs, queue depth, consumer lag, the history sink) are read when Prometheus scrapes, from the
objects that own that state, so they are never stale and cost nothing between scrapes.

Any processor records a decision through one call, whatever its type:

    record_decision("placement", "PLACED", latency_s=0.0007)
    record_decision("migration", "PROPOSED", latency_s=0.002)

Names follow Prometheus conventions: `gpuflow_` prefix, base units (`_seconds`), `_total` on
counters (prometheus-client appends it), labels for region, GPU model, topic and partition.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "CONTENT_TYPE_LATEST",
    "METRICS",
    "WorkerMetrics",
    "gauge",
    "queue_depths",
    "record_dead_letter",
    "record_decision",
    "record_telemetry",
]

log = logging.getLogger(__name__)

# Prometheus' classic text format, which every Prometheus server reads (prometheus-client >= 0.22
# labels the same bytes 1.0.0; names and labels here are plain ASCII, so the two agree)
CONTENT_TYPE_LATEST = "text/plain; version=0.0.4; charset=utf-8"

# worker time per decision: 100 us .. 1 s (the target is p99 <= 10 ms)
_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 1.0)
# telemetry lag (now - event ts): 50 ms .. 60 s (the target is p99 <= 1 s)
_LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class WorkerMetrics:
    """The worker's registry: event-driven counters plus scrape-time collectors."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        r = self.registry
        self.decision_latency = Histogram(
            "gpuflow_decision_latency_seconds",
            "Worker time spent on a decision (all hops of it), by decision type.",
            ["decision"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.decisions = Counter(
            "gpuflow_decisions", "Decisions emitted, by decision type and outcome.",
            ["decision", "outcome"], registry=r,
        )  # fmt: skip
        self.events = Counter(
            "gpuflow_events_consumed", "Events consumed, by stream.", ["stream"], registry=r
        )
        self.telemetry = Counter(
            "gpuflow_telemetry_events", "NodeTelemetry events ingested.", registry=r
        )
        self.telemetry_lag = Histogram(
            "gpuflow_telemetry_lag_seconds",
            "Time from a telemetry event's timestamp to its ingestion by this worker.",
            buckets=_LAG_BUCKETS, registry=r,
        )  # fmt: skip
        self.dead_letters = Counter(
            "gpuflow_dead_letters", "Events parked on gpuflow.deadletter, by source topic.",
            ["topic", "consumer"], registry=r,
        )  # fmt: skip
        self.rebalances = Counter(
            "gpuflow_rebuilds", "State rebuilds after start or a rebalance.", registry=r
        )

    def add_collector(self, collect: Callable[[], Iterable[Metric]]) -> None:
        """Register a function producing metric families at scrape time."""
        self.registry.register(_FunctionCollector(collect))

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format (version 0.0.4)."""
        return generate_latest(self.registry)


class _FunctionCollector(Collector):
    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Metric]:
        try:
            return list(self._collect())
        except Exception:  # a scrape must not fail because one source is briefly unreadable
            log.exception("metrics collector failed")
            return []


METRICS = WorkerMetrics()  # one worker per process: its agents and processors share this


def record_decision(decision: str, outcome: str, latency_s: float | None = None) -> None:
    """Count one decision (placement, preemption, migration, bandwidth...) and its latency."""
    METRICS.decisions.labels(decision, outcome).inc()
    if latency_s is not None:
        METRICS.decision_latency.labels(decision).observe(max(0.0, latency_s))


def record_telemetry(*lags_s: float) -> None:
    """Telemetry events applied, with their lags (seconds)."""
    METRICS.telemetry.inc(len(lags_s))
    observe_many(METRICS.telemetry_lag, np.maximum(np.asarray(lags_s, float), 0.0))


def observe_many(histogram: Histogram, values: npt.NDArray[np.float64]) -> None:
    """`histogram.observe(v)` for every value, counted per bucket at once (a batch of 10,000
    telemetry lags one by one costs ~15 ms of the event loop). Uses the client's own
    per-bucket counters; a client without them gets one `observe` per value."""
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    total = getattr(histogram, "_sum", None)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for value in values.tolist():
            histogram.observe(value)
        return
    counts = np.bincount(np.searchsorted(np.asarray(bounds, float), values, "left"),
                         minlength=len(bounds))  # fmt: skip
    total.inc(float(values.sum()))
    for bucket, count in zip(buckets, counts.tolist(), strict=False):
        if count:
            bucket.inc(count)


def record_dead_letter(topic: str, consumer: str) -> None:
    METRICS.dead_letters.labels(topic, consumer).inc()


def queue_depths(queue: Iterable[Mapping[str, Any]]) -> Tally[tuple[str, str]]:
    """Queued jobs by (region, GPU model asked for; `any` when the job takes any model)."""
    out: Tally[tuple[str, str]] = Tally()
    for routed in queue:
        models = routed["job"].get("allowed_gpu_models") or ["any"]
        for model in models:
            out[(str(routed["region"]), str(model))] += 1
    return out


def gauge(name: str, doc: str, labels: list[str], values: Mapping[Any, float]) -> Any:
    """A gauge family from {label values: value}."""
    family = GaugeMetricFamily(name, doc, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(list(key), float(value))
    return family
