"""What becomes of a job when one of its placements ends: the requeue rules (issue 31).

An epoch ends with one of `ENDS`. FINISHED, TIMEOUT and CANCELLED are final. EVICTED (a
preemption, a move, a node the worker found stale) waits again with its progress. FAILED
depends on its cause:

    cause          requeued             uses a retry
    EXIT           while retries remain yes   (the command exited non-zero)
    NODE_LOST      always               no    (the machine's fault, not the job's)
    GPU_ERROR      always               no    (ECC, XID)
    REFUSED        always               no    (the executor's double-booking guard)
    LAUNCH_ERROR   never                -     (command not found, bad workdir)
    NONE           never                -     (an executor that does not say: as before)

A job's `retries` is on its submission (`job.retries`); the failures it used so far ride on the
waiting record (`failures`), like `evictions`. A job cancelled by its tenant is final whatever
its last placement reports (`cancelled` on its reservation entry).

The ledger keeps an end as its kind, with the cause after a colon for FAILED ("FAILED:EXIT"),
so a rebuild applies the same rules (`end_kind`, `split_kind`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ENDS",
    "FINAL_KINDS",
    "EndRule",
    "end_kind",
    "end_rule",
    "is_over",
    "retries_left",
    "split_kind",
]

ENDS = ("FINISHED", "FAILED", "EVICTED", "TIMEOUT", "CANCELLED")  # an epoch's last report
FINAL_KINDS = ("FINISHED", "TIMEOUT", "CANCELLED")  # never run again
_MACHINE_FAULTS = ("NODE_LOST", "GPU_ERROR", "REFUSED")  # requeued, no retry used


@dataclass(frozen=True)
class EndRule:
    """What an ended epoch means for its job: waits again (`requeue`), using one of its
    retries (`counted`), or is over (`state`: FINISHED, FAILED, TIMEOUT or CANCELLED)."""

    requeue: bool
    counted: bool = False
    state: str = ""
    why: str = ""


def retries_left(routed: Mapping[str, Any] | None) -> int:
    """Re-runs after a non-zero exit this job still has."""
    if not routed:
        return 0
    job = routed.get("job") or {}
    return max(0, int(job.get("retries") or 0) - int(routed.get("failures") or 0))


def end_rule(
    kind: str, cause: str, routed: Mapping[str, Any] | None, *, cancelled: bool = False
) -> EndRule:
    """The rule for an epoch that ended `kind` (with `cause`, for FAILED) — see the table."""
    if cancelled and kind != "FINISHED":
        return EndRule(False, state="CANCELLED", why="cancelled")
    if kind == "EVICTED":
        return EndRule(True, why="evicted")
    if kind != "FAILED":
        return EndRule(False, state=kind, why=kind.lower())
    if cause in _MACHINE_FAULTS:
        return EndRule(True, why=f"failed ({cause}); not counted against its retries")
    if cause == "EXIT":
        left = retries_left(routed)
        if left > 0:
            return EndRule(True, counted=True, why=f"exited non-zero; {left - 1} retries left")
        return EndRule(False, state="FAILED", why="exited non-zero; no retries left")
    return EndRule(False, state="FAILED", why=f"failed ({cause or 'NONE'})")


def end_kind(event: Mapping[str, Any]) -> str:
    """How the ledger keeps an end: its type, with the cause for a FAILED that has one."""
    kind, cause = str(event["type"]), str(event.get("cause") or "NONE")
    return f"{kind}:{cause}" if kind == "FAILED" and cause != "NONE" else kind


def split_kind(kind: str) -> tuple[str, str]:
    """("FAILED", "EXIT") from "FAILED:EXIT"; (kind, "NONE") otherwise."""
    base, _, cause = kind.partition(":")
    return base, cause or "NONE"


def is_over(kind: str) -> bool:
    """Whether an end of this kind (as the ledger keeps it) may be a job's last: everything but
    EVICTED (a requeued FAILED job is kept by the queue that holds it)."""
    return split_kind(kind)[0] in ENDS and split_kind(kind)[0] != "EVICTED"
