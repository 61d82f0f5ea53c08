"""`python -m bench compare REV` on a real git worktree, with the cheapest bench (`spread`,
a virtual-clock replay): both sides run, the ratio is printed, the worktree is removed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench._tools.compare import compare
from bench._tools.registry import select

REPO = Path(__file__).resolve().parents[2]


def _worktrees() -> str:
    return subprocess.run(
        ["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout


def test_compare_with_head_runs_both_sides_and_cleans_up(tmp_path: Path) -> None:
    result = REPO / "bench" / "results" / "spread.json"
    before = result.read_bytes()
    trees_before = _worktrees().count("bench-compare-")  # another compare may be running
    lines = compare("HEAD", select("spread"), rounds=1, keep=tmp_path)
    assert lines[0].startswith("new (working tree) / old (HEAD), quick runs")
    (line,) = lines[1:]
    # the same code on a virtual clock: the same figure on both sides
    assert "spread: largest region's share:" in line and "ratio 1.00" in line, line
    assert "same, within tolerance" in line
    assert _worktrees().count("bench-compare-") == trees_before
    assert result.read_bytes() == before  # the working tree's result file is left as it was
    for side in ("old", "new"):  # --keep: each run's stamped result file
        kept = json.loads((tmp_path / "r0" / side / "spread.json").read_text())
        assert kept["provenance"]["mode"] == "quick" and kept["provenance"]["commit"]


def test_compare_names_a_revision_it_cannot_check_out() -> None:
    with pytest.raises(ValueError, match="cannot check out 'no-such-rev'"):
        compare("no-such-rev", select("spread"), rounds=1)
