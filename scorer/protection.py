"""Proactive protection: a node whose HBM bandwidth stays saturated, or whose GPUs report ECC or
XID errors, first gets a checkpoint advisory for the jobs on it; if it persists, its jobs are
moved off and the node is cordoned (no new work) until it has stayed clean for a while.

Pure bookkeeping over telemetry samples; the stream processor turns the actions into events.
Per node, the last value of every GPU is kept (tiered telemetry sends only what changed), and
the node's level is its busiest GPU's. Saturated = the mean of that level over the last
`window_s` is above `hbm_saturation_pct` and the samples cover the window.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ADVISE",
    "EVACUATE",
    "UNCORDON",
    "NodeAction",
    "NodeHealth",
    "ProtectionPolicy",
    "critical_xids",
]

ADVISE, EVACUATE, UNCORDON = "CHECKPOINT", "CORDON", "UNCORDON"
_RESUM_EVERY = 1024
HBM, ERRORS = "HBM_SATURATION", "GPU_ERRORS"
# XIDs that mean the GPU needs attention (NVIDIA's catalogue; agents/nvml.py marks them sick)
CRITICAL_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95})


def critical_xids(codes: Iterable[Any]) -> int:
    """How many of a GPU's reported XID codes are critical."""
    return sum(1 for x in codes if int(x) in CRITICAL_XIDS)


@dataclass(frozen=True)
class ProtectionPolicy:
    enabled: bool = True
    hbm_saturation_pct: float = 85.0
    window_s: float = 60.0  # saturation averaged over this long before an advisory
    evacuate_after_s: float = 300.0  # still saturated this long after the advisory: move off
    error_window_s: float = 600.0  # a second ECC/XID error within this: move off
    uncordon_after_s: float = 1800.0  # a cordoned node clean this long takes work again


@dataclass(frozen=True)
class NodeAction:
    """What to do about one node: CHECKPOINT (advise), CORDON (move jobs off), UNCORDON."""

    action: str
    node_id: str
    reason: str  # HBM_SATURATION | GPU_ERRORS | RECOVERED
    detail: str
    value: float = 0.0  # the measured level behind it (HBM %, error count)


@dataclass
class _Node:
    bw: dict[int, float] = field(default_factory=dict)
    ecc: dict[int, int] = field(default_factory=dict)
    levels: deque[tuple[int, float]] = field(default_factory=deque)
    level_sum: float = 0.0  # of `levels`, kept as they come and go
    samples: int = 0
    saturated_since: int | None = None
    errors: deque[int] = field(default_factory=deque)
    advised: str | None = None  # reason of the advisory in force
    cordoned: str | None = None
    clean_since: int | None = None


class NodeHealth:
    """Per-node windows over telemetry; `observe` returns the actions a sample triggers."""

    def __init__(self, policy: ProtectionPolicy | None = None) -> None:
        self.policy = policy or ProtectionPolicy()
        self._nodes: dict[str, _Node] = {}

    def cordoned(self) -> dict[str, str]:
        return {n: s.cordoned for n, s in self._nodes.items() if s.cordoned}

    def restore_cordon(self, node_id: str, reason: str, at_ms: int) -> None:
        """A cordon recovered from durable state (worker restart)."""
        node = self._nodes.setdefault(node_id, _Node())
        node.cordoned, node.clean_since = reason, at_ms

    def observe(
        self, node_id: str, ts_ms: int, gpus: Iterable[Mapping[str, Any]]
    ) -> list[NodeAction]:
        """A report's GPUs as dicts (index, mem_bw_util_pct, ecc_errors, xid_events)."""
        index, bw, ecc, critical = [], [], [], []
        for g in gpus:
            index.append(int(g["index"]))
            bw.append(float(g.get("mem_bw_util_pct") or 0.0))
            ecc.append(int(g.get("ecc_errors") or 0))
            critical.append(critical_xids(g.get("xid_events") or ()))
        return self.observe_values(node_id, ts_ms, index, bw, ecc, critical)

    def observe_values(
        self,
        node_id: str,
        ts_ms: int,
        index: Sequence[int],
        bw: Sequence[float],
        ecc: Sequence[int],
        critical: Sequence[int],
    ) -> list[NodeAction]:
        """A report's GPUs as parallel lists: index, HBM bandwidth %, uncorrected ECC count,
        critical XIDs in this report."""
        p = self.policy
        if not p.enabled:
            return []
        node = self._nodes.setdefault(node_id, _Node())
        errors = self._record(node, index, bw, ecc, critical)
        level = max(node.bw.values(), default=0.0)
        saturated = self._saturated(node, ts_ms, level)
        if errors:
            node.errors.extend([ts_ms] * errors)
        while node.errors and node.errors[0] < ts_ms - p.error_window_s * 1000:
            node.errors.popleft()
        return self._decide(node_id, node, ts_ms, saturated, errors)

    @staticmethod
    def _record(
        node: _Node,
        index: Sequence[int],
        bw: Sequence[float],
        ecc: Sequence[int],
        critical: Sequence[int],
    ) -> int:
        """Update the per-GPU values; the number of new errors (ECC increments, critical XIDs)."""
        errors = sum(critical)
        node_bw, node_ecc = node.bw, node.ecc
        for i, b, e in zip(index, bw, ecc, strict=True):
            node_bw[i] = b
            if e > node_ecc.get(i, e):
                errors += 1
            node_ecc[i] = e
        return errors

    def _saturated(self, node: _Node, ts_ms: int, level: float) -> tuple[bool, float]:
        window_ms = self.policy.window_s * 1000
        levels = node.levels
        levels.append((ts_ms, level))
        node.level_sum += level
        while len(levels) > 1 and levels[1][0] <= ts_ms - window_ms:
            node.level_sum -= levels.popleft()[1]
        node.samples += 1
        if node.samples % _RESUM_EVERY == 0:  # a running sum drifts: add it up afresh now and then
            node.level_sum = sum(v for _, v in levels)
        covered = ts_ms - levels[0][0] >= window_ms * 0.9
        mean = node.level_sum / len(levels)
        hot = covered and mean > self.policy.hbm_saturation_pct
        if hot and node.saturated_since is None:
            node.saturated_since = ts_ms
        elif not hot:
            node.saturated_since = None
        return hot, mean

    def _decide(
        self, node_id: str, node: _Node, ts_ms: int, saturated: tuple[bool, float], errors: int
    ) -> list[NodeAction]:
        hot, mean = saturated
        if node.cordoned:
            return self._maybe_uncordon(node_id, node, ts_ms, hot or errors > 0)
        out = self._advise(node_id, node, hot, mean, errors)
        evacuate = self._evacuate(node_id, node, ts_ms, hot, mean, errors)
        if evacuate is not None:
            node.cordoned, node.clean_since = evacuate.reason, ts_ms
            out.append(evacuate)
        elif not hot and not node.errors:
            node.advised = None  # recovered before anything moved: a later episode advises again
        return out

    def _maybe_uncordon(
        self, node_id: str, node: _Node, ts_ms: int, dirty: bool
    ) -> list[NodeAction]:
        after_ms = self.policy.uncordon_after_s * 1000
        if dirty or node.clean_since is None:
            node.clean_since = ts_ms
            return []
        if ts_ms - node.clean_since < after_ms:
            return []
        node.cordoned = node.advised = node.clean_since = None
        detail = f"clean for {self.policy.uncordon_after_s:g}s"
        return [NodeAction(UNCORDON, node_id, "RECOVERED", detail)]

    def _advise(
        self, node_id: str, node: _Node, hot: bool, mean: float, errors: int
    ) -> list[NodeAction]:
        p = self.policy
        if errors and node.advised != ERRORS:
            node.advised = ERRORS
            return [NodeAction(ADVISE, node_id, ERRORS, f"{errors} new ECC/XID error(s)", errors)]
        if hot and node.advised is None:
            node.advised = HBM
            detail = f"HBM bandwidth {mean:.0f}% > {p.hbm_saturation_pct:g}% over {p.window_s:g}s"
            return [NodeAction(ADVISE, node_id, HBM, detail, mean)]
        return []

    def _evacuate(
        self, node_id: str, node: _Node, ts_ms: int, hot: bool, mean: float, errors: int
    ) -> NodeAction | None:
        p = self.policy
        recent = len(node.errors)
        if errors and recent >= 2:
            detail = f"{recent} ECC/XID errors within {p.error_window_s:g}s"
            return NodeAction(EVACUATE, node_id, ERRORS, detail, recent)
        since = node.saturated_since
        if hot and since is not None and ts_ms - since >= p.evacuate_after_s * 1000:
            detail = (
                f"HBM bandwidth {mean:.0f}% > {p.hbm_saturation_pct:g}% "
                f"for {p.evacuate_after_s:g}s after the advisory"
            )
            return NodeAction(EVACUATE, node_id, HBM, detail, mean)
        return None
