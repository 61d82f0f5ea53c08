"""`GET /activity/`: what a live view needs beyond `/state/` and `/metrics/` (`gpuflow top`).

Per region and GPU model: GPUs total, free, held and their mean utilisation from telemetry;
per region the queue depth; decisions per second by outcome over the last window, totals, the
last decisions; dead letters. Kept incrementally: a telemetry event updates a running sum, a
decision appends to a bounded deque, so the page costs the same however long the worker runs.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scorer import ClusterState
from scorer.errors import UnknownNodeError

__all__ = ["ACTIVITY_PATH", "Activity", "register_activity_page"]

ACTIVITY_PATH = "/activity/"
RATE_WINDOW_S = 10.0
RECENT = 20


@dataclass
class Activity:
    """Recent decisions, dead letters and GPU utilisation of one worker."""

    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT))
    totals: Counter[str] = field(default_factory=Counter)
    dead_letters: int = 0
    last_dead_letter: str = ""
    _times: deque[tuple[float, str]] = field(default_factory=lambda: deque(maxlen=100_000))
    _util: dict[tuple[str, int], tuple[tuple[str, str], float]] = field(default_factory=dict)
    _util_sum: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    _util_n: Counter[tuple[str, str]] = field(default_factory=Counter)

    def on_decision(self, record: Mapping[str, Any]) -> None:
        outcome = str(record.get("outcome"))
        self.totals[outcome] += 1
        self._times.append((time.monotonic(), outcome))
        reasons = record.get("reasons") or ()
        self.recent.append({
            "ts": record.get("ts"), "job_id": record.get("job_id"), "outcome": outcome,
            "region": record.get("region"), "gpu_model": record.get("gpu_model"),
            "gpu_count": record.get("gpu_count"), "score": record.get("score"),
            "reason": reasons[0] if reasons else "",
        })  # fmt: skip

    def on_dead_letter(self, error: object) -> None:
        self.dead_letters += 1
        self.last_dead_letter = str(error)[:200]

    def on_telemetry(self, record: Mapping[str, Any], state: ClusterState) -> None:
        """Remember each reported GPU's utilisation; keep per (region, model) sums."""
        gpus = record.get("gpus") or ()
        if not gpus:
            return
        node_id = record["node_id"]
        try:
            key = (str(record["region"]), state.models[int(state.model[state.slot_of(node_id)])])
        except UnknownNodeError:
            return
        for gpu in gpus:
            slot = (node_id, int(gpu["index"]))
            util = float(gpu["util_pct"])
            previous = self._util.get(slot)
            if previous is None:
                self._util_n[key] += 1
            else:
                self._util_sum[previous[0]] -= previous[1]
            self._util[slot] = (key, util)
            self._util_sum[key] += util

    def rates(self, now: float | None = None) -> dict[str, float]:
        """Decisions per second by outcome over the last `RATE_WINDOW_S`."""
        now = time.monotonic() if now is None else now
        while self._times and self._times[0][0] < now - 60:
            self._times.popleft()
        recent = Counter(o for t, o in self._times if t >= now - RATE_WINDOW_S)
        return {o: round(k / RATE_WINDOW_S, 2) for o, k in sorted(recent.items())}

    def snapshot(self, state: ClusterState, queued: Mapping[str, int]) -> dict[str, Any]:
        views = state.region_views()
        regions: dict[str, Any] = {}
        for region, view in sorted(views.items()):
            models = {}
            for model, total in sorted(view.total_gpus.items()):
                n = self._util_n[(region, model)]
                util = self._util_sum.get((region, model), 0.0)
                models[model] = {
                    "total": int(total),
                    "free": int(view.free_gpus.get(model, 0)),
                    "util_pct": round(util / n, 1) if n else None,
                }
            regions[region] = {"queue_depth": int(queued.get(region, 0)), "models": models}
        return {
            "regions": regions,
            "decisions_per_s": self.rates(),
            "decisions_total": dict(self.totals),
            "recent": list(self.recent),
            "dead_letters": {"total": self.dead_letters, "last": self.last_dead_letter},
        }


def register_activity_page(app: Any, activity: Activity, scheduler: Any) -> None:
    @app.page(ACTIVITY_PATH)
    async def activity_page(web: Any, request: Any) -> Any:
        """Utilisation by region and model, queues, decision rates, last decisions."""
        queued = Counter(r["region"] for r in scheduler.queue.values())
        return web.json(activity.snapshot(scheduler.state, queued))
