"""Versioned schema migrations: `infra/ddl/NNN_name.sql`, applied in order, recorded once.

Each file is a list of `;`-terminated statements that are themselves idempotent (IF NOT
EXISTS), so a migration interrupted half-way is simply applied again at the next start.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

from infra.store._client import Store
from infra.store.errors import StoreError

__all__ = [
    "DDL_DIR",
    "Migration",
    "applied_versions",
    "apply_migrations",
    "load_migrations",
    "statements",
]

log = logging.getLogger(__name__)

DDL_DIR = Path(__file__).resolve().parents[1] / "ddl"  # package data of infra

_FILE = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")
_LEDGER = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version UInt32, name String, checksum String, applied_at DateTime64(3, 'UTC')
) ENGINE = ReplacingMergeTree ORDER BY version"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()[:16]


def statements(sql: str) -> list[str]:
    """Split a DDL file at `;` line ends, dropping comment-only chunks."""
    out = []
    for chunk in re.split(r";\s*(?:\n|$)", sql):
        body = "\n".join(ln for ln in chunk.splitlines() if not ln.strip().startswith("--"))
        if body.strip():
            out.append(body.strip())
    return out


def load_migrations() -> list[Migration]:
    """Every infra/ddl/NNN_name.sql, in version order."""
    found = []
    for entry in DDL_DIR.iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text()))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise StoreError(f"duplicate migration versions in infra/ddl: {versions}")
    return found


def applied_versions(store: Store) -> set[int]:
    store.command(_LEDGER)
    res = store.query("SELECT DISTINCT version FROM schema_migrations")
    return {int(v) for (v,) in res.rows}


def apply_migrations(store: Store, migrations: list[Migration] | None = None) -> list[int]:
    """Apply pending migrations; return the versions applied now (empty when up to date)."""
    done = applied_versions(store)
    applied = []
    for mig in migrations if migrations is not None else load_migrations():
        if mig.version in done:
            continue
        for stmt in statements(mig.sql):
            store.command(stmt)
        store.insert_rows(
            "schema_migrations",
            [
                {
                    "version": mig.version,
                    "name": mig.name,
                    "checksum": mig.checksum,
                    "applied_at": int(time.time() * 1000),
                }
            ],
        )
        log.info("migration applied version=%03d name=%s", mig.version, mig.name)
        applied.append(mig.version)
    return applied
