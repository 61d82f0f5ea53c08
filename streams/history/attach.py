"""The history sink run inside a Faust worker's process, as a service of its app (the worker
itself runs it in a child process instead, `streams.history.process`)."""

from __future__ import annotations

import asyncio
from typing import Any

from infra.config import Config
from streams.history.sink import HistorySink

__all__ = ["attach_history"]


def attach_history(app: Any, config: Config, *, sql_page: bool = True) -> HistorySink:
    """Run a HistorySink with a Faust app's worker, which then owns the store.

    The sink starts when the worker starts and stops (flush, commit, close) when it stops;
    with `sql_page`, POST /sql/ answers queries from the same store (streams.history.sql).
    """
    from mode import Service

    sink = HistorySink(config)

    class HistoryService(Service):
        async def on_start(self) -> None:
            await asyncio.get_running_loop().run_in_executor(None, sink.start)

        async def on_stop(self) -> None:
            await asyncio.get_running_loop().run_in_executor(None, sink.stop)

    app.service(HistoryService)
    if sql_page:
        from streams.history.sql import register_sql_page

        register_sql_page(app, lambda: sink.store)
    return sink
