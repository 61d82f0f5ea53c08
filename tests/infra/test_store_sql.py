"""`gpuflow sql` and the worker's /sql/ page, against the real chDB engine (no worker mocks)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import faust
import pytest
import typer
from aiohttp.test_utils import TestServer
from faust.web.drivers.aiohttp import Web as AiohttpWeb
from typer.testing import CliRunner

from gpuflow.commands.sql import run_query, sql
from infra.config import Config, load_config
from infra.store import QueryResult, ReadOnlyError, Store, open_store
from streams.history.sql import register_sql_page, run_request


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cfg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Config]:
    tmp = tmp_path_factory.mktemp("sql")
    base = load_config(env={}, data_dir=str(tmp))
    config = dataclasses.replace(
        base, worker=dataclasses.replace(base.worker, web_port=_free_port())
    )  # nothing listens: the CLI opens the store
    with open_store(config) as store:
        store.query(
            "CREATE TABLE IF NOT EXISTS t (x UInt32, s String) ENGINE = MergeTree ORDER BY x",
            write=True,
        )
        store.query("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')", write=True)
    yield config


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("sql")(sql)

    @app.command("version")
    def version() -> None:  # a second command keeps `sql` a named sub-command
        pass

    return app


def _toml(cfg: Config, tmp: Path) -> Path:
    path = tmp / "gpuflow.toml"
    path.write_text(f'data_dir = "{cfg.data_dir}"\n[worker]\nweb_port = {cfg.worker.web_port}\n')
    return path


def test_cli_reads_the_store_when_no_worker_runs(cfg: Config, tmp_path: Path) -> None:
    runner = CliRunner()
    args = [
        "sql",
        "SELECT x, s FROM t WHERE x >= {lo:UInt32} ORDER BY x",
        "--param",
        "lo=2",
        "--config",
        str(_toml(cfg, tmp_path)),
    ]
    out = runner.invoke(_cli(), [*args, "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == [{"x": 2, "s": "b"}, {"x": 3, "s": "c"}]
    out = runner.invoke(_cli(), [*args, "--format", "csv"])
    assert out.stdout == "x,s\n2,b\n3,c\n"
    out = runner.invoke(_cli(), args)
    assert out.exit_code == 0 and "│ 2 │ b │" in out.stdout.replace("  ", " ")


def test_cli_errors_are_one_line(cfg: Config, tmp_path: Path) -> None:
    runner = CliRunner()
    conf = ["--config", str(_toml(cfg, tmp_path))]
    for query in ("SELECT * FROM nowhere", "DROP TABLE t", "SELEC 1"):
        out = runner.invoke(_cli(), ["sql", query, *conf])
        assert out.exit_code == 1
        assert out.output.startswith("error:") and "Traceback" not in out.output
    out = runner.invoke(_cli(), ["sql", "SELECT 1", "--param", "oops", *conf])
    assert out.exit_code == 2


def test_write_needs_the_flag(cfg: Config) -> None:
    with pytest.raises(ReadOnlyError):
        run_query(cfg, "INSERT INTO t VALUES (9, 'z')", {})
    run_query(cfg, "INSERT INTO t VALUES (9, 'z')", {}, write=True)
    assert run_query(cfg, "SELECT count() FROM t WHERE x = 9", {}).scalar() == 1
    run_query(cfg, "ALTER TABLE t DELETE WHERE x = 9 SETTINGS mutations_sync = 1", {}, write=True)


def test_run_request_validates_the_body(cfg: Config) -> None:
    with open_store(cfg, migrate=False) as store:
        assert run_request(store, {"nope": 1})[0] == 400
        assert run_request(store, {"query": "SELECT 1", "params": [1]})[0] == 400
        status, answer = run_request(store, {"query": "DROP TABLE t"})
        assert status == 400 and "read-only" in answer["error"]
        status, answer = run_request(store, {"query": "SELECT {n:UInt8} AS n", "params": {"n": 7}})
        assert status == 200 and answer["rows"] == [[7]]


def test_cli_goes_through_the_worker_page(cfg: Config) -> None:
    """A real Faust app's web view, served by aiohttp; the CLI posts to it."""

    async def scenario(store: Store) -> tuple[QueryResult, str]:
        app = faust.App(
            f"sqltest-{cfg.worker.web_port}", broker="kafka://127.0.0.1:9", web_enabled=True
        )
        register_sql_page(app, lambda: store)
        web = cast(AiohttpWeb, app.web)  # the driver faust.App picks by default
        server = TestServer(web.web_app, host="127.0.0.1", port=cfg.worker.web_port)
        await server.start_server()
        loop = asyncio.get_running_loop()
        try:
            ok = await loop.run_in_executor(None, run_query, cfg, "SELECT sum(x) AS s FROM t", {})
            try:
                await loop.run_in_executor(None, run_query, cfg, "DROP TABLE t", {})
                refused = ""
            except ReadOnlyError:
                refused = "read-only"
            except Exception as exc:  # the worker's refusal arrives as a StoreError line
                refused = str(exc)
        finally:
            await server.close()
        return ok, refused

    with open_store(cfg, migrate=False) as store:
        result, refused = asyncio.run(scenario(store))
    assert result.columns == ("s",) and result.scalar() == 6
    assert "read-only" in refused
