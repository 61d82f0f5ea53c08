"""`gpuflow submit --dry-run`: ask the worker where a job would go, and show it to a person.

Nothing is produced to Kafka: the job goes to the worker's `POST /plan/` page, which runs the
router and placer on live state and reserves nothing (like `sbatch --test-only`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
from rich.markup import escape

from scorer.units import gib, hours, tflops, usd

__all__ = ["PlanError", "plan_lines", "request_plan"]


class PlanError(RuntimeError):
    """The worker could not be asked, or refused the request (the message is one line)."""


def request_plan(base_url: str, record: Mapping[str, Any], timeout: float = 30.0) -> dict:
    """POST the JobSubmitted record to `<worker>/plan/` and return the answer."""
    url = f"{base_url}/plan/"
    try:
        resp = httpx.post(url, json={"job": dict(record)}, timeout=timeout)
    except httpx.HTTPError as exc:
        raise PlanError(
            f"no worker answering at {url} ({type(exc).__name__}); is it running?"
        ) from None
    if resp.status_code == 404:
        raise PlanError(f"the worker at {base_url} has no /plan/ page (an older gpuflow?)")
    try:
        answer = resp.json()
    except ValueError:
        raise PlanError(f"worker at {url} answered {resp.status_code}, not JSON") from None
    if resp.status_code != 200:
        raise PlanError(str(answer.get("error", answer)))
    return dict(answer)


def _gpus(option: Mapping[str, Any]) -> str:
    milli = option.get("gpu_milli", 1000)
    return f"{milli}m of 1" if milli < 1000 else f"x{option['gpus']}"


def option_line(option: Mapping[str, Any], precision: str) -> str:
    """'us-east H100 x8  score 84  989 TFLOPS BF16  ~2.1 h  $31.20/h  ≈ $65'."""
    parts = [
        f"{option['region']} {option['gpu_model']} {_gpus(option)}",
        f"score {option['score']:.0f}",
    ]
    if option.get("peak_tflops"):
        parts.append(f"{tflops(option['peak_tflops'])} {precision}")
    if option.get("expected_duration_s"):
        parts.append(f"~{hours(option['expected_duration_s'])}")
    if option.get("price_per_hour") is not None:
        parts.append(f"{usd(option['price_per_hour'])}/h")
    if option.get("expected_cost_usd") is not None:
        parts.append(f"≈ {usd(option['expected_cost_usd'])}")
    return "  ".join(parts)


def _breakdown(option: Mapping[str, Any]) -> str:
    items = list((option.get("score_breakdown") or {}).items())
    return ", ".join(f"{name} {value:.0f}" for name, value in items)


def _nodes(option: Mapping[str, Any]) -> str:
    shown = [
        f"{a['node_id']}[{','.join(str(g) for g in a['gpu_indices'])}]"
        for a in option.get("assignments", [])[:2]
    ]
    more = len(option.get("assignments", [])) - len(shown)
    return " ".join(shown) + (f" +{more} nodes" if more > 0 else "")


def plan_lines(plan: Mapping[str, Any], precision: str) -> list[str]:
    """Rich markup lines: the memory need, where the job would go, alternatives, refusals."""
    lines = [f"[bold]DRY RUN[/bold] {escape(plan['job_id'])}  (nothing was submitted)"]
    need = plan.get("memory_per_gpu_mib") or 0
    if need:
        parts = ", ".join(f"{k} {gib(v)}" for k, v in plan.get("memory_parts_mib", {}).items())
        lines.append(f"memory    needs {gib(need)} per GPU" + (f" ({parts})" if parts else ""))
    choice = plan.get("placement")
    if choice:
        lines.append(f"[green]would go[/green]  {escape(option_line(choice, precision))}")
        lines.append(f"          on {escape(_nodes(choice))}; {escape(_breakdown(choice))}")
    else:
        outcome = plan.get("outcome", "QUEUED")
        why = (
            "no capacity free now; it would wait" if outcome == "QUEUED" else "nothing can host it"
        )
        lines.append(f"[yellow]would be {outcome}[/yellow]: {why}")
    alternatives = plan.get("alternatives") or []
    if alternatives:
        lines.append("alternatives")
        for i, option in enumerate(alternatives, 2):
            lines.append(f"  {i}. {escape(option_line(option, precision))}")
            lines.append(f"     {escape(_breakdown(option))}")
    refused = plan.get("refused") or {}
    if refused:
        lines.append("refused")
        width = max(len(m) for m in refused)
        for model, reason in refused.items():
            lines.append(f"  {escape(model):<{width}}  {escape(reason)}")
    return lines
