"""`gpuflow sql "SELECT ..."`: ask the history.

While the worker runs it owns the chdb directory, so the query goes to its `/sql/` page;
otherwise the store is opened here. Read-only unless --write. Parameters are bound by
ClickHouse (`{name:Type}` in the query, `--param name=value`), never formatted into the text.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.table import Table

from gpuflow.commands.common import worker_url
from infra.config import Config, load_config
from infra.errors import ConfigError, StoreError
from infra.store import QueryResult, open_store

__all__ = ["parse_params", "render", "run_query", "sql"]

FORMATS = ("table", "csv", "json")


def parse_params(items: list[str]) -> dict[str, str]:
    """`name=value` pairs; ClickHouse converts each value to the {name:Type} it fills."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise typer.BadParameter(f"--param {item!r}: expected name=value")
        out[name.strip()] = value
    return out


def _via_worker(url: str, body: Mapping[str, Any]) -> QueryResult | None:
    """The answer of the worker's `/sql/` page at `url`, or None when no worker is listening."""
    try:
        resp = httpx.post(url, json=dict(body), timeout=httpx.Timeout(300.0, connect=1.0))
    except (httpx.ConnectError, httpx.ConnectTimeout):
        return None
    except httpx.HTTPError as exc:
        raise StoreError(f"worker at {url}: {exc}") from exc
    if resp.status_code == 404:
        return None  # a worker without the page: try the store directly
    try:
        data = resp.json()
    except ValueError:
        raise StoreError(f"worker at {url} answered {resp.status_code}") from None
    if resp.status_code != 200:
        raise StoreError(str(data.get("error", data)))
    return QueryResult.from_json(data)


def run_query(
    config: Config,
    query: str,
    params: Mapping[str, Any],
    *,
    write: bool = False,
    base: str | None = None,
) -> QueryResult:
    """Through the running worker (at `base`, else the configured one), else the store."""
    body = {"query": query, "params": dict(params), "write": write}
    result = _via_worker(f"{(base or worker_url(config)).rstrip('/')}/sql/", body)
    if result is not None:
        return result
    with open_store(config) as store:
        return store.query(query, params, write=write)


def render(result: QueryResult, fmt: str) -> str:
    """CSV or JSON text; the table format is printed by rich in `sql`."""
    if fmt == "json":
        return json.dumps(
            [dict(zip(result.columns, row, strict=True)) for row in result.to_json()["rows"]],
            indent=1,
        )
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(result.columns)
    writer.writerows(result.to_json()["rows"])
    return buf.getvalue()


def _table(result: QueryResult) -> Table:
    table = Table(show_lines=False)
    for name, kind in zip(result.columns, result.types, strict=True):
        numeric = kind.startswith(("UInt", "Int", "Float", "Decimal", "Nullable(Float"))
        table.add_column(name, justify="right" if numeric else "left")
    for row in result.to_json()["rows"]:
        table.add_row(*("" if v is None else str(v) for v in row))
    return table


def sql(
    query: Annotated[str, typer.Argument(help='SQL to run, e.g. "SELECT count() FROM ..."')],
    format: Annotated[str, typer.Option("--format", "-f", help="table, csv or json")] = "table",
    write: Annotated[
        bool, typer.Option("--write", help="allow statements that change data")
    ] = False,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="name=value for {name:Type} in the query (repeatable)"),
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="gpuflow.toml")] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="Where `gpuflow up` runs (default: configured).")
    ] = None,
) -> None:
    """Query the history in ClickHouse SQL (read-only unless --write)."""
    err = Console(stderr=True)
    if format not in FORMATS:
        err.print(f"[red]error:[/] --format must be one of {', '.join(FORMATS)}")
        raise typer.Exit(2)
    try:
        overrides: dict[str, Any] = {"data_dir": str(data_dir)} if data_dir else {}
        cfg = load_config(config, None, **overrides)
        result = run_query(cfg, query, parse_params(param or []), write=write)
    except (StoreError, ConfigError) as exc:
        err.print(f"[red]error:[/] {exc}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    if format == "table":
        Console().print(_table(result))
    else:
        typer.echo(render(result, format), nl=format == "json")
