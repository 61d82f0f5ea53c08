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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from infra.servicespec import service_from_record
from infra.topics import JOBS_CANCEL, JOBS_SUBMITTED, SERVICES_SCALING
from schemas import timestamp_ms
from schemas.registry import default_schemas
from scorer.forecasts import ForecastCurve
from scorer.services import (
    Action,
    Held,
    ScaleState,
    ServiceSpec,
    Start,
    Tier,
    decide,
    p99_ms,
    plan_look,
    ready_after_s,
    replica_job,
    service_ms_on,
    service_pool,
    serving_of,
    warm_target,
)
from streams.base.outbox import Outgoing, new_event_id, outgoing
from streams.services.load import HORIZON_MIN, ServiceBook
from streams.services.replicas import Replica, job_record_of, replicas_of, zone_name

if TYPE_CHECKING:
    from schemas.signing import Signer
    from streams.scheduler.core import Scheduler

__all__ = ["IN_WORKER", "Autoscaler"]

log = logging.getLogger(__name__)

_RETRY_MS = 30_000  # a replica rejected for want of room is sent again after this
IN_WORKER = "in-worker seasonal"  # the forecast's source when the processor's is not fresh


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
        self.loaded_at: dict[str, int] = {}  # replica job -> when it has loaded (in memory)
        self.now_ms = 0  # the look under way

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
        if book is not None:
            rps, ts = max(0.0, float(record["requests_per_s"])), timestamp_ms(record["ts"])
            book.hear(str(record.get("zone") or ""), rps, ts)

    def forecast(self, book: ServiceBook, now_rps: float, now_ms: int) -> tuple[list[float], str]:
        """Per-minute rates from the minute under way, and their source: the processor's
        forecast (its steps from now on) when fresh, else the in-worker seasonal one."""
        curve = self.forecasts(book.spec.name)
        if curve is not None and -60_000 <= now_ms - curve.issued_ms <= self.forecast_max_age_ms:
            ahead = curve.values(now_ms, now_ms + HORIZON_MIN * 60_000)
            if len(ahead):
                return [float(x) for x in ahead], f"forecast processor, model {curve.model}"
        return book.seasonal(now_rps, HORIZON_MIN), IN_WORKER

    # ---- one look -----------------------------------------------------------------------
    def tick(self, now_ms: int) -> list[Outgoing]:
        out: list[Outgoing] = []
        self.now_ms = now_ms
        rooms = self._rooms()
        for _, book in sorted(self.books.items()):  # by name: a look sees the ones before
            if not self.owned(book.partition):
                continue
            out.extend(self._look(book, now_ms, rooms))
        return out

    def _look(
        self, book: ServiceBook, now_ms: int, rooms: dict[str, tuple[int, int, str]]
    ) -> list[Outgoing]:
        spec = book.spec
        replicas = replicas_of(self.s, spec.name, self.stale(), self.sent_at, now_ms)
        allowed = _allowed(spec, rooms)
        pool = service_pool(spec, [rooms[z][2] for z in allowed if z in rooms])
        rps = book.observed(now_ms)
        ahead, source = self.forecast(book, rps, now_ms)
        before = book.state.replicas
        decision, book.state = decide(
            spec, pool, book.state, rps, ahead, now_ms / 1000.0, book.previous_rps
        )
        book.previous_rps = rps if book.by_zone else None  # nothing heard yet: no rise
        serving = decision.target
        latest = {r.index: r for r in replicas if r.latest}
        held = self._held(spec, latest, now_ms, allowed)
        look = plan_look(spec, before, serving, warm_target(spec, serving), held, allowed)
        out = self._submit(spec, latest, look.starts, now_ms)
        stopped, cancels = self._stop(spec, replicas, look.stops)
        out.extend(cancels)
        _spend(rooms, spec, look.starts, stopped)
        self._judge(book, spec, held, serving, rps, [rooms[z][2] for z in allowed if z in rooms])
        action = "DEGRADE" if look.degraded else decision.action.value
        if decision.action is Action.HOLD and stopped:
            action = "SCALE_IN"  # older generations or extras stopped
        live = sum(1 for r in latest.values() if r.live)
        record = {
            "event_id": new_event_id(spec.name, "scale", str(now_ms)),
            "ts": now_ms, "schema": 1, "service": spec.name, "action": action,
            "replicas_before": before, "replicas_after": serving,
            "observed_rps": rps, "forecast_rps": max(ahead) if ahead else 0.0,
            "horizon_s": HORIZON_MIN * 60, "need_observed": decision.need_observed,
            "need_forecast": decision.need_forecast,
            "grants": [{"tier": g.tier.value, "zone": g.zone, "replicas": g.count}
                       for g in look.grants],
            "stopped": stopped, "degrade_mode": spec.degrade if look.degraded else "",
            "reason": decision.reason + f"; {live} live of {look.wanted} wanted"
                      f"; forecast: {source}",
        }  # fmt: skip
        book.last = {**record, "forecast_source": source, "replicas": [
            {**r.view(), "role": "serving" if r.index < serving else "standby"}
            for r in replicas if r.latest
        ]}  # fmt: skip
        out.append(outgoing(SERVICES_SCALING, spec.name, record, region=None, partition_of=_p0))
        return out

    def _held(
        self,
        spec: ServiceSpec,
        latest: Mapping[int, Replica],
        now_ms: int,
        allowed: Mapping[str, Any],
    ) -> list[Held]:
        """The live replicas as the look plans with them (their zone; loaded or not). A replica
        rejected a moment ago counts as on its way, so it is not sent again for 30 s; one
        waiting for zones with no healthy node (requeued off a stale one) counts as gone, so
        its next generation goes elsewhere and it is cancelled."""
        for r in latest.values():  # a pin matters until the replica is placed (then its zone
            if r.zone:  # is known)
                self.pinned.pop(r.job_id, None)
        out = []
        for i, r in latest.items():
            if r.pins and not any(z in allowed for z in r.pins):
                continue
            if r.live:
                zone = r.zone or self.pinned.get(r.job_id, r.region)
                loaded = r.running and now_ms >= self.loaded_at.get(r.job_id, 0)
                out.append(Held(i, zone, loaded))
            elif r.status == "REJECTED" and now_ms - self._rejected(spec, i) < _RETRY_MS:
                out.append(Held(i, "", False))
        return out

    def _rejected(self, spec: ServiceSpec, index: int) -> int:
        """When a replica of this index was last sent again after a REJECTED."""
        return self.rejected_at.get(f"{spec.name}:{index}", -_RETRY_MS)

    def _rooms(self) -> dict[str, tuple[int, int, str]]:
        """Per zone of the regions this worker holds: (free GPUs, GPUs held by preemptible
        jobs, GPU model) on healthy nodes. A zone is named region/zone (zone names repeat)."""
        state, stale = self.s.state, self.stale()
        out: dict[str, tuple[int, int, str]] = {}
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
            f, h, model = out.get(zone, (0, 0, node.gpu_model))
            out[zone] = (f + free, h + held.get(node.node_id, 0), model)
        return out

    def _submit(
        self, spec: ServiceSpec, latest: Mapping[int, Replica], starts: Sequence[Start], now_ms: int
    ) -> list[Outgoing]:
        """A replica job for each start, pinned to its zone (to its region only where this
        worker knows no node there)."""
        out = []
        for start in starts:
            had = latest.get(start.index)
            gen = 0 if had is None else had.generation + 1
            if had is not None and had.status == "REJECTED":
                self.rejected_at[f"{spec.name}:{start.index}"] = now_ms
            region = start.zone.split("/", 1)[0]
            job = replica_job(spec, start.index)
            job_id = job.job_id if gen == 0 else f"{job.job_id}.{gen}"
            pin = (start.zone,) if "/" in start.zone else ()
            job = replace(job, job_id=job_id, allowed_regions=(region,), allowed_zones=pin)
            self.pinned[job_id] = start.zone
            self.loaded_at[job_id] = now_ms + int(ready_after_s(spec, start.tier) * 1000)
            record = job_record_of(job, spec, now_ms)
            if self.signer is not None:
                record = self.signer.sign(record, now_ms=now_ms)
            self.sent_at[job_id] = (now_ms, region)
            log.info("replica submitted service=%s job_id=%s region=%s", spec.name, job_id, region)
            out.append(outgoing(JOBS_SUBMITTED, job_id, record, region=None, partition_of=_p0))
        return out

    def _stop(
        self, spec: ServiceSpec, replicas: list[Replica], stops: Sequence[int]
    ) -> tuple[dict[str, int], list[Outgoing]]:
        """Cancel the live replicas of the indices the look stops (highest first) and live
        older generations of a replaced index."""
        gone = set(stops)
        extra = [r for r in replicas if r.live and r.latest and r.index in gone]
        old = [r for r in replicas if r.live and not r.latest]
        stopped: dict[str, int] = {}
        out = []
        for r in sorted(extra, key=lambda r: -r.index) + old:
            stopped[r.zone] = stopped.get(r.zone, 0) + 1
            out.append(self._cancel(spec, r))
        return stopped, out

    def _cancel(self, spec: ServiceSpec, r: Replica) -> Outgoing:
        now_ms = self.now_ms
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
        held: Sequence[Held],
        serving: int,
        rps: float,
        models: Sequence[str],
    ) -> None:
        """SLO attainment: the share of looks whose M/M/c p99 of the serving replicas (the
        loaded ones), at the observed rate, is within the SLO."""
        running = len(serving_of(serving, held))
        model = max(models, key=lambda m: service_ms_on(spec, m)) if models else "H100"
        slot_ms = service_ms_on(spec, model)
        p99 = p99_ms(rps, running * spec.batch, slot_ms) if running else math.inf
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


def _allowed(
    spec: ServiceSpec, rooms: Mapping[str, tuple[int, int, str]]
) -> dict[str, tuple[int, int]]:
    """The zones a service may use, as (free GPUs, reclaimable GPUs): of its regions (and
    zones, models). A region where this worker knows no node stands in for its zones, with
    room for every replica: the replica is pinned to the region and placed by its owner."""
    out = {
        z: (free, held)
        for z, (free, held, model) in rooms.items()
        if z.split("/", 1)[0] in spec.regions
        and (not spec.zones or z in spec.zones or z.split("/", 1)[-1] in spec.zones)
        and (not spec.gpu_models or model in spec.gpu_models)
    }
    known = {z.split("/", 1)[0] for z in rooms}
    ample = spec.gpus_per_replica * spec.max_replicas
    out.update({r: (ample, 0) for r in spec.regions if r not in known})
    return out


def _spend(
    rooms: dict[str, tuple[int, int, str]],
    spec: ServiceSpec,
    starts: Sequence[Start],
    stopped: Mapping[str, int],
) -> None:
    """The look's starts take their GPUs from the rooms (free, else reclaimed) and its stops
    give theirs back, so the next service in the same pass plans with what is left."""
    per = spec.gpus_per_replica
    for start in starts:
        if start.zone in rooms:
            free, held, model = rooms[start.zone]
            if start.tier is Tier.NEIGHBOUR:
                rooms[start.zone] = (free - per, held, model)
            else:
                rooms[start.zone] = (free, held - per, model)
    for zone, n in stopped.items():
        if zone in rooms:
            free, held, model = rooms[zone]
            rooms[zone] = (free + n * per, held, model)


def _p0(_: str) -> int:
    return 0


def _cancel_schema() -> Any:
    return default_schemas().get("CancelRequest")
