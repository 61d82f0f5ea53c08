"""Forecasts in scheduling: the worker's book of the latest forecasts, headroom and deferral.

`ForecastBook` reads `gpuflow.forecasts.demand` in a thread (a plain consumer on every
partition, from `max_age_s` ago) and keeps the latest selected forecast per region, GPU model,
series, plan and service (a service's request rate, for the autoscaler: `service_curve`).
`ForecastUse` turns the book into the scheduler's two uses:

* headroom per region (`scorer.headroom`): forecast training GPUs requested over the next
  window x 1.2 + forecast peak inference GPUs requested x 1.5, kept free of low-priority work;
* deferral (`scorer.deferral`): a job with `deferrable_until_ts` is held until the forecast
  window of lowest carbon and price that still starts it before that deadline.

Without forecasts (none yet, or older than `max_age_s`) both are off: no headroom, no hold.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from infra.config import Config
from infra.topics import FORECASTS_DEMAND
from schemas import Codec
from scorer.deferral import Deferral, DeferralPolicy, plan_deferral
from scorer.forecasts import ForecastCurve
from scorer.headroom import HeadroomPolicy, headroom_gpus, is_low_priority, outside_headroom
from scorer.types import JobSpec
from streams.base.follower import TopicFollower
from streams.base.outbox import now_ms

__all__ = ["ForecastBook", "ForecastUse"]

_Key = tuple[str, str, str, str, str]  # region, gpu_model, series, plan, service ('' for none)
_HEADROOM_PLANS = ("short", "medium", "long")  # finest first: the next hour matters
_GRID_PLANS = ("medium", "long", "short")
_SERVICE_SERIES, _SERVICE_PLAN = "service_requests_per_s", "service"


class ForecastBook(TopicFollower):
    """Latest selected forecast per (region, gpu_model, series, plan)."""

    topic = FORECASTS_DEMAND
    name = "forecasts"

    def __init__(self, config: Config, codec: Codec, *, clock: Callable[[], int] = now_ms) -> None:
        super().__init__(config, codec)
        self.max_age_ms = int(config.forecast.max_age_s * 1000)
        self.clock = clock
        self._latest: dict[_Key, ForecastCurve] = {}
        self._lock = threading.Lock()

    def apply(self, record: Mapping[str, Any]) -> None:
        """Keep a decoded DemandForecast if it is the chosen model's and the newest."""
        if not record.get("selected", True) or not record.get("points"):
            return
        key = (
            record["region"],
            record["gpu_model"],
            record.get("series", "gpus_in_use"),
            record.get("plan", ""),
            record.get("service", ""),
        )
        curve = ForecastCurve(
            int(record["issued_ts"]),
            int(record["step_s"]),
            record["points"],
            str(record.get("model", "")),
        )
        with self._lock:
            held = self._latest.get(key)
            if held is None or curve.issued_ms >= held.issued_ms:
                self._latest[key] = curve

    def curve(
        self, region: str, series: str, plans: tuple[str, ...], gpu_model: str = "*"
    ) -> ForecastCurve | None:
        """The first plan's fresh forecast of the series, in `plans` order."""
        cutoff = self.clock() - self.max_age_ms
        with self._lock:
            for plan in plans:
                curve = self._latest.get((region, gpu_model, series, plan, ""))
                if curve is not None and curve.issued_ms >= cutoff:
                    return curve
        return None

    def service_curve(self, service: str) -> ForecastCurve | None:
        """The latest selected forecast of a service's request rate, however old (the
        autoscaler judges its age)."""
        with self._lock:
            return self._latest.get(("*", "*", _SERVICE_SERIES, _SERVICE_PLAN, service))

    def start_offsets(self, c: Any, partitions: list[int]) -> list[TopicPartition]:
        """From `max_age_s` ago where the broker can say where that is, else the beginning."""
        since = self.clock() - self.max_age_ms
        wanted = [TopicPartition(self.topic, p, since) for p in partitions]
        try:
            found = c.offsets_for_times(wanted, timeout=10)
        except KafkaException:
            found = []
        by_partition = {tp.partition: tp.offset for tp in found if tp.offset >= 0}
        return [
            TopicPartition(self.topic, p, by_partition.get(p, OFFSET_BEGINNING)) for p in partitions
        ]


class ForecastUse:
    """What the scheduler asks of the forecasts (duck-typed by `streams.scheduler.core`)."""

    def __init__(
        self,
        book: ForecastBook,
        headroom: HeadroomPolicy,
        deferral: DeferralPolicy,
        *,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.book, self.headroom_policy, self.deferral_policy = book, headroom, deferral
        self.clock = clock

    @classmethod
    def from_config(cls, config: Config, book: ForecastBook) -> ForecastUse:
        f = config.forecast
        headroom = HeadroomPolicy(
            training=f.training_headroom,
            inference=f.inference_headroom,
            window_s=f.headroom_window_s,
            low_priority_max=f.low_priority_max,
            low_priority_kinds=f.names("low_priority_kinds"),
        )
        deferral = DeferralPolicy(f.deferral_carbon_weight, f.deferral_min_gain)
        return cls(book, headroom, deferral)

    def headroom(self, region: str) -> int:
        training = self.book.curve(region, "training_gpus_requested", _HEADROOM_PLANS)
        inference = self.book.curve(region, "inference_gpus_requested", _HEADROOM_PLANS)
        return headroom_gpus(training, inference, self.clock(), self.headroom_policy)

    def low_priority(self, job: JobSpec) -> bool:
        return is_low_priority(job, self.headroom_policy)

    def headroom_refusal(self, job: JobSpec, region: str, free_gpus: int) -> str | None:
        """Why a low-priority job may not take GPUs in `region` now, or None."""
        if not self.low_priority(job):
            return None
        keep = self.headroom(region)
        need = job.gpu_count if job.gpu_milli >= 1000 else 1
        if not keep or outside_headroom(need, free_gpus, keep):
            return None
        return (
            f"headroom: {region} keeps {keep} GPUs free for forecast training and inference "
            f"demand; {free_gpus} free, this low-priority {job.kind.lower()} job needs {need}"
        )

    def hold(self, job: JobSpec, region: str) -> Deferral | None:
        """When to release a deferrable job in `region`, or None to place it now."""
        if job.deferrable_until_ts is None:
            return None
        carbon = self.book.curve(region, "carbon_g_per_kwh", _GRID_PLANS)
        price = self.book.curve(region, "price_per_kwh", _GRID_PLANS)
        return plan_deferral(
            job, self.clock(), carbon=carbon, price=price, policy=self.deferral_policy
        )
