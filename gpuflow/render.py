"""How decisions look on a terminal: one line each, coloured by outcome."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.markup import escape

__all__ = ["LINES", "advisory_line", "decision_line", "preemption_line"]

_STYLE = {"PLACED": "green", "QUEUED": "yellow", "REJECTED": "red"}
REASON_CHARS = 160  # a decision line stays one screen line or two


def _nodes(decision: Mapping[str, Any]) -> str:
    parts = []
    for a in decision.get("assignments") or ():
        gpus = ",".join(str(i) for i in a["gpu_indices"])
        share = f"@{a['gpu_milli']}m" if a.get("gpu_milli", 1000) < 1000 else ""
        parts.append(f"{a['node_id']}[{gpus}]{share}")
    shown = escape(" ".join(parts[:3]))
    return shown + (f" +{len(parts) - 3} nodes" if len(parts) > 3 else "")


def decision_line(decision: Mapping[str, Any]) -> str:
    """Rich markup for one PlacementDecision."""
    outcome = decision["outcome"]
    style = _STYLE.get(outcome, "white")
    head = f"[{style}]{outcome:<8}[/{style}] {decision['job_id']:<22}"
    if outcome == "PLACED":
        top = ", ".join(f"{k} {v:.0f}" for k, v in list(decision["score_breakdown"].items())[:3])
        return (
            f"{head} -> {decision['region']} {decision['gpu_model']}x{decision['gpu_count']} "
            f"{_nodes(decision)}  score {decision['score']:.0f} ({top})"
        )
    reasons = list(decision.get("reasons") or ())
    first = _short(reasons[0]) if reasons else ""
    more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
    where = f" in {decision['region']}" if decision.get("region") else ""
    return escape_tail(head, f"{where}  {first}{more}")


def _short(reason: str) -> str:
    """One reason, at most `REASON_CHARS` (the event keeps them all, whole)."""
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + "…"


def preemption_line(d: Mapping[str, Any]) -> str:
    """Rich markup for one PreemptionDecision: who goes, for whom, why, and how."""
    gpus = (
        sum(
            len(a["gpu_indices"]) * a.get("gpu_milli", 1000)
            for a in d.get("victim_assignments") or ()
        )
        / 1000
    )
    how = (
        f"checkpoint first, grace {d.get('grace_period_s', 0):g}s"
        if d.get("checkpoint_first")
        else (f"stop now, grace {d.get('grace_period_s', 0):g}s")
    )
    head = f"[magenta]{d.get('cause', 'PRIORITY'):<8}[/magenta] {d['job_id']:<22}"
    tail = (
        f" ({d.get('victim_tenant', '')}, priority {d.get('victim_priority', 0)}, {gpus:g} GPUs, "
        f"epoch {d.get('victim_epoch', 0)}) for {d['for_job_id']} ({d.get('for_tenant', '')}, "
        f"priority {d.get('for_priority', 0)}) in {d['region']}: {how}; "
        f"{d.get('expected_lost_gpu_s', 0):.0f} GPU-s unsaved  {d.get('reason', '')}"
    )
    return escape_tail(head, tail)


def advisory_line(d: Mapping[str, Any]) -> str:
    """Rich markup for one NodeAdvisory."""
    head = f"[red]{d['action']:<8}[/red] {d['node_id']:<22}"
    jobs = ", ".join(d.get("job_ids") or ()) or "no jobs"
    return escape_tail(
        head, f" in {d['region']} {d.get('reason', '')}: {d.get('detail', '')} [{jobs}]"
    )


def escape_tail(head: str, tail: str) -> str:
    """Markup head + literal tail: reasons may contain brackets rich would eat as tags."""
    return head + escape(tail)


LINES = {
    "PlacementDecision": decision_line,
    "PreemptionDecision": preemption_line,
    "NodeAdvisory": advisory_line,
}
