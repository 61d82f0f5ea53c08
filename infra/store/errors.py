"""Errors of the history store (children of infra.errors.StoreError).

    StoreError                     ClickHouse refused or failed
    ├── QueryError                 a query is malformed or refers to unknown things
    └── ReadOnlyError              a statement that writes was sent without write=True
"""

from __future__ import annotations

from infra.errors import StoreError

__all__ = ["QueryError", "ReadOnlyError", "StoreError"]


class QueryError(StoreError):
    """A query is malformed or refers to unknown tables, columns or parameters."""


class ReadOnlyError(StoreError):
    """A statement that writes was sent without write=True."""
