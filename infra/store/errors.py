"""Errors of the history store (children of infra.errors.StoreError).

StoreError                     ClickHouse refused or failed
├── QueryError                 a query is malformed or refers to unknown things
├── RowError                   a row does not fit its table's columns (bad data, not a fault)
└── ReadOnlyError              a statement that writes was sent without write=True
"""

from __future__ import annotations

from infra.errors import StoreError

__all__ = ["QueryError", "ReadOnlyError", "RowError", "StoreError"]


class QueryError(StoreError):
    """A query is malformed or refers to unknown tables, columns or parameters."""


class ReadOnlyError(StoreError):
    """A statement that writes was sent without write=True."""


class RowError(StoreError):
    """A row does not fit its table's columns: missing, mistyped or out of range."""
