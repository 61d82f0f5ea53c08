"""FGD score: expected fragmentation arithmetic and the placements it prefers."""

from __future__ import annotations

import numpy as np
import pytest

from scorer import Assignment, ClusterState, JobSpec, NodeSpec, make_placer
from scorer.scores.fgd import expected_fragmentation


@pytest.mark.parametrize(
    ("free", "classes", "expected"),
    [
        # one whole + 300 on a partly used GPU; 1-GPU tasks cannot use the 300
        ([1000, 300, 0, 0], {(1, 1000): 1.0}, 300),
        # 2-GPU tasks: only one whole GPU -> everything free is a fragment
        ([1000, 300, 0, 0], {(2, 1000): 1.0}, 1300),
        # 500-milli shares: the 300 is too small, the whole GPU is usable
        ([1000, 300, 0, 0], {(1, 500): 1.0}, 300),
        # a 50/50 mix: 0.5 x 300 + 0.5 x 1300
        ([1000, 300, 0, 0], {(1, 1000): 0.5, (2, 1000): 0.5}, 800),
        ([0, 0, 0, 0], {(1, 1000): 1.0}, 0),
    ],
)
def test_expected_fragmentation(
    free: list[int], classes: dict[tuple[int, int], float], expected: float
) -> None:
    assert expected_fragmentation(np.array([free]), classes)[0] == pytest.approx(expected)


def node(node_id: str) -> NodeSpec:
    return NodeSpec(node_id, "eu", "V100-16", 4, 16384)


def test_fgd_keeps_whole_nodes_for_the_gangs_it_has_seen() -> None:
    state = ClusterState()
    for n in ("a", "b"):
        state.upsert_node(node(n))
    state.reserve("x", [Assignment("b", (0,))])  # b: 3 free, a: 4 free
    placer = make_placer("fgd", state)
    placer.observe(JobSpec("gang", gpu_count=4))  # a 4-GPU gang was placed: the mix holds it
    result = placer.place(JobSpec("one", gpu_count=1))
    assert result.placed and result.assignments[0].node_id == "b"
    # first fit would take the first node in inventory order
    assert make_placer("fifo", state).place(JobSpec("one")).assignments[0].node_id == "a"
