"""The streaming autoscaler (issue 33 part 3): per service, every `autoscale_s`, the live rate
(`gpuflow.services.load`), a 15-minute forecast and the replicas it has; `scorer.services.decide`
says how many it needs. The forecast is the forecast processor's (on the stored history) when
issued within `forecast_max_age_ms`, else seasonal on the per-minute rates this worker heard.

Replicas are jobs (`scorer.services.replica_job`): index n of service S is `svc-S-n`, its
replacements `svc-S-n.g` (generation g). Their state is read from this worker's scheduler
(queue, reservations, final decisions, stale nodes), so a restarted worker finds the replicas it
had and submits none twice. The replicas wanted are indices 0..serving+standby-1: the lowest
live ones serve, the rest are warm standbys, so scale-out promotes standbys first (WARM) and
submits new jobs for the rest (NEIGHBOUR while free GPUs are there, else COLD). Scale-in, after
the hysteresis, cancels the highest indices through the cancel path (a CancelRequest this worker
issues). A replica that ended, was rejected or sits on a stale node is replaced by its next
generation; a live older generation of a replaced index is cancelled. Every look publishes a
ScalingDecision with the reason (docs/services.md).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from infra.servicespec import service_from_record
from infra.topics import JOBS_CANCEL, JOBS_SUBMITTED, SERVICES_SCALING
from schemas import timestamp_ms
from schemas.registry import default_schemas
from scorer.forecasts import ForecastCurve
from scorer.services import (
    Action,
    ScaleState,
    ServiceSpec,
    Tier,
    ZoneRoom,
    decide,
    p99_ms,
    plan_scale_in,
    plan_scale_out,
    pool_capacity,
    replica_job,
    seasonal_forecast,
    service_ms_on,
    warm_target,
)
from scorer.services.seasonal import WEEK_MIN
from streams.base.outbox import Outgoing, new_event_id, outgoing
from streams.services.replicas import Replica, job_record_of, replicas_of, zone_name

if TYPE_CHECKING:
    from schemas.signing import Signer
    from streams.scheduler.core import Scheduler

__all__ = ["Autoscaler", "ServiceBook"]

log = logging.getLogger(__name__)

HORIZON_MIN = 15
_KEEP_MIN = WEEK_MIN + 2 * HORIZON_MIN
IN_WORKER = "in-worker seasonal"  # the forecast's source when the processor's is not fresh


@dataclass
class ServiceBook:
    """What the autoscaler knows of one service."""

    spec: ServiceSpec
    state: ScaleState
    partition: int = 0  # of the specs topic: the worker holding it scales the service
    minutes: list[float] = field(default_factory=list)  # per-minute mean rate, oldest first
    last_minute: int | None = None
    minute_sum: float = 0.0
    minute_n: int = 0
    by_zone: dict[str, tuple[float, int]] = field(default_factory=dict)  # zone -> (rps, ts)
    previous_rps: float | None = None
    looks: int = 0
    within_slo: int = 0
    last: dict[str, Any] = field(default_factory=dict)  # the last decision, for the page


class Autoscaler:
    """Decisions for the services this worker reads; `tick` returns the messages to send."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        stale: Callable[[], set[str]],
        signer: Signer | None = None,
        owned: Callable[[int], bool] = lambda _: True,
        forecasts: Callable[[str], ForecastCurve | None] = lambda _: None,
        forecast_max_age_ms: int = 420_000,
    ) -> None:
        self.s = scheduler
        self.forecasts = forecasts  # service -> the forecast processor's latest forecast
        self.forecast_max_age_ms = forecast_max_age_ms
        self.stale = stale  # the fleet's stale node ids, now
        self.signer = signer
        self.owned = owned  # whether this worker holds a partition of the specs topic
        self.books: dict[str, ServiceBook] = {}
        # job id -> (when submitted, ms; the region it was pinned to), until it is seen
        self.sent_at: dict[str, tuple[int, str]] = {}
        self.pinned: dict[str, str] = {}  # replica job -> the zone it was pinned to
        self.rejected_at: dict[str, int] = {}  # service:index -> when last resent after a REJECTED

    # ---- inputs -------------------------------------------------------------------------
    def on_spec(self, record: Mapping[str, Any], partition: int = 0) -> None:
        """A declared, updated or withdrawn service (a bad record raises ServiceSpecError)."""
        name = str(record.get("name") or "")
        if record.get("deleted"):
            self.books.pop(name, None)
            log.info("service withdrawn service=%s", name)
            return
        spec = service_from_record(record)
        book = self.books.get(spec.name)
        if book is None:
            self.books[spec.name] = ServiceBook(spec, ScaleState(spec.min_replicas), partition)
        else:
            book.spec, book.partition = spec, partition
            n = max(spec.min_replicas, min(spec.max_replicas, book.state.replicas))
            book.state = replace(book.state, replicas=n)
        log.info("service declared service=%s", spec.name)

    def on_load(self, record: Mapping[str, Any]) -> None:
        book = self.books.get(str(record["service"]))
        if book is None:
            return
        rps, ts = max(0.0, float(record["requests_per_s"])), timestamp_ms(record["ts"])
        book.by_zone[str(record.get("zone") or "")] = (rps, ts)
        total = self.observed(book, ts)
        minute = ts // 60_000
        if book.last_minute is not None and minute > book.last_minute:
            mean = book.minute_sum / max(1, book.minute_n)
            gap = min(minute - book.last_minute, _KEEP_MIN)
            book.minutes.extend([mean] * gap)  # a silent minute holds the last rate
            del book.minutes[:-_KEEP_MIN]
            book.minute_sum, book.minute_n = 0.0, 0
        book.last_minute = minute if book.last_minute is None else max(book.last_minute, minute)
        book.minute_sum += total
        book.minute_n += 1

    @staticmethod
    def observed(book: ServiceBook, now_ms: int, max_age_ms: int = 60_000) -> float:
        """The rate now: the sum of each zone's last report, those under a minute old."""
        return sum(r for r, ts in book.by_zone.values() if now_ms - ts <= max_age_ms)

    def forecast(self, book: ServiceBook, now_rps: float, now_ms: int) -> tuple[list[float], str]:
        """Per-minute rates from the minute under way, and their source: the processor's
        forecast (its steps from now on) when fresh, else the in-worker seasonal one."""
        curve = self.forecasts(book.spec.name)
        if curve is not None and -60_000 <= now_ms - curve.issued_ms <= self.forecast_max_age_ms:
            ahead = curve.values(now_ms, now_ms + HORIZON_MIN * 60_000)
            if len(ahead):
                return [float(x) for x in ahead], f"forecast processor, model {curve.model}"
        history = [*book.minutes, now_rps]  # the minute under way counts at its rate now
        return [float(x) for x in seasonal_forecast(history, HORIZON_MIN)], IN_WORKER

    # ---- one look -----------------------------------------------------------------------
    def tick(self, now_ms: int) -> list[Outgoing]:
        out: list[Outgoing] = []
        rooms = self._rooms()
        for book in list(self.books.values()):
            if not self.owned(book.partition):
                continue
            out.extend(self._look(book, now_ms, rooms))
        return out

    def _look(
        self, book: ServiceBook, now_ms: int, rooms: dict[str, tuple[int, int]]
    ) -> list[Outgoing]:
        spec = book.spec
        replicas = replicas_of(self.s, spec.name, self.stale(), self.sent_at, now_ms)
        model = spec.gpu_models[0] if spec.gpu_models else "H100"
        pool = pool_capacity(spec, model)
        rps = self.observed(book, now_ms)
        ahead, source = self.forecast(book, rps, now_ms)
        before = book.state.replicas
        decision, book.state = decide(
            spec, pool, book.state, rps, ahead, now_ms / 1000.0, book.previous_rps
        )
        book.previous_rps = rps
        serving = decision.target
        wanted = serving + warm_target(spec, serving)
        live = {r.index: r for r in replicas if r.live and r.latest}
        standby_zones = self._standby_zones(live, before)
        grants = self._grants(spec, decision.action, serving - before, standby_zones, rooms, live)
        out = self._submit(spec, replicas, wanted, now_ms, rooms)
        stopped, cancels = self._stop(spec, replicas, wanted, now_ms)
        out.extend(cancels)
        self._judge(book, spec, model, live, serving, rps)
        degraded = any(g.tier is Tier.DEGRADE for g in grants)
        action = "DEGRADE" if degraded else decision.action.value
        if decision.action is Action.HOLD and stopped:
            action = "SCALE_IN"  # older generations or extras stopped
        record = {
            "event_id": new_event_id(spec.name, "scale", str(now_ms)),
            "ts": now_ms, "schema": 1, "service": spec.name, "action": action,
            "replicas_before": before, "replicas_after": serving,
            "observed_rps": rps, "forecast_rps": max(ahead) if ahead else 0.0,
            "horizon_s": HORIZON_MIN * 60, "need_observed": decision.need_observed,
            "need_forecast": decision.need_forecast,
            "grants": [{"tier": g.tier.value, "zone": g.zone, "replicas": g.count}
                       for g in grants],
            "stopped": stopped, "degrade_mode": spec.degrade if degraded else "",
            "reason": decision.reason + f"; {len(live)} live of {wanted} wanted"
                      f"; forecast: {source}",
        }  # fmt: skip
        book.last = {**record, "forecast_source": source, "replicas": [
            {**r.view(), "role": "serving" if r.index < serving else "standby"}
            for r in replicas if r.latest
        ]}  # fmt: skip
        out.append(outgoing(SERVICES_SCALING, spec.name, record, region=None, partition_of=_p0))
        return out

    def _standby_zones(self, live: Mapping[int, Replica], serving: int) -> dict[str, int]:
        zones: dict[str, int] = {}
        for r in sorted(live.values(), key=lambda r: r.index)[serving:]:
            if r.running:
                zones[r.zone] = zones.get(r.zone, 0) + 1
        return zones

    def _grants(
        self,
        spec: ServiceSpec,
        action: Action,
        add: int,
        warm: Mapping[str, int],
        rooms: Mapping[str, tuple[int, int]],
        live: Mapping[int, Replica],
    ) -> list[Any]:
        if action is not Action.SCALE_OUT or add <= 0:
            return []
        have: dict[str, int] = {}
        for r in live.values():
            if r.running:
                have[r.zone] = have.get(r.zone, 0) + 1
        per = max(1, spec.gpus_per_replica)
        zones = (set(rooms) & set(spec.zones)) if spec.zones else set(rooms)
        plan = [
            ZoneRoom(z, have.get(z, 0), warm.get(z, 0), rooms[z][0] // per, rooms[z][1] // per)
            for z in sorted(zones | set(warm))
            if z in rooms or z in warm
        ]
        target = sum(have.values()) + add
        return plan_scale_out(plan, add, target, spec.max_zone_share)

    def _rooms(self) -> dict[str, tuple[int, int]]:
        """Per zone of the regions this worker holds: (free GPUs, GPUs held by preemptible
        jobs) on healthy nodes. A zone is named region/zone (zone names repeat)."""
        state, stale = self.s.state, self.stale()
        out: dict[str, tuple[int, int]] = {}
        preemptible = {j for j, run in self.s.tenancy.running.items() if run.preemptible}
        held: dict[str, int] = {}
        for job_id in preemptible:
            for a in state.jobs.get(job_id, ()):
                held[a.node_id] = held.get(a.node_id, 0) + 1
        for node in state.nodes:
            if node.node_id in stale:
                continue
            zone = zone_name(node.region, node.zone)
            free = sum(1 for m in state.gpu_free_milli(node.node_id) if m >= 1000)
            f, h = out.get(zone, (0, 0))
            out[zone] = (f + free, h + held.get(node.node_id, 0))
        return out

    def _submit(
        self,
        spec: ServiceSpec,
        replicas: list[Replica],
        wanted: int,
        now_ms: int,
        rooms: Mapping[str, tuple[int, int]],
    ) -> list[Outgoing]:
        latest = {r.index: r for r in replicas if r.latest}
        for r in replicas:  # a pin matters until the replica is placed (then its zone is known)
            if r.zone or not r.latest:
                self.pinned.pop(r.job_id, None)
        free = {
            z: g
            for z, (g, _) in rooms.items()
            if z.split("/", 1)[0] in spec.regions and (not spec.zones or z in spec.zones)
        } or {r: 0 for r in spec.regions}
        held = dict.fromkeys(free, 0)
        for r in latest.values():
            zone = r.zone or self.pinned.get(r.job_id, r.region)
            if r.live and r.index < wanted and zone in held:
                held[zone] += 1
        cap = max(1, math.ceil(spec.max_zone_share * wanted))
        out = []
        for n in range(wanted):
            had = latest.get(n)
            if had is not None and had.live:
                continue
            gen = 0 if had is None else had.generation + 1
            if had is not None and had.status == "REJECTED":
                key = f"{spec.name}:{n}"
                if now_ms - self.rejected_at.get(key, 0) < 30_000:
                    continue  # nowhere to put it a moment ago: wait before the next try
                self.rejected_at[key] = now_ms
            zone = _spread_zone(spec, held, free, cap)
            held[zone] += 1
            free[zone] -= spec.gpus_per_replica
            region = zone.split("/", 1)[0]
            job = replica_job(spec, n)
            job_id = job.job_id if gen == 0 else f"{job.job_id}.{gen}"
            pin = (zone,) if "/" in zone else ()
            job = replace(job, job_id=job_id, allowed_regions=(region,), allowed_zones=pin)
            self.pinned[job_id] = zone
            record = job_record_of(job, spec, now_ms)
            if self.signer is not None:
                record = self.signer.sign(record, now_ms=now_ms)
            self.sent_at[job_id] = (now_ms, region)
            log.info("replica submitted service=%s job_id=%s region=%s", spec.name, job_id, region)
            out.append(outgoing(JOBS_SUBMITTED, job_id, record, region=None, partition_of=_p0))
        return out

    def _stop(
        self, spec: ServiceSpec, replicas: list[Replica], wanted: int, now_ms: int
    ) -> tuple[dict[str, int], list[Outgoing]]:
        """Cancel live replicas beyond `wanted` (fullest zone first) and live older
        generations of a replaced index."""
        extra = [r for r in replicas if r.live and r.latest and r.index >= wanted]
        old = [r for r in replicas if r.live and not r.latest]
        zones = plan_scale_in(_count_zones(extra), len(extra)) if extra else {}
        stopped: dict[str, int] = {}
        out = []
        for r in sorted(extra, key=lambda r: -r.index) + old:
            if r in extra and zones.get(r.zone, 0) <= 0:
                continue
            if r in extra:
                zones[r.zone] -= 1
            stopped[r.zone] = stopped.get(r.zone, 0) + 1
            out.append(self._cancel(spec, r, now_ms))
        return stopped, out

    def _cancel(self, spec: ServiceSpec, r: Replica, now_ms: int) -> Outgoing:
        record: dict[str, Any] = {
            "event_id": new_event_id(r.job_id, "scale-in", str(r.generation)),
            "ts": now_ms, "job_id": r.job_id, "tenant": spec.name,
            "reason": f"autoscaler: service {spec.name} scales in",
            "requested_by": "autoscaler", "key_id": "", "signature": "",
        }  # fmt: skip
        if self.signer is not None:
            record = self.signer.sign(record, now_ms=now_ms, schema=_cancel_schema())
        log.info("replica cancelled service=%s job_id=%s", spec.name, r.job_id)
        return outgoing(JOBS_CANCEL, r.job_id, record, region=None, partition_of=_p0)

    def _judge(
        self,
        book: ServiceBook,
        spec: ServiceSpec,
        model: str,
        live: Mapping[int, Replica],
        serving: int,
        rps: float,
    ) -> None:
        """SLO attainment: the share of looks whose M/M/c p99 of the serving replicas that
        run, at the observed rate, is within the SLO."""
        running = min(serving, sum(1 for r in live.values() if r.running))
        p99 = p99_ms(rps, running * spec.batch, service_ms_on(spec, model)) if running else math.inf
        book.looks += 1
        book.within_slo += int(rps <= 0 or p99 <= spec.slo_p99_ms)

    # ---- the page -----------------------------------------------------------------------
    def view(self) -> dict[str, Any]:
        out = {}
        for name, book in sorted(self.books.items()):
            out[name] = {
                "slo_p99_ms": book.spec.slo_p99_ms,
                "min_replicas": book.spec.min_replicas,
                "max_replicas": book.spec.max_replicas,
                "serving_target": book.state.replicas,
                "history_minutes": len(book.minutes),
                "slo_attainment": book.within_slo / book.looks if book.looks else None,
                "looks": book.looks,
                "forecast_source": book.last.get("forecast_source"),
                "last": book.last,
            }
        return {"services": out}


def _spread_zone(
    spec: ServiceSpec, held: Mapping[str, int], free: Mapping[str, int], cap: int
) -> str:
    """The allowed zone (region/zone) holding the fewest of the service's replicas, among those
    under the spread cap with a replica's worth of free GPUs, else under the cap, else any (the
    cap is relaxed only when it leaves the replica nowhere). A region stands in for its zones
    when this worker knows no node there."""
    order = sorted(free)
    under = [z for z in order if held[z] < cap]
    roomy = [z for z in under if free[z] >= spec.gpus_per_replica]
    return min(roomy or under or order, key=lambda z: (held[z], order.index(z)))


def _count_zones(replicas: list[Replica]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in replicas:
        out[r.zone] = out.get(r.zone, 0) + 1
    return out


def _p0(_: str) -> int:
    return 0


def _cancel_schema() -> Any:
    return default_schemas().get("CancelRequest")
