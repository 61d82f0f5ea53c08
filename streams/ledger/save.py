"""The worker's periodic ledger save, in a child process of its own.

A save folds a save interval of the four ledger logs (read, decode, fold, prune, pickle): a few
seconds of CPU at 100 jobs/s. In a thread of the worker it held the worker's GIL in long
stretches, so decisions waited (the soak's p99 jumped to 1.8-2.1 s at each 5-minute save) and
the fold's memory stepped the worker's RSS. Here it runs on another core, at a lower priority,
and its memory goes when it exits. The worker starts it from its timer (`LedgerKeeper.save_apart`)
and waits for it without blocking its loop; the child's log lines go to the worker's log.

    python -m streams.ledger.save LIVE   (started by the worker; LIVE: a JSON list of the job ids
                                          the worker still holds or has waiting)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path

from infra.config import load_config
from infra.process import die_with_parent
from schemas import make_codec
from streams.ledger.snapshot import LedgerKeeper

__all__ = ["main"]

log = logging.getLogger(__name__)

NICE = 10  # the worker's decisions come first on a busy box


def _stop(*_: object) -> None:
    raise SystemExit(1)  # unwinds: the half-written file is removed (`save_ledger`)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    die_with_parent()
    signal.signal(signal.SIGTERM, _stop)
    with contextlib.suppress(OSError):
        os.nice(NICE)
    live = set(json.loads(Path(args[0]).read_text()))
    config = load_config()
    keeper = LedgerKeeper(config, make_codec(config.kafka.schema_registry_url or None))
    try:  # pruned as it folds: a save interval of ended jobs never piles up in memory
        ledger = keeper.caught_up(keeper.pruner(live, orphans=False))
    except Exception as exc:  # the broker away, a stalled read: the next interval tries again
        log.warning("ledger not caught up for its snapshot error=%s", exc)
        raise SystemExit(2) from None
    keeper.keep(ledger, live)


if __name__ == "__main__":
    main()
