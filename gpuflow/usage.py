"""What a run did with the fleet: placements and GPU utilisation per region and GPU model.

`gpuflow up` feeds every decision it sees to a `UsageTally` and prints `usage_table` at the
end. Utilisation is GPU-time held by placed jobs over GPU-time available since the start: a job
holds its GPUs from its decision until its expected run time (scaled as the executor twin runs
it) has passed, or until now.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

__all__ = ["UsageTally", "usage_table"]

Key = tuple[str, str]  # region, GPU model


@dataclass
class UsageTally:
    """Placements and held GPU-time by (region, GPU model), deduplicated by job id."""

    time_scale: float = 1.0
    default_duration_s: float = 30.0
    started: float = field(default_factory=time.monotonic)
    placed: Counter[Key] = field(default_factory=Counter)
    _held: list[tuple[Key, float, float, float]] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def on_decision(self, decision: Mapping[str, Any], now: float | None = None) -> None:
        if decision.get("outcome") != "PLACED" or decision["job_id"] in self._seen:
            return
        self._seen.add(decision["job_id"])
        now = time.monotonic() if now is None else now
        key = (str(decision["region"]), str(decision["gpu_model"]))
        gpus = sum(len(a["gpu_indices"]) * a["gpu_milli"] / 1000 for a in decision["assignments"])
        run_s = float(decision.get("expected_duration_s") or self.default_duration_s)
        self.placed[key] += 1
        self._held.append((key, gpus, now, now + run_s * self.time_scale))

    def busy_gpu_s(self, now: float) -> dict[Key, float]:
        """GPU-seconds held since the start, per key."""
        out: dict[Key, float] = defaultdict(float)
        for key, gpus, start, end in self._held:
            out[key] += gpus * max(0.0, min(end, now) - start)
        return out

    def busy_now(self, now: float) -> dict[Key, float]:
        out: dict[Key, float] = defaultdict(float)
        for key, gpus, start, end in self._held:
            if start <= now < end:
                out[key] += gpus
        return out


def fleet_gpus(nodes: Iterable[Mapping[str, Any]]) -> Counter[Key]:
    """GPUs per (region, model) of NodeInventory records."""
    out: Counter[Key] = Counter()
    for node in nodes:
        out[(str(node["region"]), str(node["gpu_model"]))] += int(node["gpu_count"])
    return out


def usage_table(tally: UsageTally, gpus: Mapping[Key, int], now: float | None = None) -> Table:
    """Rows per region and model, a total row per region, and the verdict in the caption."""
    now = time.monotonic() if now is None else now
    elapsed = max(now - tally.started, 1e-9)
    busy, held = tally.busy_gpu_s(now), tally.busy_now(now)
    total = sum(tally.placed.values())
    table = Table("region", "GPU model", "GPUs", "placed", "share", "util", "busy now",
                  title="Placements and utilisation by region and GPU model")  # fmt: skip
    for region in sorted({r for r, _ in gpus}):
        keys = sorted(k for k in gpus if k[0] == region)
        for key in keys:
            table.add_row(region, key[1], *_cells(tally.placed[key], total, busy[key],
                                                   held[key], gpus[key], elapsed))  # fmt: skip
        placed = sum(tally.placed[k] for k in keys)
        cells = _cells(placed, total, sum(busy[k] for k in keys), sum(held[k] for k in keys),
                       sum(gpus[k] for k in keys), elapsed)  # fmt: skip
        table.add_row(f"[bold]{region}[/bold]", "[bold]all[/bold]", *cells, end_section=True)
    table.caption = verdict(tally, gpus)
    return table


def _cells(placed: int, total: int, busy_s: float, held: float, gpus: int, elapsed: float):
    share = f"{100 * placed / total:.0f} %" if total else "-"
    util = f"{100 * busy_s / (gpus * elapsed):.0f} %" if gpus else "-"
    return f"{gpus:,}", f"{placed:,}", share, util, f"{held:,.0f}"


def verdict(tally: UsageTally, gpus: Mapping[Key, int]) -> str:
    """'largest region: eu-west with 42 % of 1,432 placements; every GPU model ran a job'."""
    total = sum(tally.placed.values())
    if not total:
        return "no placements"
    by_region: Counter[str] = Counter()
    for (region, _), k in tally.placed.items():
        by_region[region] += k
    region, top = by_region.most_common(1)[0]
    idle = sorted({m for _, m in gpus} - {m for (_, m), k in tally.placed.items() if k})
    models = "every GPU model ran a job" if not idle else f"no job on {', '.join(idle)}"
    return (
        f"largest region: {region} with {100 * top / total:.0f} % of {total:,} placements; {models}"
    )
