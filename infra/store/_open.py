"""Opening the store: the client for the configured DSN, its database, pending migrations.

`chdb://PATH` opens the in-process engine on a directory (one process at a time);
`http(s)://` a server. A failure to open is one line with the DSN redacted.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import clickhouse_connect

from infra.config import Config
from infra.store._client import Store, redact_dsn
from infra.store.errors import StoreError
from infra.store.migrations import apply_migrations

__all__ = ["DEFAULT_DATABASE", "open_store"]

log = logging.getLogger(__name__)

DEFAULT_DATABASE = "gpuflow"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _database_for(dsn: str, database: str | None) -> str:
    if database:
        name = database
    elif dsn.startswith(("http://", "https://")) and urlparse(dsn).path.strip("/"):
        name = urlparse(dsn).path.strip("/").split("/")[0]
    else:
        name = DEFAULT_DATABASE
    if not _IDENT.match(name):
        raise StoreError(f"bad database name {name!r}")
    return name


def _client_for(dsn: str, user: str, password: str) -> Any:
    kwargs: dict[str, Any] = {}
    if not dsn.startswith("chdb:"):
        kwargs["database"] = "default"  # ours may not exist yet
        scheme = urlparse(dsn).scheme
        if scheme in ("http", "https"):  # the client infers TLS from the port only
            kwargs["interface"] = scheme
        if user:
            kwargs["username"] = user
        if password:
            kwargs["password"] = password
    try:
        return clickhouse_connect.get_client(dsn=dsn, **kwargs)
    except Exception as exc:  # connection, auth, or a chdb directory held by another process
        text = str(exc).replace(password, "***") if password else str(exc)
        hint = (
            (
                " (only one process may open a chdb directory: is the worker running "
                "without its web server?)"
            )
            if dsn.startswith("chdb:")
            else ""
        )
        raise StoreError(
            f"cannot open store {redact_dsn(dsn)}: {text.splitlines()[0]}{hint}"
        ) from None


def open_store(config: Config, *, database: str | None = None, migrate: bool = True) -> Store:
    """Open the configured store, create its database and apply pending migrations."""
    dsn = config.store_dsn
    if dsn.startswith("chdb:"):
        Path(urlparse(dsn).path).mkdir(parents=True, exist_ok=True)
    name = _database_for(dsn, database)
    client = _client_for(dsn, config.store.user, config.store.password)
    store = Store(client, name, dsn)
    try:
        store.command(f"CREATE DATABASE IF NOT EXISTS {name}")  # name checked by _IDENT
        client.database = name
        if migrate:
            apply_migrations(store)
    except BaseException:
        store.close()
        raise
    log.info("store open dsn=%s database=%s", redact_dsn(dsn), name)
    return store
