"""Every attempt of a job as an epoch in ClickHouse (issue 31), on the real chDB engine."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from infra.store import Store
from infra.store import samples as S
from infra.store.queries import JOB_EPOCHS

pytestmark = pytest.mark.integration

NOW = int(time.time() * 1000) // 1000 * 1000


def _placed(job: str, epoch: int, at: int, node: str) -> tuple[str, dict[str, Any]]:
    rec = S.placement(job, at, submitted_ts=NOW, nodes=(node,), gpus_per_node=2,
                      event_id=f"{job}:final:{epoch}")  # fmt: skip
    return ("PlacementDecision", rec | {"epoch": epoch})


def _event(job: str, kind: str, epoch: int, at: int, node: str, **kw: Any) -> tuple[str, Any]:
    rec = S.job_event(job, "eu", kind, at, nodes=(node,), event_id=f"{job}:{kind}:{epoch}")
    return ("JobEvent", rec | {"epoch": epoch, "cause": "NONE", **kw})


def test_each_attempt_is_an_epoch_with_its_exit_code(
    store: Store, insert: Callable[[list[Any]], None]
) -> None:
    m = 60_000
    failed = _event("j", "FAILED", 0, NOW + 1000 + 30 * m, "n1", exit_code=3, cause="EXIT",
                    stderr_tail="Traceback ...\nValueError: bad batch")  # fmt: skip
    insert([
        _placed("j", 0, NOW, "n1"),
        _event("j", "STARTED", 0, NOW + 1000, "n1", pid=41),
        failed,
        failed,  # redelivered: one end
        _placed("j", 1, NOW + 31 * m, "n2"),
        _event("j", "STARTED", 1, NOW + 31 * m, "n2", pid=77),
        _event("j", "FINISHED", 1, NOW + 91 * m, "n2", exit_code=0, progress=1.0),
        _placed("j", 2, NOW + 92 * m, "n3"),  # a third placement not started yet
    ])  # fmt: skip
    res = store.query(JOB_EPOCHS, {"job": "j"})
    rows = [dict(zip(res.columns, r, strict=True)) for r in res.rows]
    assert [(r["epoch"], r["state"], r["exit_code"], r["cause"]) for r in rows] == [
        (0, "FAILED", 3, "EXIT"),
        (1, "FINISHED", 0, ""),
        (2, "RUNNING", None, ""),
    ]
    # 2 GPUs for 30 minutes, then for 60: 1.0 and 2.0 GPU-hours
    assert [r["gpu_hours"] for r in rows] == [1.0, 2.0, 0.0]
    assert [r["nodes"] for r in rows] == [["n1"], ["n2"], ["n3"]]
    assert rows[0]["stderr_tail"].endswith("ValueError: bad batch")
    assert rows[2]["started"] is None and rows[2]["ended"] is None
