"""Run one registered bench in a tree, stamp its result file, say whether a figure moved.

A bench writes `bench/results/<name>.json` in the tree it runs in. The runner adds what every
result must name (`provenance`: commit, machine, load average before and after, the exact
command, quick or full) and, when asked to keep the tree's files as they were (`bench compare`,
`--results-dir`), moves the new file elsewhere and puts the old one back.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._common import REPO, commit, load_average, machine
from bench._tools.registry import Bench, Figure


class BenchFailed(Exception):
    """A bench exited non-zero or wrote no result file."""


@dataclass(frozen=True)
class Run:
    """One bench run: its result and where it was written."""

    bench: Bench
    result: dict[str, Any]
    path: Path
    wall_s: float


def value(result: dict[str, Any] | None, figure: Figure) -> float | None:
    """The figure's value in a result (scaled for display), None where the result lacks it."""
    node: Any = result
    for key in figure.path:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return None
    if isinstance(node, bool) or not isinstance(node, int | float) or math.isnan(node):
        return None
    return float(node) * figure.scale


def command_line(bench: Bench, quick: bool) -> str:
    return " ".join(["python", "-m", f"bench.{bench.module}", *bench.args(quick)])


def run_bench(
    bench: Bench,
    quick: bool,
    root: Path = REPO,
    keep_dir: Path | None = None,
    log: Path | None = None,
) -> Run:
    """Run `bench` in the tree at `root` with this interpreter; stamp and return its result.

    With `keep_dir` the tree's own result file is left as it was and the new one goes to
    `keep_dir/<name>.json`. With `log` the bench's output goes there instead of the terminal.
    """
    target = root / "bench" / "results" / f"{bench.name}.json"
    before = target.read_bytes() if keep_dir is not None and target.exists() else None
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-m", f"bench.{bench.module}", *bench.args(quick)]
    load_before = load_average()
    started = time.time()
    out = log.open("w") if log else None
    try:
        proc = subprocess.run(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    finally:
        if out:
            out.close()
    wall_s = round(time.time() - started, 1)
    if proc.returncode != 0:
        _restore(target, before, keep_dir)
        raise BenchFailed(f"{bench.name}: exit {proc.returncode} after {wall_s} s")
    if not target.exists() or target.stat().st_mtime < started:
        _restore(target, before, keep_dir)
        raise BenchFailed(f"{bench.name}: wrote no {target.name}")
    result = json.loads(target.read_text())
    result["provenance"] = {
        "commit": commit(root),
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "command": command_line(bench, quick),
        "mode": "quick" if quick else "full",
        "wall_s": wall_s,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    text = json.dumps(result, indent=2) + "\n"
    if keep_dir is None:
        target.write_text(text)
        return Run(bench, result, target, wall_s)
    keep_dir.mkdir(parents=True, exist_ok=True)
    path = keep_dir / f"{bench.name}.json"
    path.write_text(text)
    _restore(target, before, keep_dir)
    return Run(bench, result, path, wall_s)


def _restore(target: Path, before: bytes | None, keep_dir: Path | None) -> None:
    if keep_dir is None:
        return
    if before is None:
        target.unlink(missing_ok=True)
    else:
        target.write_bytes(before)


def committed(name: str, root: Path = REPO, rev: str = "HEAD") -> dict[str, Any] | None:
    """The result file as the commit `rev` has it (`git show`), None where it has none."""
    proc = subprocess.run(
        ["git", "show", f"{rev}:bench/results/{name}.json"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return None
    try:
        loaded: dict[str, Any] = json.loads(proc.stdout)
    except ValueError:
        return None
    return loaded


def moved(figure: Figure, new: float | None, old: float | None) -> str | None:
    """'better'/'worse' when `new` is beyond the figure's tolerance from `old`, else None."""
    if new is None or old is None:
        return None
    allowed = max(abs(old) * figure.tolerance, figure.floor)
    if abs(new - old) <= allowed:
        return None
    up = new > old
    return "better" if up == figure.higher_is_better else "worse"


def moved_lines(run: Run, root: Path = REPO) -> list[str]:
    """One line per headline figure that moved beyond its tolerance from the committed result."""
    old = committed(run.bench.name, root)
    if old is None:
        return [f"{run.bench.name}: no committed result to compare with"]
    note = ""
    old_mode = (old.get("provenance") or {}).get("mode", "full")
    if old_mode != run.result["provenance"]["mode"]:
        note = f" (the committed result is a {old_mode} run)"
    lines = []
    for figure in run.bench.figures:
        new_v, old_v = value(run.result, figure), value(old, figure)
        verdict = moved(figure, new_v, old_v)
        if verdict and new_v is not None and old_v is not None:
            lines.append(
                f"{run.bench.name}: {figure.label} MOVED ({verdict}): {fmt(old_v)} -> "
                f"{shown(new_v, figure.unit)}, beyond the {figure.tolerance:.0%} tolerance"
                f"{note}"
            )
    return lines


def fmt(v: float | None) -> str:
    """A figure as the table shows it: thousands separated, 3 significant digits below 100."""
    if v is None:
        return "—"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:  # more digits where one would round up to 100 (99.955 % is not 100.0 %)
        return next(t for d in (1, 2, 3, 4) if abs(float(t := f"{v:.{d}f}")) < 100 or d == 4)
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def shown(v: float | None, unit: str) -> str:
    """A figure with its unit, `—` alone where there is none."""
    return f"{fmt(v)} {unit}".rstrip() if v is not None else "—"
