"""The worker's `/sql/` page: the CLI posts queries here while the worker owns the store.

POST /sql/ with JSON {"query": str, "params": {name: value}, "write": bool}; the answer is
{"columns", "types", "rows"} or {"error": "<one line>"} with status 400.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from faust.web import Request, Response, View

from infra.store import Store, StoreError

__all__ = [
    "SQL_PATH",
    "TICK_PATH",
    "register_sql_page",
    "register_sql_proxy",
    "register_tick_page",
    "run_request",
]

TICK_PATH = "/tick/"

log = logging.getLogger(__name__)

SQL_PATH = "/sql/"


def run_request(store: Store, body: Any) -> tuple[int, dict[str, Any]]:
    """Validate one request body and run it; (HTTP status, JSON answer)."""
    if not isinstance(body, Mapping) or not isinstance(body.get("query"), str):
        return 400, {"error": 'expected JSON {"query": "SELECT ...", "params": {...}}'}
    params = body.get("params") or {}
    if not isinstance(params, Mapping):
        return 400, {"error": "params must be an object of name: value"}
    try:
        result = store.query(body["query"], params, write=bool(body.get("write", False)))
    except StoreError as exc:
        return 400, {"error": str(exc)}
    return 200, result.to_json()


def register_sql_page(app: Any, get_store: Callable[[], Store]) -> None:
    """Add POST /sql/ to a Faust app; queries run off the event loop (chdb calls block)."""

    @app.page(SQL_PATH)
    class SqlPage(View):
        async def post(self, request: Request) -> Response:
            try:
                body = await request.json()
            except ValueError:
                return self.json({"error": "body is not JSON"}, status=400)
            loop = asyncio.get_running_loop()
            try:
                store = get_store()
            except StoreError as exc:
                return self.json({"error": str(exc)}, status=503)
            status, answer = await loop.run_in_executor(None, run_request, store, body)
            if status != 200:
                log.info("sql refused error=%s", answer.get("error"))
            return self.json(answer, status=status)


def register_sql_proxy(app: Any, url: str) -> None:
    """Add POST /sql/ to a Faust app, forwarding to the process that owns the store."""
    import httpx

    @app.page(SQL_PATH)
    class SqlProxy(View):
        async def post(self, request: Request) -> Response:
            body = await request.read()
            try:
                async with httpx.AsyncClient(timeout=300) as client:
                    answer = await client.post(
                        url, content=body, headers={"Content-Type": "application/json"}
                    )
            except httpx.HTTPError as exc:
                return self.json({"error": f"history store not reachable: {exc}"}, status=503)
            return self.json(answer.json(), status=answer.status_code)


def register_tick_page(app: Any, tick: Callable[[int], Awaitable[dict[str, Any]]]) -> None:
    """Add POST /tick/ {"ts": ms}: the scheduler's timer on demand, for a worker on event time
    (a replay drives it in lockstep instead of the wall-clock timer)."""

    @app.page(TICK_PATH)
    class TickPage(View):
        async def post(self, request: Request) -> Response:
            try:
                ts = int((await request.json())["ts"])
            except (ValueError, KeyError, TypeError):
                return self.json({"error": 'body must be {"ts": <ms>}'}, status=400)
            return self.json(await tick(ts))
