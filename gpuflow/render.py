"""How decisions look on a terminal: one line each, coloured by outcome."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.markup import escape

__all__ = ["decision_line"]

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


def escape_tail(head: str, tail: str) -> str:
    """Markup head + literal tail: reasons may contain brackets rich would eat as tags."""
    return head + escape(tail)
