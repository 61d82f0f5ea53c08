"""`gpuflow queue` (like `squeue` / `kueuectl list workloads`) and `gpuflow policy FILE`.

The queue lives in the worker's memory and tables, so `gpuflow queue` asks the running worker
(`/queue/` on its web port: the stack file `gpuflow up` writes, or `--url`): per region and
tenant, usage against nominal and borrowed quota, then the waiting jobs in the order the next
retry pass considers them, each with the reason it waits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuflow.commands.common import STACK_FILE, fail
from infra.config import load_config
from infra.errors import ConfigError
from infra.policy import load_policy

__all__ = ["policy", "queue", "render_queue"]

_REASON_STYLE = {
    "QUOTA": "yellow",
    "CAPACITY": "white",
    "GANG_RESERVATION": "cyan",
    "BACKFILL": "blue",
    "PREEMPTING": "magenta",
    "ALLOWANCE": "yellow",
    "QUOTA_RESERVATION": "blue",
}


def _worker_url(data_dir: Path) -> str:
    stack = data_dir / STACK_FILE
    if stack.is_file():
        try:
            return str(json.loads(stack.read_text())["web"])
        except (ValueError, KeyError):
            pass
    try:
        worker = load_config(data_dir=str(data_dir)).worker
    except ConfigError as exc:
        raise fail(str(exc)) from None
    return f"http://{worker.web_host}:{worker.web_port}"


def queue(
    region: Annotated[list[str] | None, typer.Option(help="Only this region (repeatable).")] = None,
    tenant: Annotated[list[str] | None, typer.Option(help="Only this tenant (repeatable).")] = None,
    limit: Annotated[int, typer.Option(help="Waiting jobs shown per region.")] = 30,
    url: Annotated[
        str | None, typer.Option(help="Worker web address (default: the stack's).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the worker's view as JSON.")
    ] = False,
    data_dir: Annotated[Path, typer.Option(help="Where `gpuflow up` runs.")] = Path("gpuflow-data"),
) -> None:
    """Waiting jobs per region and tenant, in order, with why each waits; quota usage."""
    base = (url or _worker_url(data_dir)).rstrip("/")
    try:
        resp = httpx.get(f"{base}/queue/", timeout=10)
        view = resp.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise fail(
            f"no worker answering at {base}/queue/ ({type(exc).__name__}): is it running?"
        ) from None
    if resp.status_code != 200:
        raise fail(f"worker at {base} answered {resp.status_code}")
    view = _filtered(view, region or (), tenant or ())
    if as_json:
        typer.echo(json.dumps(view, indent=1))
        return
    console = Console()
    for part in render_queue(view, limit=limit):
        console.print(part)


def _filtered(
    view: Mapping[str, Any], regions: Sequence[str], tenants: Sequence[str]
) -> dict[str, Any]:
    out = {k: v for k, v in view.items() if k != "regions"}
    out["regions"] = {}
    for name, region in view.get("regions", {}).items():
        if regions and name not in regions:
            continue
        if tenants:
            region = {
                **region,
                "tenants": [t for t in region["tenants"] if t["tenant"] in tenants],
                "waiting": [j for j in region["waiting"] if j["tenant"] in tenants],
            }
        out["regions"][name] = region
    return out


def render_queue(view: Mapping[str, Any], *, limit: int = 30) -> list[Any]:
    """Rich renderables: per region a header, the tenants' quota table and the waiting jobs."""
    parts: list[Any] = []
    if view.get("policy_error"):
        parts.append(
            Text(
                f"policy reload refused, the previous policy is in force: {view['policy_error']}",
                style="red",
            )
        )
    for name, region in view.get("regions", {}).items():
        parts.append(_header(name, region))
        if region["tenants"]:
            parts.append(_tenants(region["tenants"], bool(view.get("quotas"))))
        if region["waiting"]:
            parts.append(
                _waiting(
                    region["waiting"][:limit],
                    region.get("more_waiting", 0) + max(0, len(region["waiting"]) - limit),
                )
            )
    if not parts:
        parts.append(Text("no regions known to this worker yet"))
    return parts


def _header(name: str, region: Mapping[str, Any]) -> Text:
    waiting = len(region["waiting"]) + region.get("more_waiting", 0)
    line = f"{name}: {region['free_gpus']} of {region['total_gpus']} GPUs free, {waiting} waiting"
    res = region.get("reservation")
    if res:
        nodes = ", ".join(sorted(res["gpus"]))
        count = sum(len(g) for g in res["gpus"].values())
        line += (
            f"; gang reservation for {res['job_id']}: {count} GPUs on {nodes} "
            f"in ~{res['start_in_s']:.0f}s"
        )
    for q in region.get("quota_reservations") or ():
        line += (
            f"; {q['tenant']}'s {q['gpu_class']} quota reserved for {q['job_id']} "
            f"({q['gpus']:g} GPUs) in ~{q['start_in_s']:.0f}s"
        )
    return Text(line, style="bold")


def _gpus(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _tenants(tenants: Sequence[Mapping[str, Any]], quotas: bool) -> Table:
    columns = ("tenant", "cohort", "weight", "DRF share", "running", "waiting", "GPU class",
               "used", "nominal", "borrowed", "borrow limit")  # fmt: skip
    table = Table(*columns, box=None, padding=(0, 1))
    for t in tenants:
        cells = t["cells"] or [{"gpu_class": "", "used": 0.0, "nominal": None, "borrowed": 0.0,
                                 "borrowing_limit": None}]  # fmt: skip
        for i, c in enumerate(cells):
            first = i == 0
            table.add_row(
                t["tenant"] if first else "",
                (t["cohort"] or "-") if first else "",
                f"{t['weight']:g}" if first else "",
                f"{t['dominant_share']:.1%}" if first else "",
                str(t["running"]) if first else "",
                str(t["waiting"]) if first else "",
                c["gpu_class"],
                _gpus(c["used"]),
                _gpus(c["nominal"]) if quotas else "no quota",
                _gpus(c["borrowed"]) if quotas else "",
                ("unlimited" if c["borrowing_limit"] is None else _gpus(c["borrowing_limit"]))
                if quotas
                else "",
            )
    return table


def _waiting(jobs: Sequence[Mapping[str, Any]], more: int) -> Table:
    columns = ("#", "job", "tenant", "class", "priority", "GPUs", "epoch", "waited", "reason")
    table = Table(*columns, box=None, padding=(0, 1), caption=f"and {more} more" if more else None)
    for j in jobs:
        style = _REASON_STYLE.get(j["reason_code"], "white")
        table.add_row(
            str(j["position"]), j["job_id"], j["tenant"], j["priority_class"], str(j["priority"]),
            f"{j['gpus']:g}", str(j["epoch"]), f"{j['waited_s']:.0f}s",
            Text(f"{j['reason_code']}: {j['reason']}", style=style),
        )  # fmt: skip
    return table


def _limit(value: float | None) -> str:
    return "unlimited" if value is None else f"{value:g}"


def policy(
    path: Annotated[Path, typer.Argument(help="The tenancy policy file (YAML) to check.")],
) -> None:
    """Check a tenancy policy file: its tenants, quotas and classes, or the first bad field."""
    try:
        parsed = load_policy(path)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    console = Console()
    classes = ", ".join(
        f"{c.name} {c.value}{'' if c.preemptible else ' (not preemptible)'}" for c in parsed.classes
    )
    console.print(f"priority classes: {classes}", highlight=False)
    p = parsed.preemption
    state = "on" if p.enabled else "off"
    backfill = "on" if parsed.backfill.enabled else "off"
    console.print(
        f"preemption: {state}, reclaim {p.reclaim}, grace {p.grace_period_s:g}s, checkpoint "
        f"first past {p.checkpoint_stale_s:g}s unsaved; backfill: {backfill}",
        highlight=False,
    )
    if not parsed.tenants:
        console.print("no tenants: no quotas (every tenant ordered by fair share only)")
        return
    table = Table("tenant", "cohort", "weight", "region", "GPU class", "nominal", "borrow limit",
                  "non-preemptible GPUs", box=None, padding=(0, 1))  # fmt: skip
    for t in parsed.tenants.values():
        for q in t.quotas or ():
            table.add_row(
                t.name, t.cohort or "-", f"{t.weight:g}", q.region, q.gpu_class, f"{q.nominal:g}",
                _limit(q.borrowing_limit) if t.cohort else "no cohort",
                "nominal" if t.non_preemptible_gpus is None else f"{t.non_preemptible_gpus:g}",
            )  # fmt: skip
    console.print(table)
