"""ClickHouse history: the store client, migrations, event -> row conversion and batching."""

from __future__ import annotations

from infra.store._client import QueryResult, Store, is_read_only
from infra.store._open import DEFAULT_DATABASE, open_store
from infra.store.errors import QueryError, ReadOnlyError, RowError, StoreError
from infra.store.migrations import applied_versions, apply_migrations, load_migrations

__all__ = [
    "DEFAULT_DATABASE",
    "QueryError",
    "QueryResult",
    "ReadOnlyError",
    "RowError",
    "Store",
    "StoreError",
    "applied_versions",
    "apply_migrations",
    "is_read_only",
    "load_migrations",
    "open_store",
]
