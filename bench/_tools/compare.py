"""`python -m bench compare REV`: the quick set at another commit and here, alternated.

REV is checked out in a temporary git worktree (removed afterwards). Each bench runs at REV,
then in the working tree, then at REV again, ... (`--rounds` pairs), so both sides see the same
load; the working tree's result files are left as they were. The ratio per figure is new / old
of the medians, marked better or worse by the figure's direction where it moved beyond its
tolerance.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from bench._common import REPO, load_average
from bench._tools.registry import Bench, Figure
from bench._tools.runner import BenchFailed, fmt, moved, run_bench, value


def _worktree(rev: str, where: Path) -> Path:
    tree = where / "old"
    proc = subprocess.run(
        ["git", "worktree", "add", "--detach", str(tree), rev],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        shutil.rmtree(where, ignore_errors=True)
        lines = proc.stderr.strip().splitlines() or ["git worktree add failed"]
        raise ValueError(f"cannot check out {rev!r}: {lines[-1]}")
    return tree


def _remove(tree: Path) -> None:
    subprocess.run(
        ["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True
    )
    subprocess.run(["git", "worktree", "prune"], cwd=REPO, capture_output=True)


def _side(bench: Bench, root: Path, where: Path, tag: str, quick: bool) -> dict[str, float | None]:
    """One run of `bench` in `root`; its figures (all None when it failed there)."""
    where.mkdir(parents=True, exist_ok=True)
    log = where / f"{bench.name}.{tag}.log"
    try:
        run = run_bench(bench, quick=quick, root=root, keep_dir=where / tag, log=log)
    except BenchFailed as err:
        tail = log.read_text(errors="replace").splitlines()[-5:] if log.exists() else []
        print(f"  {tag}: {err}; its last lines:", *tail, sep="\n    ", flush=True)
        return {f.label: None for f in bench.figures}
    load = run.result["provenance"]["load_average_after"][0]
    figures = {f.label: value(run.result, f) for f in bench.figures}
    shown = ", ".join(f"{k} {fmt(v)}" for k, v in figures.items())
    print(f"  {tag}: {run.wall_s} s, load {load}; {shown}", flush=True)
    return figures


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def compare(
    rev: str, benches: tuple[Bench, ...], rounds: int, quick: bool = True, keep: Path | None = None
) -> list[str]:
    """Run `benches` (quick) at `rev` and here, alternated; the lines of the comparison.

    With `keep`, every run's result file and log are copied there (`r0/old/NAME.json`, ...).
    """
    where = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    tree = _worktree(rev, where)
    mode = "quick" if quick else "full"
    lines = [f"new (working tree) / old ({rev}), {mode} runs; median of {rounds} each, alternated"]
    try:
        for bench in benches:
            if not bench.figures:
                continue
            print(f"{bench.name}: load {load_average()[0]}", flush=True)
            old: dict[str, list[float | None]] = {f.label: [] for f in bench.figures}
            new: dict[str, list[float | None]] = {f.label: [] for f in bench.figures}
            for i in range(rounds):
                for label, v in _side(bench, tree, where / f"r{i}", "old", quick).items():
                    old[label].append(v)
                for label, v in _side(bench, REPO, where / f"r{i}", "new", quick).items():
                    new[label].append(v)
            for figure in bench.figures:
                lines.append(_line(bench, figure, _median(new[figure.label]),
                                   _median(old[figure.label])))  # fmt: skip
    finally:
        _remove(tree)
        if keep is not None:
            for run_dir in where.glob("r*"):  # not the worktree (`where/old`)
                shutil.copytree(run_dir, keep / run_dir.name, dirs_exist_ok=True)
        shutil.rmtree(where, ignore_errors=True)
    return lines


def _line(bench: Bench, figure: Figure, new: float | None, old: float | None) -> str:
    name = f"{bench.name}: {figure.label}"
    if new is None or old is None:
        return f"{name}: old {fmt(old)}, new {fmt(new)} (not comparable)"
    ratio = new / old if old else float("inf")
    verdict = moved(figure, new, old) or "same, within tolerance"
    return (
        f"{name}: {fmt(old)} -> {fmt(new)} {figure.unit}  ratio {ratio:.2f}  {verdict}"
        f" ({'higher' if figure.higher_is_better else 'lower'} is better)"
    )
