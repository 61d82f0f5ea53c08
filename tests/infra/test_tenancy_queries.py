"""The tenancy queries of docs/queries.md on the real chDB engine, against figures by hand."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from infra.store import Store
from infra.store import samples as S
from infra.store.queries import (
    GPU_HOURS_LOST_TO_PREEMPTION_BY_TENANT,
    QUEUE_WAIT_BY_TENANT_AND_CLASS,
)

NOW = int(time.time() * 1000) // 1000 * 1000


def _preempt(
    victim: str, epoch: int, tenant: str, gpus: int, lost: float, cause: str, eid: str
) -> tuple[str, dict[str, Any]]:
    rec = S.preemption(victim, "p", "eu", NOW + epoch * 60_000, gpus=gpus)
    extra = {"event_id": eid, "victim_epoch": epoch, "victim_tenant": tenant, "cause": cause,
             "expected_lost_gpu_s": lost}  # fmt: skip
    return ("PreemptionDecision", rec | extra)


def _evicted(job: str, epoch: int, lost: float, eid: str) -> tuple[str, dict[str, Any]]:
    rec = S.job_event(job, "eu", "EVICTED", NOW + epoch * 60_000 + 5_000, event_id=eid)
    return ("JobEvent", rec | {"epoch": epoch, "lost_gpu_s": lost})


def test_gpu_hours_lost_to_preemption_by_tenant(
    store: Store, insert: Callable[[list[Any]], None]
) -> None:
    insert([
        _preempt("v1", 0, "research", 2, 7200.0, "PRIORITY", "pre-v1-0"),
        _preempt("v1", 0, "research", 2, 7200.0, "PRIORITY", "pre-v1-0"),  # redelivered
        _evicted("v1", 0, 3600.0, "ev-v1-0"),  # the executor says 3600 GPU-s were lost
        _evicted("v1", 0, 3600.0, "ev-v1-0"),  # redelivered
        _preempt("v1", 1, "research", 2, 1800.0, "RECLAIM", "pre-v1-1"),  # never reported
        _preempt("v2", 0, "vision", 4, 900.0, "PRIORITY", "pre-v2-0"),
        _evicted("v2", 0, 0.0, "ev-v2-0"),  # checkpointed first: nothing lost
    ])  # fmt: skip
    rows = store.query(GPU_HOURS_LOST_TO_PREEMPTION_BY_TENANT).rows
    # research: 2 preemptions (1 reclaim), 2 + 2 GPUs, 1 not reported; (3600 reported +
    # 1800 estimated) / 3600 = 1.5 GPU-hours. vision: 1, 0, 4 GPUs, 0 h (checkpointed).
    assert rows == (("research", 2, 1, 4, 1, 1.5), ("vision", 1, 0, 4, 0, 0.0))


def test_queue_wait_by_tenant_and_class(store: Store, insert: Callable[[list[Any]], None]) -> None:
    def placed(
        job: str, tenant: str, cls: str, epoch: int, queued: int, ts: int
    ) -> tuple[str, dict[str, Any]]:
        rec = S.placement(job, ts, submitted_ts=NOW, tenant=tenant)
        return (
            "PlacementDecision",
            rec | {"epoch": epoch, "priority_class": cls, "queued_ts": queued},
        )

    insert([
        placed("a", "serving", "online-inference", 0, NOW, NOW + 1_000),  # waited 1 s
        placed("b", "research", "batch", 0, NOW, NOW + 5_000),  # 5 s
        # b evicted at +600 s, placed again at +602 s: the wait counts from the eviction
        placed("b", "research", "batch", 1, NOW + 600_000, NOW + 602_000),
    ])  # fmt: skip
    rows = store.query(QUEUE_WAIT_BY_TENANT_AND_CLASS).rows
    assert rows == (
        ("research", "batch", False, 1, 5000, 5000),
        ("research", "batch", True, 1, 2000, 2000),
        ("serving", "online-inference", False, 1, 1000, 1000),
    )
