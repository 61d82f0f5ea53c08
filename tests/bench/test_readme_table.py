"""The README's benchmark table is the one the result files give, and the README stays short.

No bench runs here: the table is rendered from `bench/results/*.json` as they are committed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench._tools import table
from bench._tools.registry import BENCHES, select
from bench._tools.runner import fmt, moved, value

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
RESULTS = REPO / "bench" / "results"
# a throughput, latency or CPU figure written as prose: "6,513/s", "0.21 ms p99", "34 µs"
FIGURE = re.compile(
    r"\d[\d,.]*\s?(?:decisions|jobs|events|rows)/s|\d[\d,.]*\s?(?:ms|µs) (?:p\d\d|of CPU)"
)


def test_the_readme_table_is_what_the_result_files_say() -> None:
    assert table.BEGIN in README and table.END in README, "README has no generated table block"
    assert table.block(README) == table.render(RESULTS), (
        "README's benchmark table differs from bench/results: run `python -m bench table --write`"
    )


def test_no_benchmark_figure_outside_the_generated_table() -> None:
    outside = README.split(table.BEGIN)[0] + README.split(table.END)[1]
    assert FIGURE.findall(outside) == []


def test_the_readme_is_at_most_350_lines() -> None:
    assert len(README.splitlines()) <= 350


def test_every_bench_has_a_module_and_one_result_file() -> None:
    for bench in BENCHES:
        assert (REPO / "bench" / f"{bench.module}.py").is_file(), bench.module
        assert (RESULTS / f"{bench.name}.json").is_file(), bench.name
    names = {b.name for b in BENCHES}
    extra = {p.stem for p in RESULTS.glob("*.json")} - names
    assert extra == set(), f"result files no bench writes (one current file per bench): {extra}"
    assert [p for p in RESULTS.iterdir() if p.is_dir()] == [], "old result variants are in git"


def test_every_headline_figure_is_in_its_result_file() -> None:
    for bench in BENCHES:
        result = json.loads((RESULTS / f"{bench.name}.json").read_text())
        for figure in bench.figures:
            optional = bench.name == "forecast" and figure.path[0] == "cli"
            assert optional or value(result, figure) is not None, (bench.name, figure.label)


def test_the_benches_do_not_edit_sys_path() -> None:
    hits = [p.name for p in (REPO / "bench").glob("*.py") if "sys.path.insert" in p.read_text()]
    assert hits == []


def test_moved_beyond_tolerance_by_direction() -> None:
    (scorer,) = select("scorer")
    rate = scorer.figures[0]  # decisions/s, higher is better, 30 %
    assert moved(rate, 1_000.0, 2_000.0) == "worse"
    assert moved(rate, 3_000.0, 2_000.0) == "better"
    assert moved(rate, 2_400.0, 2_000.0) is None
    p99 = scorer.figures[1]  # lower is better, floor 0.05 ms
    assert moved(p99, 0.5, 0.2) == "worse"
    assert moved(p99, 0.22, 0.2) is None


def test_python_m_bench_table_check_agrees() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "table", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("v", "text"),
    [(99.955, "99.95"), (99.9999, "99.9999"), (42.55, "42.5"), (1234.5, "1,234"), (0.5, "0.5")],
)
def test_a_figure_just_under_100_is_not_shown_as_100(v: float, text: str) -> None:
    assert fmt(v) == text  # 99.955 % of minutes within SLO read "100.0 %" in the table
