"""A service's replica jobs as this worker's scheduler holds them: waiting, running (and where),
stopping, ended or rejected; the JobSubmitted record of a replica; a replica's id and zone."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from scorer.services import ServiceSpec
from scorer.types import JobSpec

if TYPE_CHECKING:
    from streams.scheduler.core import Scheduler

__all__ = [
    "REPLICA_DURATION_S",
    "Replica",
    "job_record_of",
    "parse_replica_id",
    "replicas_of",
    "zone_name",
]

REPLICA_DURATION_S = 30 * 86_400.0  # a replica serves until it is stopped
_PENDING_MS = 60_000  # a submission not yet seen by the router is on its way this long
LIVE = ("PENDING", "WAITING", "RUNNING")
_ID = re.compile(r"^svc-(?P<svc>.+)-(?P<n>\d+)(?:\.(?P<g>\d+))?$")


@dataclass(frozen=True)
class Replica:
    job_id: str
    index: int
    generation: int
    status: str  # PENDING, WAITING, RUNNING, STOPPING, ENDED, LOST, REJECTED
    zone: str = ""  # region/zone of its first GPU, while it runs
    latest: bool = True  # the newest generation of its index
    ended: str = ""  # how it ended (FINISHED, FAILED, EVICTED, CANCELLED, ...)
    region: str = ""  # where it runs or waits
    pins: tuple[str, ...] = ()  # the zones a waiting replica may be placed in

    @property
    def live(self) -> bool:
        return self.status in LIVE

    @property
    def running(self) -> bool:
        return self.status == "RUNNING"

    def view(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id, "index": self.index, "status": self.status,
            "zone": self.zone, "region": self.region, "ended": self.ended,
        }  # fmt: skip


def _ids(s: Scheduler, prefix: str, sent: Iterable[str]) -> set[str]:
    found = {j for j in s.queue.keys() if j.startswith(prefix)}  # noqa: SIM118
    found |= {j for j in s.reservations.keys() if j.startswith(prefix)}  # noqa: SIM118
    return found | {j for j in sent if j.startswith(prefix)}


def replicas_of(
    s: Scheduler,
    service: str,
    stale: set[str],
    sent_at: MutableMapping[str, tuple[int, str]],
    now_ms: int,
) -> list[Replica]:
    """Every replica job of `service` this worker knows, newest generation marked."""
    prefix = f"svc-{service}-"
    pattern = re.compile(re.escape(prefix) + r"(\d+)(?:\.(\d+))?$")
    out: list[Replica] = []
    for job_id in _ids(s, prefix, list(sent_at)):
        m = pattern.match(job_id)
        if m is None:
            continue
        status, zone, ended, region = _status(s, job_id, stale, sent_at, now_ms)
        n, gen = int(m[1]), int(m[2] or 0)
        waiting = s.queue.get(job_id) if status == "WAITING" else None
        pins = tuple((waiting or {}).get("job", {}).get("allowed_zones") or ())
        out.append(Replica(job_id, n, gen, status, zone, ended=ended, region=region, pins=pins))
    newest: dict[int, int] = {}
    for r in out:
        newest[r.index] = max(newest.get(r.index, -1), r.generation)
    return sorted(
        (replace(r, latest=False) if r.generation != newest[r.index] else r for r in out),
        key=lambda r: (r.index, r.generation),
    )


def _status(
    s: Scheduler,
    job_id: str,
    stale: set[str],
    sent_at: MutableMapping[str, tuple[int, str]],
    now_ms: int,
) -> tuple[str, str, str, str]:
    """(status, zone, how it ended, region)."""
    waiting = s.queue.get(job_id)
    if waiting is not None:
        sent_at.pop(job_id, None)
        return "WAITING", "", "", str(waiting.get("region") or "")
    entry = s.reservations.get(job_id)
    if entry is not None:
        sent_at.pop(job_id, None)
        region = str(entry.get("region") or "")
        if entry.get("released"):
            return "ENDED", "", str(entry.get("ended") or ""), region
        nodes = [str(a["node_id"]) for a in entry.get("assignments") or ()]
        zone = _zone(s, nodes[0]) if nodes else region
        if entry.get("cancelled"):
            return "STOPPING", zone, "", region
        if any(n in stale for n in nodes):
            return "LOST", zone, "node stale", region
        return "RUNNING", zone, "", region
    if job_id in s.final:
        sent_at.pop(job_id, None)
        return "REJECTED", "", "REJECTED", ""
    sent = sent_at.get(job_id)
    if sent is not None and now_ms - sent[0] < _PENDING_MS:
        return "PENDING", "", "", sent[1]
    sent_at.pop(job_id, None)
    return "ENDED", "", "never seen", ""


def _zone(s: Scheduler, node_id: str) -> str:
    try:
        node = s.state.node(node_id)
    except (KeyError, IndexError, AssertionError):
        return ""
    return zone_name(node.region, node.zone)


def zone_name(region: str, zone: str) -> str:
    """A zone as the autoscaler counts it: `region/zone`, or the region where nodes name none."""
    return f"{region}/{zone}" if zone else region


def parse_replica_id(job_id: str) -> tuple[str, int, int] | None:
    """(service, index, generation) of a replica job id, None for other jobs."""
    m = _ID.match(job_id)
    if m is None:
        return None
    return m["svc"], int(m["n"]), int(m["g"] or 0)


def job_record_of(job: JobSpec, spec: ServiceSpec, now_ms: int) -> dict[str, Any]:
    """The JobSubmitted record of one replica (unsigned)."""
    return {
        "event_id": str(uuid.uuid4()), "ts": now_ms, "job_id": job.job_id,
        "tenant": job.tenant, "kind": job.kind, "model_family": job.model_family,
        "params_b": job.params_b, "precision": job.precision,
        "tensor_parallel": job.tensor_parallel, "gpu_count": job.gpu_count,
        "allowed_gpu_models": list(job.allowed_gpu_models),
        "allowed_regions": list(job.allowed_regions),
        "allowed_zones": list(job.allowed_zones), "priority": job.priority,
        "preemptible": False, "checkpointable": False, "micro_batch": job.micro_batch,
        "seq_len": job.seq_len, "priority_class": job.priority_class,
        "expected_duration_s": REPLICA_DURATION_S, "command": list(spec.command),
    }  # fmt: skip
