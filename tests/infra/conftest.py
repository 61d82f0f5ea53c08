"""Fixtures of the infra tests: a store on the real chDB engine, one per test module."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from infra.config import load_config
from infra.store import Store, open_store
from infra.store.rows import RowContext, to_rows

Events = list[tuple[str, dict[str, Any]]]  # (event name, Avro record) in the order they arrive


@pytest.fixture(scope="module")
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    """One chDB directory for the module (opening one costs ~0.6 s; one per process at a time)."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    cfg = load_config(env={}, data_dir=str(tmp_path_factory.mktemp(name)))
    s = open_store(cfg, database=f"{name}_test")
    yield s
    s.close()


@pytest.fixture(scope="module")
def insert(store: Store) -> Callable[[Events], None]:
    """Insert events into the module's store as the history sink does: rows, one context."""

    def _insert(events: Events) -> None:
        ctx = RowContext()
        for name, record in events:
            table, rows = to_rows(name, record, ctx)
            store.insert_rows(table, rows)

    return _insert
