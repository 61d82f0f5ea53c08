"""`python -m bench`: run every registered bench, compare with another commit, the table.

python -m bench list                  # the registry: full and quick arguments
python -m bench all [--quick]         # run them, write bench/results/*.json, the table
python -m bench run NAME[,NAME] [--quick]
python -m bench compare REV [--only NAMES] [--rounds 2]
python -m bench table [--write | --check]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench._common import load_average
from bench._tools import compare as compare_mod
from bench._tools import table
from bench._tools.registry import BENCHES, Bench, select
from bench._tools.runner import BenchFailed, command_line, moved_lines, run_bench, shown, value


def _list() -> int:
    for b in BENCHES:
        print(f"{b.name:<18} {b.about} (~{b.minutes_full:g} min full)")
        print(f"{'':<18} full:  {command_line(b, quick=False)}")
        print(f"{'':<18} quick: {command_line(b, quick=True)}")
    return 0


def _run(benches: tuple[Bench, ...], quick: bool, keep_dir: Path | None) -> int:
    started = time.monotonic()
    failed: list[str] = []
    notes: list[str] = []
    for bench in benches:
        print(f"== {bench.name}: {command_line(bench, quick)}  (load {load_average()[0]})",
              flush=True)  # fmt: skip
        try:
            run = run_bench(bench, quick, keep_dir=keep_dir)
        except BenchFailed as err:
            print(f"FAILED {err}", flush=True)
            failed.append(bench.name)
            continue
        figures = ", ".join(f"{f.label} {shown(value(run.result, f), f.unit)}"
                            for f in bench.figures)  # fmt: skip
        print(f"-- {bench.name}: {run.wall_s} s; {figures or 'no headline figure'}", flush=True)
        for line in moved_lines(run):
            print(line, flush=True)
            notes.append(line)
    total = round(time.monotonic() - started)
    print(f"\n{len(benches) - len(failed)} of {len(benches)} benches ran in {total} s")
    for line in notes:
        print(line)
    if failed:
        print(f"failed: {', '.join(failed)}")
    if keep_dir is None and table.write():
        print(f"rewrote the benchmark table in {table.README.name}")
    return 1 if failed else 0


def _table(write: bool, check: bool) -> int:
    if write:
        print("README table rewritten" if table.write() else "README table already current")
        return 0
    if check:
        same = table.block(table.README.read_text()) == table.render()
        print("README table matches bench/results" if same else "README table is stale")
        return 0 if same else 1
    print(table.render(), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the registry")
    for name in ("all", "run"):
        p = sub.add_parser(name, help="run every bench" if name == "all" else "run some")
        if name == "run":
            p.add_argument("names", help="comma-separated bench names (python -m bench list)")
        p.add_argument("--quick", action="store_true", help="the quick arguments")
        p.add_argument("--results-dir", type=Path, help="write here, leave bench/results be")
    p = sub.add_parser("compare", help="quick set at REV and here, alternated")
    p.add_argument("rev")
    p.add_argument("--only", help="comma-separated bench names (default: all)")
    p.add_argument("--rounds", type=int, default=2, help="runs per side, alternated")
    p.add_argument("--full", action="store_true", help="the full arguments instead of quick")
    p.add_argument("--keep", type=Path, help="copy every run's result file and log here")
    p = sub.add_parser("table", help="print, --write or --check the README table")
    p.add_argument("--write", action="store_true")
    p.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "list":
            return _list()
        if args.cmd == "all":
            return _run(BENCHES, args.quick, args.results_dir)
        if args.cmd == "run":
            return _run(select(args.names), args.quick, args.results_dir)
        if args.cmd == "compare":
            lines = compare_mod.compare(
                args.rev, select(args.only), max(1, args.rounds), not args.full, args.keep
            )
            print("\n".join(lines))
            return 0
        return _table(args.write, args.check)
    except ValueError as err:
        print(f"bench: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
