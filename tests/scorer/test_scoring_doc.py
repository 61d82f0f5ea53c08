"""docs/scoring.md's worked memory examples are recomputed here: the page cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scorer import JobSpec, default_catalog, memory_need, memory_refusal
from scorer.units import gib, gib_from_bytes

DOC = Path(__file__).resolve().parents[2] / "docs" / "scoring.md"
ROW = re.compile(r"^\| (?P<name>[^|]+) \| `(?P<job>kind=[^`]+)` \| (?P<cells>.+) \|$")


def _rows() -> list[tuple[str, str, list[str]]]:
    rows = []
    for line in DOC.read_text().splitlines():
        m = ROW.match(line)
        if m:
            cells = [c.strip() for c in m.group("cells").split("|")]
            rows.append((m.group("name").strip(), m.group("job"), cells))
    return rows


def _job(text: str) -> JobSpec:
    values: dict[str, object] = {}
    for item in text.split():
        key, value = item.split("=")
        if value in ("true", "false"):
            values[key] = value == "true"
        elif key == "params_b":
            values[key] = float(value)
        else:
            values[key] = int(value) if value.isdigit() else value
    return JobSpec("doc", **values)  # type: ignore[arg-type]


ROWS = _rows()


def test_the_page_has_the_examples_the_issue_asks_for() -> None:
    names = " ".join(name for name, _, _ in ROWS)
    assert len(ROWS) >= 12
    for needle in ("7B", "13B", "70B", "full", "LoRA", "QLoRA", "serve"):
        assert needle in names


@pytest.mark.parametrize(("name", "job", "cells"), ROWS, ids=[r[0] for r in ROWS])
def test_worked_example(name: str, job: str, cells: list[str]) -> None:
    spec = _job(job)
    need = memory_need(spec)
    parts = (need.weights, need.gradients, need.optimizer, need.activations, need.kv_cache)
    expected = [gib(need.mib), *(gib_from_bytes(p) if p else "-" for p in parts)]
    fits = [
        m.name for m in default_catalog() if m.memory_mib >= need.mib and m.supports(spec.precision)
    ]
    assert cells == [*expected, ", ".join(fits) or "none"]


def test_the_quoted_refusal_is_what_the_scorer_says() -> None:
    text = " ".join(DOC.read_text().split())  # the page wraps the quote over two lines
    job = JobSpec("r", kind="TRAINING", params_b=70, precision="BF16", gpu_count=8)
    assert f"memory: {memory_refusal(job, 81_559, 'H100')}" in text
