"""Migration to a cheaper or greener place: a running job moves when other free GPUs (in its
region, or another region this state holds) would finish it for less money and/or carbon.

What a job still costs, staying or moving (seconds from `move_cost`: the move's time includes
the restore and redoing the work lost since the last checkpoint, at the target's speed):

    dollars = price per GPU-hour x GPUs x hours
    grams   = grid g/kWh of the region x board kW x GPUs x hours

The saving is weighted like the forecast deferral weighs carbon against price:

    saving = w x (grams_stay - grams_move) / grams_stay
           + (1 - w) x (dollars_stay - dollars_move) / dollars_stay

with w = `carbon_weight` (a signal that is 0 where the job runs drops out). A move is kept when
the saving beats `footprint_margin` (a share of what staying costs: the restore and lost work
are already charged in `*_move`) and the job's expected finish is no later than staying
(times `1 + max_slowdown`). Candidates are the best placement on each (region, GPU model) the
placer offers (`Placer.options`: every filter applies, allowed_regions among them); another
region only with `cross_region` and, for a job with a `data_region`, only that region.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scorer.placer import Placer
from scorer.replan.config import ReplanConfig
from scorer.replan.migration import MoveProposal, Statement, hold_key, movable
from scorer.replan.progress import MoveCost, RunningJob, move_cost
from scorer.state import ClusterState
from scorer.throughput import ThroughputModel
from scorer.types import Assignment, PlacementResult

__all__ = ["Footprint", "cheaper_or_greener", "footprint_saving"]

_CHEAP, _GREEN = "CHEAPER", "GREENER"


@dataclass(frozen=True)
class Footprint:
    """What a job's GPUs cost per hour where they are: dollars and grams of CO2."""

    usd_per_h: float
    g_per_h: float


def footprint_saving(
    stay: Footprint, move: Footprint, cost: MoveCost, carbon_weight: float
) -> tuple[float, float, float]:
    """(weighted saving, dollar saving, carbon saving) as shares of what staying costs.

    e.g. $2.48/h and 400 g/kWh x 0.3 kW = 120 g/h staying 10 h; the same GPUs at $2.48/h and
    50 g/kWh (15 g/h) for 10 h + a 60 s restore: dollars 24.8 vs 24.84 -> -0.17 %, grams 1200
    vs 150.25 -> 87.5 %; w 0.5 -> 43.7 %.
    """
    shares, weights = [0.0, 0.0], [1.0 - carbon_weight, carbon_weight]
    pairs = ((stay.usd_per_h, move.usd_per_h), (stay.g_per_h, move.g_per_h))
    for i, (here, there) in enumerate(pairs):
        before = here * cost.stay_s
        if before > 0:
            shares[i] = (before - there * cost.move_s) / before
        else:
            weights[i] = 0.0  # nothing to save on a signal that costs nothing now
    total = sum(weights)
    weighted = sum(w * s for w, s in zip(weights, shares, strict=True)) / total if total else 0.0
    return weighted, shares[0], shares[1]


def _rate(
    state: ClusterState,
    placer: Placer,
    model: str,
    assignments: Sequence[Assignment],
) -> Footprint:
    """Dollars and grams per hour of `assignments` (GPUs of `model`; shares count in part)."""
    spec = placer.throughput.catalog.get(model)
    kw = (spec.power_w if spec is not None else 300.0) / 1000
    usd = grams = 0.0
    for a in assignments:
        slot = state.slot_of(a.node_id)
        gpus = len(a.gpu_indices) * a.gpu_milli / 1000
        usd += float(state.price[slot]) * gpus
        grams += float(state.carbon[state.region[slot]]) * kw * gpus
    return Footprint(usd, grams)


def cheaper_or_greener(
    state: ClusterState,
    placer: Placer,
    runs: Sequence[RunningJob],
    now_ms: int,
    config: ReplanConfig,
    statement: Statement,
    *,
    budget: int,
    regions: Sequence[str] | None = None,
) -> list[MoveProposal]:
    """Up to `budget` moves of `runs` (movable ones) that cut their weighted footprint by more
    than the margin without finishing later; targets held in `statement`. `regions` limits
    where to look (None: every region of the state).

    The placer is asked only for the `footprint_candidates` jobs whose bound (`_bound`: the
    best free node's price, grid and speed, restore and lost work charged) promises most, so
    a pass costs a few placer cycles however many jobs run."""
    market = _Market.of(state, placer)
    bounds: list[tuple[float, RunningJob]] = []
    for run in runs:
        if movable(run, now_ms, config) is not None:  # never a job that cannot checkpoint
            continue
        stay = _rate(state, placer, run.gpu_model, run.assignments)
        bound = _bound(market, run, stay, now_ms, config)
        if bound > config.footprint_margin:
            bounds.append((bound, run))
    bounds.sort(key=lambda br: (-br[0], br[1].job_id))
    found: list[tuple[float, MoveProposal]] = []
    for _, run in bounds[: config.footprint_candidates]:
        best = _best(state, placer, run, now_ms, config, regions)
        if best is not None:
            found.append(best)
    found.sort(key=lambda sp: (-sp[0], sp[1].run.job_id))
    out: list[MoveProposal] = []
    for _, proposal in found:
        if len(out) >= budget:
            break
        if statement.hold(hold_key(proposal.run.job_id), proposal.target.assignments):
            out.append(proposal)
    return out


def _places(
    run: RunningJob, config: ReplanConfig, regions: Sequence[str] | None
) -> list[str | None]:
    """Regions a move of `run` may go to (None: every region of the state)."""
    if not config.cross_region:
        return [run.region]
    if run.job.data_region:  # data locality: its own region or the data's
        near = sorted({run.region, run.job.data_region})
        return [r for r in near if regions is None or r in regions]
    return [None] if regions is None else list(regions)


@dataclass(frozen=True)
class _Market:
    """The nodes a move could go to (healthy, a GPU or share free) with what their GPUs cost
    per hour: read once per pass."""

    slots: np.ndarray
    free: np.ndarray  # the largest free share on the node (milli)
    model: np.ndarray  # model index per slot
    perf: np.ndarray  # the node's best health-adjusted pace
    usd: np.ndarray  # $ per GPU-hour
    grid: np.ndarray  # g CO2 per kWh of the node's region
    kw: np.ndarray  # board kW per model index
    models: tuple[str, ...]
    throughput: ThroughputModel

    @classmethod
    def of(cls, state: ClusterState, placer: Placer) -> _Market:
        slots = state.slots()
        free = state.free_milli[slots].max(axis=1, initial=0)
        usable = state.node_ok[slots] & (free > 0)
        slots, free = slots[usable], free[usable]
        catalog = placer.throughput.catalog
        models = tuple(state.models)
        kw = [(s.power_w if (s := catalog.get(m)) else 300.0) / 1000 for m in models]
        return cls(
            slots,
            free,
            state.model[slots],
            state.perf[slots].max(axis=1, initial=0.0),
            state.price[slots],
            state.carbon[state.region[slots]],
            np.asarray(kw or [0.3]),
            models,
            placer.throughput,
        )


def _bound(
    market: _Market, run: RunningJob, stay: Footprint, now_ms: int, config: ReplanConfig
) -> float:
    """The most a move of `run` could save (weighted share, `footprint_saving`'s formula),
    judged per node with a free GPU (or share): at the node's best GPU and pace, restore and
    the work lost since the last checkpoint charged. An upper bound (a real placement runs no
    faster and costs no less per GPU-hour), so nothing that pays is dropped; -1 when no node
    could take the job without finishing later."""
    if run.duration_s is None or run.speed <= 0 or not market.slots.size:
        return -1.0
    interval = config.interval_s(run.job)
    stay_s, left = run.finish_at(now_ms), run.remaining(now_ms)
    if stay_s is None or left is None or stay_s <= 0:
        return -1.0
    lost = run.lost_on_stop(now_ms, interval)
    fits = market.free >= min(run.job.gpu_milli, 1000)
    tp = market.throughput
    speed_of = np.array([tp.relative_speed(run.job, m) if m else 0.0 for m in market.models])
    speed = speed_of[market.model] * market.perf
    with np.errstate(divide="ignore", invalid="ignore"):
        move_s = config.restore_s + (left + lost) / speed
    fits &= move_s <= stay_s * (1.0 + config.max_slowdown)
    if not fits.any():
        return -1.0
    gpus = sum(len(a.gpu_indices) * a.gpu_milli / 1000 for a in run.assignments) or 1.0
    share, weights = np.zeros(int(fits.sum())), 0.0
    pairs = (
        (stay.usd_per_h, market.usd[fits], 1.0 - config.carbon_weight),
        (stay.g_per_h, market.grid[fits] * market.kw[market.model[fits]], config.carbon_weight),
    )
    for here, per_gpu, w in pairs:
        if here > 0 and w > 0:
            share += w * (1.0 - per_gpu * gpus * move_s[fits] / (here * stay_s))
            weights += w
    return float(share.max() / weights) if weights > 0 else -1.0


def _best(
    state: ClusterState,
    placer: Placer,
    run: RunningJob,
    now_ms: int,
    config: ReplanConfig,
    regions: Sequence[str] | None,
) -> tuple[float, MoveProposal] | None:
    """The option that saves most (weighted), if it beats the margin and is not slower."""
    if run.duration_s is None or run.speed <= 0:
        return None
    stay = _rate(state, placer, run.gpu_model, run.assignments)
    interval = config.interval_s(run.job)
    options: list[PlacementResult] = []
    for region in _places(run, config, regions):
        options += placer.options(run.job, region)
    best: tuple[float, MoveProposal] | None = None
    for target in options:
        if not target.placed or not target.expected_throughput or not target.gpu_model:
            continue
        cost = move_cost(
            run, now_ms, target.expected_throughput, restore_s=config.restore_s,
            interval_s=interval,
        )  # fmt: skip
        if cost is None or cost.move_s > cost.stay_s * (1.0 + config.max_slowdown):
            continue
        there = _rate(state, placer, target.gpu_model, target.assignments)
        saving, usd, green = footprint_saving(stay, there, cost, config.carbon_weight)
        if saving <= config.footprint_margin or (best is not None and saving <= best[0]):
            continue
        best = saving, _proposal(run, target, cost, stay, there, (saving, usd, green))
    return best


def _proposal(
    run: RunningJob,
    target: PlacementResult,
    cost: MoveCost,
    stay: Footprint,
    there: Footprint,
    savings: tuple[float, float, float],
) -> MoveProposal:
    saving, usd, green = savings
    stay_h, move_h = cost.stay_s / 3600, cost.move_s / 3600
    explain = (
        f"{'greener' if green >= usd else 'cheaper'}: {run.gpu_model} in {run.region} -> "
        f"{target.gpu_model} in {target.region}, weighted saving {100 * saving:.1f} % "
        f"(dollars {100 * usd:+.1f} %, carbon {100 * green:+.1f} %)",
        f"${stay.usd_per_h * stay_h:.2f} and {stay.g_per_h * stay_h / 1000:.2f} kg CO2 staying "
        f"-> ${there.usd_per_h * move_h:.2f} and {there.g_per_h * move_h / 1000:.2f} kg moving "
        f"(restore {cost.restore_s:.0f} s, {cost.lost_s:.0f} s of work since its last "
        "checkpoint redone)",
        f"finish in {move_h:.2f} h instead of {stay_h:.2f} h",
    )
    reason = _GREEN if green >= usd else _CHEAP
    # expected_gain: seconds saved (MoveCost.saved_s, >= 0 unless max_slowdown allows less)
    return MoveProposal(run, target, cost, reason, explain)
