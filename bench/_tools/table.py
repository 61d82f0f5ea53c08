"""The README's benchmark table, generated from bench/results/*.json.

`python -m bench table --write` rewrites the block between the markers in README.md;
`tests/bench/test_readme_table.py` fails when the block differs from what the files say.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench._common import REPO, RESULTS
from bench._tools.registry import BENCHES
from bench._tools.runner import shown, value

BEGIN = "<!-- bench-table:begin (python -m bench table --write; do not edit by hand) -->"
END = "<!-- bench-table:end -->"
README = REPO / "README.md"


def _load(results: Path, name: str) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    if not path.exists():
        return None
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def _measured(result: dict[str, Any]) -> str:
    """When, at which commit and under what load: `2026-12-03, c0633aa, load 0.4 -> 1.2`."""
    prov = result.get("provenance") or {}
    when = str(prov.get("measured_at") or result.get("measured_at") or "")[:10] or "—"
    rev = str(prov.get("commit") or "")
    rev = (rev[:7] + (" dirty" if rev.endswith("dirty") else "")) if rev else "no commit"
    before, after = _loads(result)
    if before is not None and after is not None:
        load = f"load {before} → {after}"
    elif after is not None:
        load = f"load {after} at end"
    else:
        load = "load not recorded"
    return f"{when}, {rev}, {load}"


def _first(value: Any) -> float | None:
    if isinstance(value, list) and value and isinstance(value[0], int | float):
        return float(value[0])
    return float(value) if isinstance(value, int | float) else None


def _loads(result: dict[str, Any]) -> tuple[float | None, float | None]:
    """1-minute load average before and after, also from files written before `provenance`."""
    prov = result.get("provenance") or {}
    machine = result.get("machine")
    machine = machine if isinstance(machine, dict) else {}
    pair = machine.get("loadavg_1m_before_after") or [None, None]  # bench/scorer.py's own
    before = _first(prov.get("load_average_before")) or _first(result.get("load_average"))
    after = _first(prov.get("load_average_after")) or _first(result.get("load_average_at_end"))
    return (
        before if before is not None else _first(pair[0]),
        after if after is not None else _first(pair[1]) or _first(result.get("load_avg_1m_at_end")),
    )


def _command(result: dict[str, Any]) -> str:
    prov = result.get("provenance") or {}
    command = str(prov.get("command") or result.get("command") or "—")
    return command.replace("|", "\\|")


def render(results: Path = RESULTS) -> str:
    """The table, one row per headline figure, from the result files in `results`."""
    rows = [
        "| bench | figure | today | target | command | measured (date, commit, load avg) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for bench in BENCHES:
        result = _load(results, bench.name)
        if result is None or not bench.figures:
            continue
        for i, figure in enumerate(bench.figures):
            first = i == 0
            rows.append(
                "| "
                + " | ".join(
                    [
                        f"`{bench.name}`" if first else "",
                        figure.label,
                        shown(value(result, figure), figure.unit),
                        figure.target,
                        f"`{_command(result)}`" if first else "",
                        _measured(result) if first else "",
                    ]
                )
                + " |"
            )
    return "\n".join(rows) + "\n"


def block(readme_text: str) -> str:
    """The generated block as the README has it (between the markers), '' without markers."""
    if BEGIN not in readme_text or END not in readme_text:
        return ""
    return readme_text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def write(readme: Path = README, results: Path = RESULTS) -> bool:
    """Rewrite the README's block from the result files; True when it changed."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{readme.name}: no {BEGIN!r} ... {END!r} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{render(results)}{END}{tail}"
    if new == text:
        return False
    readme.write_text(new)
    return True
