"""Forecast accuracy benchmark: every forecaster and the selection, backtested on a demand series.

    .venv/bin/python bench/forecast.py [--csv examples/demand.csv] [--horizons 1,24] [--out F]

Runs the rolling-origin backtest (`forecast.backtest`) on the series (the committed example:
a month of hourly GPU demand from `forecast.synthetic`) and reports sMAPE, MASE, interval
coverage and scored origins per model and horizon, the choice for live use, and how long the
same work takes through the command (`gpuflow forecast --series-csv ... --backtest --json`,
timed as a subprocess: wall and CPU seconds, with the load average beside them).

Targets (issue 12): one step ahead, `selected` sMAPE <= 8 % and MASE <= 0.8; at 1 and 24
steps, `selected` MASE at least 20 % below `holt_winters`; the command under a minute.

For the committed example it also reports a reference no model can beat in general: a
one-step forecast that knows the generator's true calendar shape and trend and filters the
persistent deviations with the exact Kalman filter (it does not know bursts in advance).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import write_result
from forecast import MODELS, SELECTED, BacktestConfig, backtest, build, read_series_csv
from forecast.metrics import mase_scales, smape_terms
from forecast.synthetic import DemandShape, demand_series

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "demand.csv"


def _targets(rows: dict[tuple[str, int], dict[str, Any]], horizons: tuple[int, ...]) -> dict:
    out: dict[str, Any] = {}
    one = rows.get((SELECTED, 1))
    if one is not None:
        out["selected_smape_1_step_le_8pct"] = {"measured": one["smape"], "met": one["smape"] <= 8}
        out["selected_mase_1_step_le_0.8"] = {"measured": one["mase"], "met": one["mase"] <= 0.8}
    for h in horizons:
        sel, hw = rows.get((SELECTED, h)), rows.get(("holt_winters", h))
        if sel and hw:
            below = 1 - sel["mase"] / hw["mase"]
            out[f"selected_mase_{h}_steps_20pct_below_holt_winters"] = {
                "measured_pct_below": round(100 * below, 1),
                "met": below >= 0.2,
            }
    return out


def _oracle(shape: DemandShape, first: int) -> dict[str, float]:
    """One-step MASE and sMAPE of the known-structure Kalman forecast on the example."""
    y = demand_series(shape).values
    base = demand_series(replace(shape, noise=0.0, ar_noise=0.0, bursts_per_week=0.0)).values
    phi = shape.ar_phi ** (shape.step_s / 3600.0)
    q, r = shape.ar_noise**2 * shape.step_s / 3600.0, shape.noise**2
    x, p, pred = 0.0, q / (1 - phi**2), np.zeros(len(y))
    for t in range(len(y)):  # state: the relative deviation y / base - 1
        xp, pp = phi * x, phi * phi * p + q
        pred[t] = base[t] * (1 + xp)
        k = pp / (pp + r)
        x, p = xp + k * (y[t] / base[t] - 1 - xp), (1 - k) * pp
    origins = np.arange(first, len(y))
    scales = mase_scales(y, origins, 24)
    err = np.abs(y[origins] - pred[origins])
    return {
        "mase": round(float(np.mean(err / scales)), 4),
        "smape": round(float(np.mean(smape_terms(y[origins], pred[origins]))), 4),
    }


def _time_cli(csv: Path, horizons: str) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()
    started = time.monotonic()
    cmd = [
        sys.executable,
        "-m",
        "gpuflow",
        "forecast",
        "--series-csv",
        str(csv),
        "--backtest",
        "--json",
        "--horizons",
        horizons,
    ]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "command": " ".join(["gpuflow", *cmd[3:]]).replace(f"{REPO}/", ""),  # repo-relative
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "loadavg_before": [round(v, 2) for v in load],
        "loadavg_after": [round(v, 2) for v in os.getloadavg()],
        "rows": json.loads(out.stdout),
        "target_wall_s": 60,
        "met": wall < 60,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=EXAMPLE)
    parser.add_argument("--horizons", default="1,24")
    parser.add_argument("--no-cli", action="store_true", help="skip timing the command")
    parser.add_argument("--out", type=Path, default=None, help="default bench/results/")
    args = parser.parse_args()
    series = read_series_csv(args.csv)
    horizons = tuple(int(h) for h in args.horizons.split(","))
    models = {name: build(name) for name in MODELS}
    started, cpu0 = time.monotonic(), time.process_time()
    result = backtest(series, models, BacktestConfig(horizons=horizons))
    wall, cpu = time.monotonic() - started, time.process_time() - cpu0
    rows = {
        (r.model, r.horizon_steps): {
            "smape": round(r.smape, 4),
            "mase": round(r.mase, 4),
            "coverage": round(r.coverage, 4),
            "origins": r.origins,
        }
        for r in result.rows
    }
    for (model, h), row in rows.items():
        print(
            f"{model:>15} h={h:<3} sMAPE {row['smape']:6.2f} %  MASE {row['mase']:.3f}  "
            f"coverage {row['coverage']:.2f}  origins {row['origins']}"
        )
    record: dict[str, Any] = {
        "series": str(args.csv.relative_to(REPO) if args.csv.is_relative_to(REPO) else args.csv),
        "points": len(series),
        "step_s": series.step_s,
        "level": 0.8,
        "rows": [{"model": m, "horizon_steps": h, **v} for (m, h), v in rows.items()],
        "chosen": {str(c.horizon_steps): c.model for c in result.choices},
        "notes": list(result.notes),
        "targets": _targets(rows, horizons),
        "backtest_wall_s": round(wall, 1),
        "backtest_cpu_s": round(cpu, 1),
    }
    if args.csv.resolve() == EXAMPLE:
        record["known_structure_reference_1_step"] = _oracle(DemandShape(), int(result.origins[0]))
    if not args.no_cli:
        record["cli"] = _time_cli(args.csv, args.horizons)
        print(
            f"command: {record['cli']['wall_s']} s wall, {record['cli']['cpu_s']} s CPU, "
            f"load {record['cli']['loadavg_before']}"
        )
    for name, target in record["targets"].items():
        print(f"{name}: {target}")
    print(f"wrote {write_result('forecast', record, args.out)}")


if __name__ == "__main__":
    main()
