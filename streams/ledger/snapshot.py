"""The worker's ledger saved between runs, so start-up reads the logs' tails, not their history.

`gpuflow-data/ledger/<app_id>.pickle` holds a `streams.ledger.ledger.Ledger`: what the decision,
job-event, migration and routed logs said, folded, pruned to live jobs plus the horizon, and
the last record read in each partition. The worker saves it after each rebuild and every
`worker.ledger_snapshot_s`; at start it loads it and reads only what came after. The file is
written whole (in chunks of a few thousand entries, so saving and loading never hold the GIL
for long) and renamed into place, so a crash leaves the previous one. A file that cannot be
read (another version, damaged) is ignored and the logs are read from the start, as they are
when the saved positions no longer match the broker's log (`ledger.LogReset`).

`LedgerKeeper` is the worker's side of it: where its file is, and the blocking steps (read and
decode at a rebuild, catch up, prune, save), which the worker runs in a thread; the periodic
save runs in a child process (`streams.ledger.save`), away from the worker's GIL and heap.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infra.config import Config, config_env
from schemas import Codec, DecodeError
from streams.ledger.ledger import Ledger

__all__ = ["LedgerKeeper", "load_ledger", "save_ledger"]

log = logging.getLogger(__name__)

_FORMAT = 5  # 4: routed jobs' times; 5: the source (cluster id, trimmed_ms)
_CHUNK = 4096  # entries per pickle: each holds the GIL briefly, so the event loop keeps going
_END = "end"
_PROTOCOL = pickle.HIGHEST_PROTOCOL
SAVE_TIMEOUT_S = 600.0  # a save child still running after this is stopped


def save_ledger(ledger: Ledger, path: Path) -> int:
    """Write `ledger` to `path` atomically, in chunks; the bytes written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
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
    except BaseException:  # a full disk, a save stopped half-way: leave no half file behind
        tmp.unlink(missing_ok=True)
        raise
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


class LedgerKeeper:
    """The worker's saved ledger (`path` None: nothing saved, the logs read whole each time)."""

    def __init__(self, config: Config, codec: Codec) -> None:
        self.config, self.codec = config, codec
        self.path = (
            config.data_dir / "ledger" / f"{config.worker.app_id}.pickle"
            if config.worker.ledger_snapshot_s > 0
            else None
        )
        self._saving: subprocess.Popen[bytes] | None = None  # the save child, while it runs
        self._stopped = False  # stop_saving stopped it: not a failure

    def save_apart(self, live: set[str], timeout_s: float = SAVE_TIMEOUT_S) -> bool:
        """Catch the saved ledger up and save it again in a child process
        (`streams.ledger.save`), so the fold neither holds this process's GIL nor grows its
        memory; blocks until it is done (run it in a thread). Whether it saved."""
        if self.path is None:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        live_path = self.path.with_name(f"{self.path.stem}.live.json")
        live_path.write_text(json.dumps(sorted(live)))
        env = {**os.environ, **config_env(self.config)}
        argv = [sys.executable, "-m", "streams.ledger.save", str(live_path)]
        self._stopped = False
        try:  # its output goes where the worker's goes: one log to read
            self._saving = child = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
        except OSError as exc:
            log.warning("ledger save not started error=%s", exc)
            return False
        try:
            code = child.wait(timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("ledger save took over %.0fs; stopped pid=%d", timeout_s, child.pid)
            child.kill()
            code = child.wait()
        finally:
            self._saving = None
        if self._stopped:
            log.info("ledger save stopped pid=%d", child.pid)
        elif code != 0:
            log.warning("ledger save failed exit=%d (the next interval tries again)", code)
        return code == 0

    def stop_saving(self) -> None:
        """Stop a save in progress (a rebuild saves anyway; the worker is stopping)."""
        child = self._saving
        if child is not None and child.poll() is None:
            self._stopped = True
            with contextlib.suppress(ProcessLookupError):
                child.terminate()

    def read(self) -> tuple[Ledger, dict[str, dict[str, Any]]]:
        """The caught-up ledger and its decisions, decoded (a saved one this codec cannot
        read, e.g. after the framing changed, is dropped and the logs read from the start)."""
        ledger = self.caught_up()
        try:
            return ledger, ledger.decisions(self.codec)
        except DecodeError as exc:
            log.warning("saved ledger not readable with this codec (%s): reading the logs", exc)
            ledger = Ledger()
            ledger.catch_up(self.config.kafka, self.codec)
            return ledger, ledger.decisions(self.codec)

    def caught_up(self, prune: Callable[[Ledger], int] | None = None) -> Ledger:
        """The saved ledger with what the logs gained since (pruned as it folds, if given)."""
        ledger = load_ledger(self.path) if self.path is not None else Ledger()
        ledger.catch_up(self.config.kafka, self.codec, prune=prune)
        return ledger

    def pruner(self, live: set[str], *, orphans: bool = True) -> Callable[[Ledger], int]:
        """Cuts a ledger to `live` jobs plus the worker's horizon, as of when it is called
        (`orphans=False` in the middle of a fold: see `Ledger.catch_up`)."""
        horizon_ms = int(self.config.worker.horizon_s * 1000)
        return lambda ledger: ledger.prune(
            int(time.time() * 1000), horizon_ms, live, orphans=orphans
        )

    def keep(self, ledger: Ledger, live: set[str]) -> None:
        """Prune `ledger` to live jobs plus the horizon and save it (when saving is on)."""
        if self.path is None:
            return
        pruned = self.pruner(live)(ledger)
        try:
            size = save_ledger(ledger, self.path)
        except OSError as exc:  # a full or read-only disk: the next start reads more, no more
            log.warning("ledger not saved path=%s error=%s", self.path, exc)
            return
        log.info("ledger saved jobs=%d pruned=%d bytes=%d", len(ledger.final), pruned, size)
