"""The worker's ledger saved between runs, so start-up reads the logs' tails, not their history.

`gpuflow-data/ledger/<app_id>.pickle` holds a `streams.ledger.Ledger`: what the decision,
job-event, migration and routed logs said, folded, pruned to live jobs plus the horizon, and
the last record read in each partition. The worker saves it after each rebuild and every
`worker.ledger_snapshot_s`; at start it loads it and reads only what came after. The file is
written whole (in chunks of a few thousand entries, so saving and loading never hold the GIL
for long) and renamed into place, so a crash leaves the previous one. A file that cannot be
read (another version, damaged) is ignored and the logs are read from the start, as they are
when the saved positions no longer match the broker's log (`ledger.LogReset`).
"""

from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path
from typing import Any

from streams.ledger import Ledger

__all__ = ["load_ledger", "save_ledger"]

log = logging.getLogger(__name__)

_FORMAT = 4  # 3: a decision's metadata and bytes in one entry; 4: routed jobs' times
_CHUNK = 4096  # entries per pickle: each holds the GIL briefly, so the event loop keeps going
_END = "end"
_PROTOCOL = pickle.HIGHEST_PROTOCOL


def save_ledger(ledger: Ledger, path: Path) -> int:
    """Write `ledger` to `path` atomically, in chunks; the bytes written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        pickle.dump({"format": _FORMAT, "positions": ledger.positions}, f, _PROTOCOL)
        for name, table in vars(ledger).items():
            if name == "positions":
                continue
            items = list(table.items())
            for i in range(0, len(items), _CHUNK):
                pickle.dump((name, items[i : i + _CHUNK]), f, _PROTOCOL)
        pickle.dump((_END, []), f, _PROTOCOL)
        f.flush()
        os.fsync(f.fileno())
        size = f.tell()
    os.replace(tmp, path)
    return size


def load_ledger(path: Path) -> Ledger:
    """The ledger saved at `path`; an empty one when there is none or it cannot be used."""
    try:
        with open(path, "rb") as f:
            head = pickle.load(f)  # our own file, in our own data directory
            if head["format"] != _FORMAT:
                raise ValueError(f"format {head['format']}, this worker reads {_FORMAT}")
            tables: dict[str, dict[Any, Any]] = {"positions": head["positions"]}
            while True:
                name, items = pickle.load(f)  # a truncated file ends in EOFError
                if name == _END:
                    break
                tables.setdefault(name, {}).update(items)
        return Ledger(**tables)
    except FileNotFoundError:
        return Ledger()
    except Exception as exc:  # damaged, truncated, another version's fields
        log.warning("ledger snapshot %s not used (%s): reading the logs from the start", path, exc)
        return Ledger()
