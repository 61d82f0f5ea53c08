"""Placer presets: named placement policies in one framework, for baselines and trace replay.

- `gpuflow`: every filter and the heterogeneity-aware scores (the default), communication
  fit included (it judges spread and cross-region plans by their traffic over the links), the
  speed-aware queue order and re-planning (migration to a better match, defragmentation).
  It packs first (`packing_first`): the nodes where FGD's fragmentation (against the mix each
  GPU model sees) grows least, weighed with the pressure of pinned demand on each model
  (`model_pressure`), and among those the full score chooses.
- `netblind`: `gpuflow` without the communication filter and score: topology by domain only,
  blind to links, their load and a job's pattern (what gpuflow did before it modelled links).
- `first_fit` (alias `fifo`): every filter, then the first node in inventory order — blind to
  the GPU model, as a model-agnostic scheduler would be.
- `best_fit` (alias `bestfit`): every filter, then the fullest node that fits (bin packing).
- `fgd`: every filter, then the node where the cluster's expected fragmentation grows least
  (Fragmentation Gradient Descent, Weng et al. ATC '23), inventory order breaking ties.
- `gavel-like`: every filter, then the GPU model where the job runs fastest (throughput-greedy,
  heterogeneity-aware like Gavel's max-throughput policy, but placement only: no time-sharing
  rounds), bin packing breaking ties.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scorer.errors import UnknownPluginError
from scorer.network.view import NetworkView
from scorer.placer import Placer
from scorer.registry import DEFAULT_FILTERS, DEFAULT_SCORES, build_score
from scorer.state import ClusterState
from scorer.throughput import ThroughputModel

__all__ = ["PACKING", "PRESETS", "PlacerPreset", "make_placer", "preset"]


@dataclass(frozen=True)
class PlacerPreset:
    filters: tuple[str, ...] = DEFAULT_FILTERS
    scores: tuple[str, ...] = DEFAULT_SCORES
    weights: Mapping[str, float] = field(default_factory=dict)
    queue: str = "fifo"  # queue order within a priority band: fifo or speed_aware
    replan: bool = False  # decide again: migrate running jobs to a better match
    # plugins that rank first (`Weighing.packing_first`) and the slack, in score points
    packing_first: tuple[str, ...] = ()
    packing_slack: float = 0.0


_FIRST_FIT = PlacerPreset(scores=("first_fit",), weights={"first_fit": 1.0})
_BEST_FIT = PlacerPreset(
    scores=("bin_pack", "first_fit"), weights={"bin_pack": 100.0, "first_fit": 0.01}
)

_GAVEL_LIKE = PlacerPreset(
    scores=("compute", "bin_pack", "first_fit"),
    weights={"compute": 100.0, "bin_pack": 1.0, "first_fit": 0.01},
)
# gpuflow packs first: FGD's measure per GPU model and the pressure of pinned demand rank the
# nodes, and only the best of them are chosen from by speed, price, topology and the rest
PACKING = ("fgd", "model_pressure")
_GPUFLOW_SCORES = (
    *("fgd" if s == "fragmentation" else s for s in DEFAULT_SCORES),
    "model_pressure",
)
_GPUFLOW = PlacerPreset(
    scores=_GPUFLOW_SCORES, queue="speed_aware", replan=True, packing_first=PACKING
)
_NETBLIND = PlacerPreset(
    filters=tuple(f for f in DEFAULT_FILTERS if f != "communication"),
    scores=tuple(s for s in _GPUFLOW_SCORES if s != "communication"),
    queue="speed_aware",
    replan=True,
    packing_first=PACKING,
)
_FGD = PlacerPreset(scores=("fgd", "first_fit"), weights={"fgd": 100.0, "first_fit": 0.01})

PRESETS: dict[str, PlacerPreset] = {
    "gpuflow": _GPUFLOW,
    "netblind": _NETBLIND,
    "first_fit": _FIRST_FIT,
    "fifo": _FIRST_FIT,
    "best_fit": _BEST_FIT,
    "bestfit": _BEST_FIT,
    "fgd": _FGD,
    "gavel-like": _GAVEL_LIKE,
}


def preset(name: str) -> PlacerPreset:
    """The preset `name` (UnknownPluginError naming the known ones)."""
    try:
        return PRESETS[name]
    except KeyError:
        known = ", ".join(sorted(PRESETS))
        raise UnknownPluginError(f"no placer preset {name!r} (known: {known})") from None


def make_placer(
    name: str,
    state: ClusterState,
    *,
    throughput: ThroughputModel | None = None,
    network: NetworkView | None = None,
    score_args: Mapping[str, Mapping[str, Any]] | None = None,
) -> Placer:
    """A Placer configured by the preset `name`; `score_args` are constructor arguments of
    its score plugins by name (e.g. {"porting": {"penalties": {"rocm": 10}}})."""
    chosen = preset(name)
    args = score_args or {}
    scores = [build_score(s, **args[s]) if s in args else s for s in chosen.scores]
    return Placer(
        state,
        filters=chosen.filters,
        scores=scores,
        weights=chosen.weights,
        throughput=throughput,
        network=network,
        packing_first=chosen.packing_first,
        packing_slack=chosen.packing_slack,
    )
