"""Scoring a backtest's runs: each model's and the selection's errors, and the live choice.

At each horizon the candidates are the models and, with `SelectionConfig.best` >= 2, their
combinations; at each origin the selection takes the candidate with the best record on earlier
origins (`forecast.selection`), and every row is scored over the origins the selection chose
at, so the rows compare like with like.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from forecast.metrics import mase_scales, smape_terms
from forecast.selection import COMBINATIONS, SelectionConfig, choose, combine, window_scores
from forecast.series import Series

__all__ = ["SELECTED", "BacktestResult", "Choice", "ModelRun", "ScoreRow", "ScoringConfig", "score"]

SELECTED = "selected"


class ScoringConfig(Protocol):
    """What scoring reads of a backtest's configuration (`forecast.backtesting.BacktestConfig`)."""

    @property
    def horizons(self) -> tuple[int, ...]: ...
    @property
    def stride(self) -> int: ...
    @property
    def selection(self) -> SelectionConfig: ...


@dataclass(frozen=True, eq=False)
class ModelRun:
    """One model's forecasts: (origins x steps) arrays, NaN where it could not forecast."""

    point: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    fits: int
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScoreRow:
    model: str
    horizon_steps: int
    smape: float
    mase: float
    coverage: float
    origins: int

    def as_json(self) -> dict[str, object]:
        """The row `gpuflow forecast --json` prints."""
        return {
            "model": self.model,
            "horizon_steps": self.horizon_steps,
            "smape": _rounded(self.smape),
            "mase": _rounded(self.mase),
            "origins": self.origins,
        }


@dataclass(frozen=True)
class Choice:
    """The model chosen for live use at the end of the series, and the record it won on."""

    horizon_steps: int
    model: str | None
    window_mase: Mapping[str, float]
    window_origins: int


@dataclass(frozen=True, eq=False)
class BacktestResult:
    rows: tuple[ScoreRow, ...]
    choices: tuple[Choice, ...]  # one per horizon, for live use
    path_choice: Choice  # best over every step 1..max(horizons): what a forecast path uses
    origins: np.ndarray
    picks: Mapping[int, np.ndarray]  # horizon -> candidate index chosen at each origin (-1 none)
    models: tuple[str, ...]
    season: int
    runs: Mapping[str, ModelRun]  # each model's forecasts from every origin
    notes: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()  # what picks index: the models, then any combinations
    selected: Mapping[int, np.ndarray] = field(default_factory=dict)  # h -> selected points

    def row(self, model: str, horizon: int) -> ScoreRow | None:
        return next((r for r in self.rows if r.model == model and r.horizon_steps == horizon), None)


def _rounded(value: float) -> float | None:
    return None if not np.isfinite(value) else round(float(value), 4)


def score(
    series: Series,
    runs: Mapping[str, ModelRun],
    origins: np.ndarray,
    config: ScoringConfig,
    season: int,
    notes: tuple[str, ...],
) -> BacktestResult:
    """Each model's rows and the selection's at every horizon, and the choices for live use."""
    names = tuple(runs)
    y, n = series.values, len(series)
    sel = config.selection
    window, min_count, half_life = sel.resolved(season, config.stride)
    scales = mase_scales(y, origins, season)
    all_steps = range(1, max(config.horizons) + 1)
    scaled = {h: _scaled_errors(y, runs, names, origins, h, scales) for h in all_steps}
    rows: list[ScoreRow] = []
    picks: dict[int, np.ndarray] = {}
    selected: dict[int, np.ndarray] = {}
    cands: tuple[str, ...] = names
    choices = []
    end = np.array([n])
    rule = _Rule(window, min_count, half_life, sel.margin, sel.confidence, season // config.stride)
    for h in config.horizons:
        cands, stack, err = _candidates(y, runs, names, origins, h, scaled[h], scales, sel, rule)
        default = cands.index(sel.default) if sel.default in cands else -1
        pick = rule.choose(err, origins, h, origins, default)
        picks[h] = pick
        at = np.flatnonzero(pick >= 0)
        selected[h] = np.full(len(origins), np.nan)
        selected[h][at] = stack[0, pick[at], at]
        rows.extend(_rows(y, cands, origins, h, err, stack, pick))
        choices.append(_choice(cands, err, origins, h, end, rule, default))
    with warnings.catch_warnings():  # origins whose every target is still ahead: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        path = np.nanmean(np.stack([scaled[h] for h in all_steps]), axis=0)
    default = names.index(sel.default) if sel.default in names else -1
    path_choice = _choice(names, path, origins, max(all_steps), end, rule, default)
    return BacktestResult(
        tuple(rows),
        tuple(choices),
        path_choice,
        origins,
        picks,
        names,
        season,
        runs,
        notes,
        cands,
        selected,
    )


@dataclass(frozen=True)
class _Rule:
    """The selection rule resolved for one backtest (`forecast.selection.choose`)."""

    window: int
    min_count: int
    half_life: float
    margin: float
    confidence: float
    block: int  # origins in a day

    def choose(
        self, scaled: np.ndarray, origins: np.ndarray, h: int, at: np.ndarray, default: int
    ) -> np.ndarray:
        return choose(
            scaled,
            origins,
            h,
            at,
            window=self.window,
            min_count=self.min_count,
            half_life=self.half_life,
            default=default,
            margin=self.margin,
            confidence=self.confidence,
            block=max(1, self.block),
        )

    def scores(
        self, scaled: np.ndarray, origins: np.ndarray, h: int, at: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        return window_scores(scaled, origins, h, at, self.window, self.half_life)


def _candidates(
    y: np.ndarray,
    runs: Mapping[str, ModelRun],
    names: tuple[str, ...],
    origins: np.ndarray,
    h: int,
    scaled: np.ndarray,
    scales: np.ndarray,
    sel: SelectionConfig,
    rule: _Rule,
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """The models and their combinations at step h: names, (3, candidates, origins) point,
    lower, upper, and (candidates, origins) scaled errors."""
    stack = np.stack(
        [
            [runs[m].point[:, h - 1], runs[m].lower[:, h - 1], runs[m].upper[:, h - 1]]
            for m in names
        ],
        axis=1,
    )
    if sel.best < 2 or len(names) < 3:
        return names, stack, scaled
    mean, count = rule.scores(scaled, origins, h, origins)
    combos = combine(stack, mean, count, min_count=rule.min_count, best=sel.best)
    stack = np.concatenate([stack, np.stack(combos, axis=1)], axis=1)
    target = origins + h - 1
    actual = np.where(target < len(y), y[np.minimum(target, len(y) - 1)], np.nan)
    extra = np.stack([np.abs(actual - c[0]) / scales for c in combos])
    return (*names, *COMBINATIONS), stack, np.concatenate([scaled, extra])


def _scaled_errors(
    y: np.ndarray,
    runs: Mapping[str, ModelRun],
    names: Sequence[str],
    origins: np.ndarray,
    h: int,
    scales: np.ndarray,
) -> np.ndarray:
    target = origins + h - 1
    ok = target < len(y)
    actual = np.where(ok, y[np.minimum(target, len(y) - 1)], np.nan)
    return np.stack([np.abs(actual - runs[m].point[:, h - 1]) / scales for m in names])


def _rows(
    y: np.ndarray,
    names: Sequence[str],
    origins: np.ndarray,
    h: int,
    scaled: np.ndarray,
    stack: np.ndarray,
    pick: np.ndarray,
) -> list[ScoreRow]:
    """A row per candidate and one for the selection, over the origins the selection chose at."""
    target = origins + h - 1
    scored = (pick >= 0) & (target < len(y))
    actual = y[target[scored]]
    at = np.flatnonzero(scored)
    out = []
    for i, m in enumerate(names):
        point, lower, upper = stack[0, i, scored], stack[1, i, scored], stack[2, i, scored]
        out.append(_row(m, h, actual, point, lower, upper, scaled[i, scored]))
    chosen = pick[scored]
    point, lower, upper = stack[0, chosen, at], stack[1, chosen, at], stack[2, chosen, at]
    out.append(_row(SELECTED, h, actual, point, lower, upper, scaled[chosen, at]))
    return out


def _row(
    model: str,
    h: int,
    actual: np.ndarray,
    point: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    scaled: np.ndarray,
) -> ScoreRow:
    ok = np.isfinite(point)
    if not ok.any():
        return ScoreRow(model, h, float("nan"), float("nan"), float("nan"), 0)
    a, p = actual[ok], point[ok]
    inside = (a >= lower[ok]) & (a <= upper[ok])
    return ScoreRow(
        model,
        h,
        float(np.mean(smape_terms(a, p))),
        float(np.mean(scaled[ok])),
        float(np.mean(inside)),
        int(ok.sum()),
    )


def _choice(
    names: Sequence[str],
    scaled: np.ndarray,
    origins: np.ndarray,
    h: int,
    at: np.ndarray,
    rule: _Rule,
    default: int,
) -> Choice:
    best = rule.choose(scaled, origins, h, at, default)[0]
    mean, count = rule.scores(scaled, origins, h, at)
    scores = {m: float(mean[i, 0]) for i, m in enumerate(names) if np.isfinite(mean[i, 0])}
    return Choice(h, names[best] if best >= 0 else None, scores, int(count.max(initial=0)))
