"""`gpuflow forecast` on outside series: JSON scores, tables, plots, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from forecast import Series, write_series_csv
from gpuflow.cli import app

runner = CliRunner()
START = 1_741_564_800  # a Monday


def _csv(tmp_path: Path, days: float, step_s: int = 3600) -> Path:
    n = int(days * 86_400 // step_s)
    t = START + step_s * np.arange(n)
    rng = np.random.default_rng(1)
    values = 50 + 10 * np.sin(2 * np.pi * (t % 86_400) / 86_400) + rng.normal(0, 1, n)
    return write_series_csv(Series(START, step_s, values), tmp_path / f"s{n}.csv")


def test_backtest_json_lists_every_model_and_the_selection(tmp_path: Path) -> None:
    csv = _csv(tmp_path, days=10)
    args = [
        "forecast",
        "--series-csv",
        str(csv),
        "--backtest",
        "--json",
        "--horizons",
        "1,6",
        "--lstm-epochs",
        "3",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    models = ("seasonal_naive", "holt_winters", "lstm", "prophet", "mstl", "lag_ridge")
    combinations = ("median_best", "weighted_best")
    assert {(r["model"], r["horizon_steps"]) for r in rows} == {
        (m, h) for m in (*models, *combinations, "selected") for h in (1, 6)
    }
    for row in rows:
        assert set(row) == {"model", "horizon_steps", "smape", "mase", "origins"}
        assert row["origins"] > 0 and row["smape"] >= 0 and row["mase"] >= 0
    assert "240 points every 3600 s" in result.stderr  # what was read, gaps and all


def test_a_series_too_short_for_a_model_says_so(tmp_path: Path) -> None:
    csv = _csv(tmp_path, days=3)  # 72 hourly points: enough for the baseline, not the LSTM
    args = ["forecast", "--series-csv", str(csv), "--backtest", "--json", "--horizons", "1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "lstm: series too short: needs >= " in result.stderr
    assert "Traceback" not in result.output
    assert "lstm" not in {r["model"] for r in json.loads(result.stdout)}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--horizons", "1,x"], "--horizons"),
        (["--horizons", "0"], "--horizons"),
        (["--models", "arima"], "--models"),
        (["--model", "arima"], "--model"),
        (["--level", "1.5"], "--level"),
        (["--fill", "guess"], "--fill"),
        (["--country", "XX"], "--country"),
    ],
)
def test_bad_options_name_the_option(tmp_path: Path, args: list[str], field: str) -> None:
    csv = _csv(tmp_path, days=3)
    result = runner.invoke(app, ["forecast", "--series-csv", str(csv), *args])
    assert result.exit_code == 2, result.output
    assert field in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_bad_or_tiny_csv_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("ts,value\n2025-01-01T00:00:00Z,1\nnot-a-time,2\n")
    result = runner.invoke(app, ["forecast", "--series-csv", str(bad)])
    assert result.exit_code == 2 and "bad.csv:3: ts: cannot read 'not-a-time'" in result.output
    tiny = _csv(tmp_path, days=1)  # 24 points: too short for every model
    result = runner.invoke(app, ["forecast", "--series-csv", str(tiny), "--backtest"])
    assert result.exit_code == 2 and "series too short" in result.output
    assert "Traceback" not in result.output


def test_forecast_table_json_and_plot(tmp_path: Path) -> None:
    csv = _csv(tmp_path, days=4)
    png = tmp_path / "out" / "forecast.png"
    args = ["forecast", "--series-csv", str(csv), "--model", "holt_winters", "--horizons", "6"]
    result = runner.invoke(app, [*args, "--json", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["model"] for r in rows] == ["holt_winters"] * 6 + ["seasonal_naive"] * 6
    first = rows[0]
    assert first["ts"] == START + 96 * 3600  # the step after the last point
    assert first["lower"] <= first["point"] <= first["upper"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = runner.invoke(app, args)
    assert (
        table.exit_code == 0 and "holt_winters" in table.stdout and "seasonal_naive" in table.stdout
    )


def test_a_series_from_the_history(tmp_path: Path) -> None:
    """`--region` reads the history (here the store itself: no worker runs on this port)."""
    from infra.broker import free_port
    from infra.config import load_config
    from infra.store import open_store
    from infra.store import samples as S
    from infra.store.rows import RowContext, to_rows

    cfg = load_config(env={}, data_dir=str(tmp_path / "data"))
    toml = tmp_path / "gpuflow.toml"
    toml.write_text(f'data_dir = "{cfg.data_dir}"\n[worker]\nweb_port = {free_port()}\n')
    now = int(__import__("time").time()) // 300 * 300
    rows = []
    for t in range(now - 3 * 86_400, now, 300):  # three days, one summary per 5 minutes
        busy = 4 + (t // 3600) % 4  # a 4-hour cycle: 4, 5, 6, 7 GPUs busy
        record = S.region_summary("eu", t * 1000, total={"H100": 8}, free={"H100": 8 - busy})
        rows.extend(to_rows("RegionSummary", record, RowContext())[1])
    with open_store(cfg) as store:
        store.insert_rows("region_state", rows)
    args = [
        "forecast",
        "--region",
        "eu",
        "--series",
        "gpus_in_use",
        "--step",
        "3600",
        "--days",
        "3",
        "--model",
        "seasonal_naive",
        "--horizons",
        "3",
        "--json",
        "--config",
        str(toml),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "gpus_in_use/eu/*: 72 points every 3600 s" in result.stderr
    forecast = json.loads(result.stdout)
    assert len(forecast) == 3
    for row in forecast:  # the same hour a day earlier: its place in the 4-hour cycle
        assert row["point"] == 4 + ((row["ts"] - 86_400) // 3600) % 4
    missing = runner.invoke(app, [*args[:2], "mars", *args[3:]])
    assert missing.exit_code == 2 and "no gpus_in_use history for mars/*" in missing.output


def test_a_services_request_rate_from_the_history(tmp_path: Path) -> None:
    """`--service` reads a service's stored rate (ServiceLoad summed over zones per minute)."""
    from infra.broker import free_port
    from infra.config import load_config
    from infra.store import open_store
    from infra.store.rows import RowContext, to_rows

    cfg = load_config(env={}, data_dir=str(tmp_path / "data"))
    toml = tmp_path / "gpuflow.toml"
    toml.write_text(f'data_dir = "{cfg.data_dir}"\n[worker]\nweb_port = {free_port()}\n')
    now = int(__import__("time").time()) // 60 * 60
    rows = []
    for t in range(now - 3 * 3600, now, 60):  # three hours, each zone reporting every minute
        for zone, rps in (("z1", 10.0 + (t // 60) % 3), ("z2", 5.0)):
            load = {"event_id": f"l-{zone}-{t}", "ts": t * 1000, "schema": 1,
                    "service": "chat", "zone": zone, "window_s": 60, "requests_per_s": rps,
                    "p99_ms": None}  # fmt: skip
            rows.extend(to_rows("ServiceLoad", load, RowContext())[1])
    with open_store(cfg) as store:
        store.insert_rows("service_load", rows)
    args = ["forecast", "--series", "service_requests_per_s", "--step", "60", "--days", "0.125",
            "--model", "seasonal_naive", "--season", "3", "--horizons", "3", "--json",
            "--config", str(toml)]  # fmt: skip
    result = runner.invoke(app, [*args, "--service", "chat"])
    assert result.exit_code == 0, result.output
    assert "service_requests_per_s/chat/*: 180 points every 60 s" in result.stderr
    forecast = json.loads(result.stdout)
    assert len(forecast) == 3
    for row in forecast:  # the minute three before: z1's place in its 3-minute cycle, plus z2
        assert row["point"] == 15.0 + ((row["ts"] - 180) // 60) % 3
    missing = runner.invoke(app, args)  # no --service: one line naming it
    assert missing.exit_code == 2 and "--service is required" in missing.output


def test_the_command_scores_the_selection_the_library_does(tmp_path: Path) -> None:
    """`--backtest --json` is `forecast.backtest` with its default selection, row for row."""
    from forecast import BacktestConfig, backtest, build, read_series_csv

    csv = _csv(tmp_path, days=12)
    names = ("seasonal_naive", "holt_winters", "mstl", "lag_ridge")
    args = ["forecast", "--series-csv", str(csv), "--backtest", "--json", "--horizons", "1,24"]
    result = runner.invoke(app, [*args, "--models", ",".join(names)])
    assert result.exit_code == 0, result.output
    got = {(r["model"], r["horizon_steps"]): r for r in json.loads(result.stdout)}
    expected = backtest(
        read_series_csv(csv), {n: build(n) for n in names}, BacktestConfig(horizons=(1, 24))
    )
    assert len(got) == len(expected.rows) == 2 * (len(names) + 3)
    for row in expected.rows:
        assert got[(row.model, row.horizon_steps)] == row.as_json()
