"""Prometheus metrics of the history sink, served by the history child on GET `/metrics`.

The worker's own `/metrics` reads this page at scrape time and re-exports it, so Prometheus
scrapes one port per worker.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streams.history.sink import HistorySink

__all__ = ["METRICS_PATH", "SinkMetrics"]

METRICS_PATH = "/metrics"

# one batch insert into ClickHouse: 5 ms .. 30 s
_BATCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class SinkMetrics(Collector):
    """Batch latency (observed on each write) and the sink's backlog and totals (on scrape)."""

    def __init__(self, sink: HistorySink) -> None:
        self.sink = sink
        self.registry = CollectorRegistry()
        self.batch_seconds = Histogram(
            "gpuflow_history_batch_seconds",
            "Time to write one batch into ClickHouse and commit its offsets.",
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(self)
        sink.on_batch = lambda seconds, _events: self.batch_seconds.observe(seconds)

    def collect(self) -> Iterable[Metric]:
        backlog = GaugeMetricFamily(
            "gpuflow_history_backlog_messages",
            "Messages on the broker not yet consumed by the history sink.",
            labels=["topic", "partition"],
        )
        for (topic, partition), lag in sorted(self.sink.backlog().items()):
            backlog.add_metric([topic, str(partition)], float(lag))
        yield backlog
        stats = self.sink.stats
        for name, doc, value in (
            ("gpuflow_history_events_written", "Events written to ClickHouse.",
             stats.events_written),
            ("gpuflow_history_rows_written", "Rows written to ClickHouse.", stats.rows_written),
            ("gpuflow_history_insert_failures", "Failed batch inserts (retried).",
             stats.insert_failures),
            ("gpuflow_history_dead_letters", "Events the sink could not store.",
             stats.dead_lettered),
        ):  # fmt: skip
            yield CounterMetricFamily(name, doc, value=float(value))
        yield GaugeMetricFamily(
            "gpuflow_history_up",
            "1 while the sink's loop runs.",
            value=float(self.sink.error is None),
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
