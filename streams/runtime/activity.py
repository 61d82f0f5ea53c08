"""What a live view needs beyond `/state/` and `/metrics/` (`GET /activity/`, `gpuflow top`).

Per region and GPU model: GPUs total, free, held and their mean utilisation from telemetry;
per region the queue depth; decisions per second by outcome over the last window, totals, the
last decisions; dead letters. Kept incrementally: a telemetry event updates a running sum, a
decision appends to a bounded deque, so the page costs the same however long the worker runs.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from scorer import ClusterState
from scorer.errors import UnknownNodeError

if TYPE_CHECKING:
    from streams.telemetry.reports import Reports

__all__ = ["Activity"]

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
    # each GPU's last reported utilisation by the node's slot in the arrays (NaN: none yet),
    # and the node each slot's values are of (a slot is reused when a node leaves)
    _util: npt.NDArray[np.float64] = field(default_factory=lambda: np.full((0, 0), np.nan))
    _owner: list[str | None] = field(default_factory=list)

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

    def on_telemetry(self, reports: Reports, state: ClusterState) -> None:
        """Remember each reported GPU's utilisation (by the node's slot in the arrays)."""
        if not len(reports.index):
            return
        self._fit(state.gpu_ok.shape)
        slot = np.full(len(reports), -1, np.int64)
        owners = self._owner
        for i in np.flatnonzero(reports.gpu_counts()).tolist():
            node_id = reports.node_id[i]
            try:
                slot[i] = state.slot_of(node_id)
            except UnknownNodeError:  # before its inventory: nothing to attach it to
                continue
            if owners[slot[i]] != node_id:  # a slot another node had: forget its values
                owners[slot[i]] = node_id
                self._util[slot[i]] = np.nan
        rows = slot[reports.owner]
        fits = (rows >= 0) & (reports.index >= 0) & (reports.index < self._util.shape[1])
        self._util[rows[fits], reports.index[fits]] = reports.util[fits]

    def _fit(self, shape: tuple[int, ...]) -> None:
        """Room for every slot and GPU of the arrays (they grow, never shrink)."""
        rows, cols = shape
        if self._util.shape[0] >= rows and self._util.shape[1] >= cols:
            return
        grown = np.full((max(rows, self._util.shape[0]), max(cols, self._util.shape[1])), np.nan)
        grown[: self._util.shape[0], : self._util.shape[1]] = self._util
        self._util = grown
        self._owner += [None] * (grown.shape[0] - len(self._owner))

    def utilisation(self, state: ClusterState) -> dict[tuple[str, str], float]:
        """Mean of each GPU's last reported utilisation, per (region, GPU model), over the
        nodes the arrays hold now."""
        slots = state.slots()
        slots = slots[slots < len(self._owner)]
        slots = np.array(
            [s for s in slots.tolist() if self._owner[s] == state.spec(s).node_id], np.int64
        )
        if not len(slots):
            return {}
        values = self._util[slots]
        reported = ~np.isnan(values)
        models = len(state.models)
        group = state.region[slots].astype(np.int64) * models + state.model[slots]
        sums = np.bincount(group, weights=np.where(reported, values, 0.0).sum(axis=1))
        counts = np.bincount(group, weights=reported.sum(axis=1))
        return {
            (state.region_name(g // models), state.models[g % models]): float(sums[g] / counts[g])
            for g in np.flatnonzero(counts).tolist()
        }

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
        utilisation = self.utilisation(state)
        for region, view in sorted(views.items()):
            models = {}
            for model, total in sorted(view.total_gpus.items()):
                util = utilisation.get((region, model))
                models[model] = {
                    "total": int(total),
                    "free": int(view.free_gpus.get(model, 0)),
                    "util_pct": round(util, 1) if util is not None else None,
                }
            regions[region] = {"queue_depth": int(queued.get(region, 0)), "models": models}
        return {
            "regions": regions,
            "decisions_per_s": self.rates(),
            "decisions_total": dict(self.totals),
            "recent": list(self.recent),
            "dead_letters": {"total": self.dead_letters, "last": self.last_dead_letter},
        }
