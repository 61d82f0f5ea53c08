"""`gpuflow forecast`: fit and show a series' forecast; `--backtest` scores the forecasters.

The series comes from the history (`--region`, or `--service` for a service's request rate,
`--series`, `--gpu-model`, `--step`, `--days`; through the running worker, or the store when
none runs) or from any `ts,value` CSV
(`--series-csv`: epoch seconds or ISO-8601, any regular interval, inferred). `--model auto`
(the default) shows the model a rolling-origin backtest chooses on earlier windows, the one
the forecast processor would publish, with the seasonal-naive baseline beside it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from forecast import (
    BASELINE,
    FILLS,
    MODELS,
    SELECTED,
    BacktestConfig,
    BacktestResult,
    FitContext,
    Forecast,
    ForecastError,
    Series,
    backtest,
    build,
    read_series_csv,
    season_length,
)
from forecast.plots import plot_forecast
from gpuflow.commands.common import fail
from gpuflow.commands.sql import run_query
from infra.config import load_config
from infra.errors import ConfigError, StoreError
from infra.store.series import SERIES, fetch_series

__all__ = ["forecast"]

AUTO = "auto"
_MODEL_ARGS = ("country",)  # forecasters that take the holiday country


def _ints(text: str, option: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise fail(f"{option}: expected steps like 1,24, got {text!r}") from None
    if not values or min(values) < 1:
        raise fail(f"{option}: every horizon must be >= 1 step, got {text!r}")
    return tuple(sorted(set(values)))


def _models(names: str, country: str, lstm_epochs: int) -> dict[str, Any]:
    out = {}
    for name in (n.strip() for n in names.split(",") if n.strip()):
        if name not in MODELS:
            raise fail(f"--models: unknown forecaster {name!r} (known: {', '.join(MODELS)})")
        kwargs: dict[str, Any] = {"country": country} if name in ("lstm", "prophet") else {}
        if name == "lstm":
            kwargs["epochs"] = lstm_epochs
        try:
            out[name] = build(name, **kwargs)
        except ValueError as exc:
            raise fail(f"--country: {exc}") from None
    if BASELINE not in out:
        out = {BASELINE: build(BASELINE), **out}  # the baseline is always beside
    return out


def _from_history(
    whose: tuple[str, str],
    kind: str,
    gpu_model: str,
    step_s: int,
    days: float,
    config: Path | None,
    data_dir: Path | None,
) -> Series:
    """The stored series of `whose` = (region, service): a service's kind is read by service
    (its model is '*'), the others by region."""
    if kind not in SERIES:
        raise fail(f"--series: unknown series {kind!r} (known: {', '.join(SERIES)})")
    by = SERIES[kind].by
    region, service = whose
    if by == "service" and not service:
        raise fail(f"--service is required for --series {kind}")
    if by != "service" and not region:
        raise fail("--region is required without --series-csv")
    key, gpu_model = (service, "*") if by == "service" else (region, gpu_model)
    try:
        cfg = load_config(config, None, **({"data_dir": str(data_dir)} if data_dir else {}))
        until = int(time.time())
        found = fetch_series(
            lambda sql, params: run_query(cfg, sql, params),
            kind,
            since_s=until - int(days * 86_400),
            until_s=until,
            step_s=step_s,
            region=region,
            service=service,
        )
    except (StoreError, ConfigError) as exc:
        raise fail(str(exc)) from None
    series = found.get((key, gpu_model))
    if series is None:
        have = ", ".join(sorted(f"{r}/{m}" for r, m in found)) or "none"
        raise fail(f"no {kind} history for {key}/{gpu_model} in {days:g} days (have: {have})")
    return series


def _progress(err: Console, quiet: bool) -> Progress:
    count = TextColumn("{task.completed}/{task.total}")
    columns = (TextColumn("{task.description:>14}"), BarColumn(), count, TimeElapsedColumn())
    return Progress(*columns, console=err, disable=quiet, transient=True)


def _run_backtest(
    series: Series, models: dict[str, Any], config: BacktestConfig, err: Console, quiet: bool
) -> BacktestResult:
    with _progress(err, quiet) as bar:
        tasks: dict[str, Any] = {}

        def tick(name: str, done: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=total)
            bar.update(tasks[name], completed=done)

        return backtest(series, models, config, progress=tick)


def _score_table(result: BacktestResult) -> Table:
    table = Table(title="rolling-origin backtest (selection scored out of sample)")
    for name in ("model", "horizon", "sMAPE %", "MASE", "coverage", "origins"):
        table.add_column(name, justify="left" if name == "model" else "right")
    for row in result.rows:
        style = "bold" if row.model == SELECTED else None
        table.add_row(
            row.model,
            str(row.horizon_steps),
            f"{row.smape:.2f}",
            f"{row.mase:.3f}",
            f"{row.coverage:.2f}",
            str(row.origins),
            style=style,
        )
    return table


def _forecast_table(chosen: Forecast, baseline: Forecast | None) -> Table:
    """The chosen model's points and interval, the baseline's points beside them."""
    table = Table(title=f"forecast: {chosen.model} ({round(100 * chosen.level)}% interval)")
    for name in ("ts (UTC)", "point", "lower", "upper"):
        table.add_column(name, justify="right")
    if baseline is not None:
        table.add_column(f"{baseline.model}", justify="right")
    for i, ts in enumerate(chosen.timestamps()):
        cells = [
            _iso(int(ts)),
            *(f"{v[i]:.3f}" for v in (chosen.point, chosen.lower, chosen.upper)),
        ]
        if baseline is not None:
            cells.append(f"{baseline.point[i]:.3f}")
        table.add_row(*cells)
    return table


def _iso(ts: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _fit(series: Series, model: Any, steps: int, level: float, season: int) -> Forecast:
    try:
        return model.fit(series, FitContext(steps, season, level)).forecast(steps)
    except ForecastError as exc:
        raise fail(str(exc)) from None


def forecast(
    series_csv: Annotated[
        Path | None, typer.Option("--series-csv", help="A ts,value CSV (epoch s or ISO-8601).")
    ] = None,
    region: Annotated[str, typer.Option(help="Region, for a series from the history.")] = "",
    service: Annotated[
        str, typer.Option(help="Service, for service_requests_per_s from the history.")
    ] = "",
    series: Annotated[str, typer.Option("--series", help="History series kind.")] = "gpus_in_use",
    gpu_model: Annotated[str, typer.Option("--gpu-model", help="GPU model, or '*'.")] = "*",
    step: Annotated[int, typer.Option("--step", help="History interval, seconds.")] = 3600,
    days: Annotated[float, typer.Option(help="History to read, days.")] = 28.0,
    horizons: Annotated[
        str, typer.Option(help="Steps ahead, e.g. 1,24 (default: 1 and one season).")
    ] = "",
    models: Annotated[str, typer.Option(help="Forecasters to run.")] = ",".join(MODELS),
    model: Annotated[str, typer.Option(help="Model to forecast with, or auto.")] = AUTO,
    run_backtest: Annotated[bool, typer.Option("--backtest", help="Score the models.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON rows.")] = False,
    plot: Annotated[Path | None, typer.Option(help="Write a PNG of the forecast.")] = None,
    level: Annotated[float, typer.Option(help="Interval coverage, 0..1.")] = 0.8,
    country: Annotated[str, typer.Option(help="Holiday calendar country.")] = "CN",
    lstm_epochs: Annotated[int, typer.Option(help="LSTM training epochs (at most).")] = 60,
    season: Annotated[int | None, typer.Option(help="Steps per season (default: a day).")] = None,
    fill: Annotated[str, typer.Option(help=f"Gap filling: {', '.join(FILLS)}.")] = "interpolate",
    config: Annotated[Path | None, typer.Option("--config", help="gpuflow.toml")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Where `gpuflow up` runs.")] = None,
) -> None:
    """Fit and show a series' forecast; --backtest scores every forecaster on it."""
    err = Console(stderr=True)
    _check(level, fill, model, lstm_epochs)
    candidates = _models(models, country, lstm_epochs)
    if series_csv is not None:
        try:
            data = read_series_csv(series_csv, fill=fill)
        except ForecastError as exc:
            raise fail(str(exc)) from None
    else:
        data = _from_history((region, service), series, gpu_model, step, days, config, data_dir)
    m = season or season_length(data.step_s)
    steps = _ints(horizons, "--horizons") if horizons else tuple(sorted({1, max(m, 1)}))
    err.print(
        f"{data.name}: {len(data)} points every {data.step_s} s from {_iso(data.start_s)}; "
        f"{int(data.filled.sum())} filled in {data.gaps} gaps; season {m} steps",
        highlight=False,
        soft_wrap=True,
    )
    result = None
    if run_backtest or model == AUTO:
        try:
            result = _run_backtest(data, candidates, BacktestConfig(steps, level, m), err, as_json)
        except ForecastError as exc:
            raise fail(str(exc)) from None
        for note in result.notes:
            err.print(f"note: {note}", highlight=False, soft_wrap=True)
    if run_backtest and result is not None:
        _show_backtest(result, as_json, err)
    if run_backtest and not plot:
        return
    if model != AUTO:
        candidates |= _models(model, country, lstm_epochs)
    name = (model if model != AUTO else result.path_choice.model if result else None) or BASELINE
    shown = [
        _fit(data, candidates[n], max(steps), level, m) for n in dict.fromkeys([name, BASELINE])
    ]
    if plot:
        err.print(f"wrote {plot_forecast(data, shown, plot)}", highlight=False)
    if not run_backtest:
        _show_forecast(shown, as_json)


def _check(level: float, fill: str, model: str, lstm_epochs: int) -> None:
    if not 0.0 < level < 1.0:
        raise fail(f"--level: must be in (0, 1), got {level}")
    if fill not in FILLS:
        raise fail(f"--fill: must be one of {', '.join(FILLS)}, got {fill!r}")
    if model != AUTO and model not in MODELS:
        raise fail(f"--model: unknown forecaster {model!r} (auto, {', '.join(MODELS)})")
    if lstm_epochs < 1:
        raise fail(f"--lstm-epochs: must be >= 1, got {lstm_epochs}")


def _show_forecast(shown: list[Forecast], as_json: bool) -> None:
    if not as_json:
        Console().print(_forecast_table(shown[0], shown[1] if len(shown) > 1 else None))
        return
    rows = [
        {
            "model": f.model,
            "ts": int(ts),
            "point": float(f.point[i]),
            "lower": float(f.lower[i]),
            "upper": float(f.upper[i]),
        }
        for f in shown
        for i, ts in enumerate(f.timestamps())
    ]
    typer.echo(json.dumps(rows, indent=1))


def _show_backtest(result: BacktestResult, as_json: bool, err: Console) -> None:
    if as_json:
        typer.echo(json.dumps([row.as_json() for row in result.rows], indent=1))
        return
    Console().print(_score_table(result))
    for choice in result.choices:
        record = ", ".join(f"{m} {v:.3f}" for m, v in sorted(choice.window_mase.items()))
        err.print(
            f"{choice.horizon_steps} step(s) ahead: chosen {choice.model or 'none yet'} "
            f"(MASE over the last {choice.window_origins} origins: {record})",
            highlight=False,
        )
