"""The forecast processor: series from the history -> forecasts on Kafka, scores in ClickHouse.

It runs as a thread of the history child (`streams/history/process.py`), the one process that
may open the chDB directory, so it reads the series straight from the store. Fitting runs in
a one-process pool beside it (spawned, so it shares neither the child's GIL nor its chDB
handle): Holt-Winters, the LSTM and Prophet never touch the worker's event loop or the
history sink's thread, and the fitted models stay in the pool between runs.

Every `forecast.interval_s`: for each plan (short / medium / long) and series kind, the
series of every region (and GPU model, with `forecast.by_model`), and under the service plan
the request rate of every service (`service_requests_per_s`), are read on the plan's grid
(the whole history window when the plan's refit is due, else the last few points), each is
handed to its `LiveForecaster` in the pool (backtest + choose + refit when due, else update),
and the chosen model's forecast and the seasonal-naive baseline are produced as
`DemandForecast` events (`selected` true / false). The history sink stores them in
`demand_forecasts`; each refit's backtest scores go to `forecast_scores` directly.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from forecast import (
    DEFAULT_PLANS,
    Outcome,
    Plan,
    Series,
    SeriesTooShortError,
    season_length,
)
from forecast.pipeline import run_keyed
from infra.config import Config
from infra.kafka import producer as make_producer
from infra.process import die_with_parent
from infra.store import Store, StoreError
from infra.store.series import GRID_SERIES, SERIES, SERVICE_SERIES, fetch_series
from infra.topics import FORECASTS_DEMAND
from schemas import make_codec
from streams.forecasting.records import MODEL_SYMBOLS, SeriesJob, forecast_records, score_rows

__all__ = ["MODEL_SYMBOLS", "ForecastProcessor", "RunReport"]

log = logging.getLogger(__name__)

_UPDATE_POINTS = 3  # points read when only updating: the new ones, and an overlap
_FIT_TIMEOUT_S = 600.0


@dataclass
class RunReport:
    """What one run did (logged; returned for tests and the CLI)."""

    series: int = 0
    forecasts: int = 0
    scores: int = 0
    refits: int = 0
    failed: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # too short to forecast yet
    filled: int = 0  # intervals filled in the series read


def _spawn_pool() -> Executor:
    return ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=die_with_parent,
    )


class ForecastProcessor:
    """`start()` / `stop()` around a timer thread; `run_once()` is one round."""

    def __init__(
        self,
        config: Config,
        store: Store | Callable[[], Store],
        *,
        executor: Executor | None = None,
        pool: Callable[[], Executor] = _spawn_pool,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.settings = config.forecast
        # the history sink opens the store in its own thread: ask for it when needed
        self._store_of: Callable[[], Store] = store if callable(store) else lambda: store
        self.clock = clock
        self._pool_factory = pool
        self._executor = executor
        self._owns_executor = executor is None
        self._codec = make_codec(config.kafka.schema_registry_url or None)
        self._producer: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._refit_at: dict[tuple[str, str], int] = {}  # (plan, kind) -> series end at refit
        self._read_to: dict[tuple[str, str], int] = {}  # (plan, kind) -> end of the last read
        self._offset = 0  # round-robin start when there are more series than max_series
        names = set(self.settings.names("plans"))
        self.plans = tuple(p for p in DEFAULT_PLANS if p.name in names)
        self.kinds = tuple(k for k in self.settings.names("series") if k in SERIES)
        self.model_args: dict[str, dict[str, Any]] = {
            "lstm": {"epochs": self.settings.lstm_epochs, "country": self.settings.country},
            "prophet": {"country": self.settings.country},
        }

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> ForecastProcessor:
        self._thread = threading.Thread(target=self._loop, name="forecast", daemon=True)
        self._thread.start()
        log.info(
            "forecast processor started plans=%s series=%s interval_s=%.0f",
            ",".join(p.name for p in self.plans),
            ",".join(self.kinds),
            self.settings.interval_s,
        )
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        if self._owns_executor and self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        if self._producer is not None:
            self._producer.flush(10)

    @property
    def store(self) -> Store:
        return self._store_of()

    def _store_ready(self) -> bool:
        try:
            self._store_of()
        except StoreError:  # the sink has not opened it yet (or lost it): wait
            return False
        return True

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self._store_ready():
                self._stop.wait(1.0)
                continue
            started = time.monotonic()
            try:
                report = self.run_once()
                log.info(
                    "forecast run series=%d forecasts=%d scores=%d refits=%d failed=%d "
                    "waiting=%d filled=%d in_s=%.1f",
                    report.series,
                    report.forecasts,
                    report.scores,
                    report.refits,
                    len(report.failed),
                    len(report.waiting),
                    report.filled,
                    time.monotonic() - started,
                )
            except (StoreError, OSError) as exc:  # the store or broker is away: next round
                log.warning("forecast run failed error=%s", exc)
            self._stop.wait(max(1.0, self.settings.interval_s - (time.monotonic() - started)))

    # -- one round ------------------------------------------------------------------------------

    def run_once(self, now_s: float | None = None) -> RunReport:
        """Read, forecast, publish and record every configured series once."""
        now = int(self.clock() if now_s is None else now_s)
        report = RunReport()
        jobs, refits = self._jobs(now, report)
        report.series = len(jobs)
        pending = [(job, self._submit(job)) for job in jobs]
        records, scores = [], []
        for job, future in pending:
            outcome = self._result(job, future, report)
            if outcome is None:  # read its whole history next round, so it can refit
                refits.pop((job.plan.name, job.kind), None)
                self._refit_at.pop((job.plan.name, job.kind), None)
                continue
            records.extend(forecast_records(job, outcome, self.settings.level))
            if outcome.backtest is not None:
                report.refits += 1
                scores.extend(score_rows(job, outcome, outcome.backtest))
        self._refit_at.update(refits)
        self._publish(records)
        report.forecasts = len(records)
        if scores:
            report.scores = self.store.insert_rows("forecast_scores", scores)
        return report

    def _jobs(
        self, now: int, report: RunReport
    ) -> tuple[list[SeriesJob], dict[tuple[str, str], int]]:
        """The series to run now, and the (plan, kind) groups whose whole history was read."""
        jobs: list[SeriesJob] = []
        refits: dict[tuple[str, str], int] = {}
        for plan in self.plans:
            for kind in self.kinds:
                if kind in GRID_SERIES and plan.step_s < 3600:
                    continue  # grid signals are planned by the hour, not every 5 minutes
                if SERIES[kind].by != plan.subject:
                    continue  # a service's rate has a plan of its own, and that plan only it
                group, end = (plan.name, kind), now - now % plan.step_s
                last = self._refit_at.get(group)
                due = last is None or end - last >= plan.refit_s
                # updating: the points since the last run (a few more, in case one was slow)
                since = (
                    end - plan.history_s
                    if due
                    else self._read_to.get(group, end) - _UPDATE_POINTS * plan.step_s
                )
                found = fetch_series(
                    self.store.query, kind, since_s=since, until_s=end, step_s=plan.step_s
                )
                self._read_to[group] = end
                if due and found:
                    refits[group] = end
                for (whose, gpu_model), series in found.items():
                    if gpu_model != "*" and not self.settings.by_model:
                        continue
                    job = _job(kind, plan, whose, gpu_model, series)
                    if due and len(series) < _min_points(plan):
                        report.waiting.append(job.key)  # not even the baseline fits yet
                        refits.pop(group, None)
                        continue
                    report.filled += int(series.filled.sum())
                    jobs.append(job)
        kept = self._rotate(jobs)
        for job in set(jobs) - set(kept):  # left for a later round: read it all again then
            refits.pop((job.plan.name, job.kind), None)
        return kept, refits

    def _rotate(self, jobs: list[SeriesJob]) -> list[SeriesJob]:
        cap = self.settings.max_series
        if len(jobs) <= cap:
            return jobs
        start = self._offset % len(jobs)
        self._offset = start + cap
        return (jobs[start:] + jobs[:start])[:cap]

    # -- the pool ---------------------------------------------------------------------------------

    def _pool(self) -> Executor:
        if self._executor is None:
            self._executor = self._pool_factory()
            self._refit_at.clear()  # a new pool holds no fitted model
        return self._executor

    def _submit(self, job: SeriesJob) -> Future[Outcome] | None:
        try:
            return self._pool().submit(
                run_keyed,
                job.key,
                job.plan,
                job.series,
                level=self.settings.level,
                model_args=self.model_args,
            )
        except BrokenProcessPool:
            self._executor = None  # spawn a new one next time
            return None

    def _result(
        self, job: SeriesJob, future: Future[Outcome] | None, report: RunReport
    ) -> Outcome | None:
        if future is None:
            report.failed.append(job.key)
            return None
        try:
            return future.result(timeout=_FIT_TIMEOUT_S)
        except SeriesTooShortError as exc:  # a new region or series: expected, not a fault
            log.info("forecast waits for history key=%s need=%d got=%d", job.key, exc.need, exc.got)
            report.waiting.append(job.key)
            return None
        except BrokenProcessPool:
            self._executor = None
            log.error("forecast pool died key=%s; a new one starts next run", job.key)
        except Exception as exc:  # one series' fault must not stop the others
            log.warning("forecast failed key=%s error=%s", job.key, exc)
        report.failed.append(job.key)
        return None

    # -- output ---------------------------------------------------------------------------------

    def _publish(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        if self._producer is None:
            self._producer = make_producer(self.config.kafka)
        for record in records:
            whose = record["service"] or f"{record['region']}/{record['gpu_model']}"
            key = f"{whose}/{record['series']}".encode()
            value = self._codec.encode("DemandForecast", record, topic=FORECASTS_DEMAND)
            self._producer.produce(FORECASTS_DEMAND, value, key=key)
            self._producer.poll(0)
        self._producer.flush(10)


def _job(kind: str, plan: Plan, whose: str, gpu_model: str, series: Series) -> SeriesJob:
    if kind in SERVICE_SERIES:  # a service's rate, over every region and GPU model
        return SeriesJob(kind, "*", "*", plan, series, service=whose)
    return SeriesJob(kind, whose, gpu_model, plan, series)


def _min_points(plan: Plan) -> int:
    """The seasonal-naive baseline's minimum: two seasons and a point."""
    return 2 * season_length(plan.step_s) + 1
