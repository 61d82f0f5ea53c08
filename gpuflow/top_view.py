"""What `gpuflow top` draws, from the worker's JSON pages (`/state/`, `/metrics/`, `/activity/`).

Pure rendering: pages in, a rich renderable out, so a test can render one frame from a live
worker and read the text.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

__all__ = ["Pages", "render_top"]

Pages = Mapping[str, Any]  # page name ("state", "metrics", "activity") -> decoded JSON
_STYLE = {"PLACED": "green", "QUEUED": "yellow", "REJECTED": "red"}


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.1f} s" if value >= 1000 else f"{value:.0f} ms"


def _header(url: str, pages: Pages) -> Text:
    state, metrics, activity = pages["state"], pages["metrics"], pages["activity"]
    lag = metrics.get("telemetry_lag_ms") or {}
    dead = activity.get("dead_letters") or {}
    rates = activity.get("decisions_per_s") or {}
    rate_text = "  ".join(f"{k.lower()} {v:g}/s" for k, v in rates.items()) or "none"
    line = (
        f"gpuflow top  {url}  up {metrics.get('uptime_s', 0):.0f} s  "
        f"{'ready' if state.get('ready') else 'NOT READY'}\n"
        f"jobs held {state.get('held_jobs', 0):,}  queued {state.get('queued_jobs', 0):,}  "
        f"decided {state.get('final_decisions', 0):,}   decisions/s: {rate_text}\n"
        f"telemetry lag p50 {_ms(lag.get('p50'))}  p99 {_ms(lag.get('p99'))}   "
        f"stale nodes {len(state.get('stale_nodes') or ())}   dead letters {dead.get('total', 0)}"
    )
    text = Text(line)
    if dead.get("last"):
        text.append(f"\nlast dead letter: {dead['last'][:120]}", style="red")
    return text


def _fleet_table(pages: Pages) -> Table:
    table = Table("region", "GPU model", "GPUs", "used", "free", "util", "queue",
                  title="GPUs by region and model", title_justify="left")  # fmt: skip
    regions = pages["activity"].get("regions") or {}
    for region, info in sorted(regions.items()):
        models = info.get("models") or {}
        for i, (model, m) in enumerate(sorted(models.items())):
            total, free = int(m["total"]), int(m["free"])
            util = "-" if m.get("util_pct") is None else f"{m['util_pct']:.0f} %"
            queue = str(info.get("queue_depth", 0)) if i == 0 else ""
            table.add_row(region if i == 0 else "", model, f"{total:,}", f"{total - free:,}",
                          f"{free:,}", util, queue, end_section=i == len(models) - 1)  # fmt: skip
    return table


def _recent_table(pages: Pages, rows: int) -> Table:
    table = Table("time", "outcome", "job", "where / why", title="Last decisions",
                  title_justify="left")  # fmt: skip
    for d in list(pages["activity"].get("recent") or ())[-rows:][::-1]:
        when = time.strftime("%H:%M:%S", time.localtime((d.get("ts") or 0) / 1000))
        outcome = str(d.get("outcome"))
        style = _STYLE.get(outcome, "white")
        if outcome == "PLACED":
            where = f"{d.get('region')} {d.get('gpu_model')}x{d.get('gpu_count')}"
            where += f"  score {d['score']:.0f}" if d.get("score") is not None else ""
        else:
            where = f"{d.get('region') or ''} {d.get('reason') or ''}".strip()
        table.add_row(when, f"[{style}]{outcome}[/{style}]", escape(str(d.get("job_id"))),
                      escape(where[:110]))  # fmt: skip
    return table


def render_top(url: str, pages: Pages | None, error: str = "", recent: int = 8) -> RenderableType:
    """One frame: header, GPUs by region and model, last decisions (or why there is none)."""
    if pages is None:
        return Text(f"gpuflow top  {url}\nworker not reachable: {error} (retrying)", style="red")
    return Group(_header(url, pages), _fleet_table(pages), _recent_table(pages, recent))
