"""The worker re-serves the history child's metrics page: a late answer is replaced by the last
page (series do not vanish for one scrape), a refused one or a page too old reads as down."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from streams.web.metrics_page import ChildPage

PAGE = b"# TYPE gpuflow_history_up gauge\ngpuflow_history_up 1.0\n"


class Child:
    """A real HTTP server on loopback that answers `PAGE`, after `delay_s`."""

    def __init__(self) -> None:
        child = self
        self.delay_s = 0.0

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                time.sleep(child.delay_s)
                self.send_response(200)
                self.send_header("Content-Length", str(len(PAGE)))
                self.end_headers()
                self.wfile.write(PAGE)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def child() -> Iterator[Child]:
    c = Child()
    yield c
    c.delay_s = 0.0
    c.stop()


def read(page: ChildPage) -> bytes:
    return asyncio.run(page.read())


def test_a_prompt_page_is_served_with_its_age(child: Child) -> None:
    body = read(ChildPage(child.url))
    assert body.startswith(PAGE)
    assert b"gpuflow_history_page_age_seconds 0.0" in body


def test_a_late_page_is_replaced_by_the_last_one(child: Child) -> None:
    page = ChildPage(child.url, timeout_s=0.2, stale_s=60)
    read(page)
    child.delay_s = 1.0
    body = read(page)
    assert body.startswith(PAGE)  # the counters, late but true
    age = float(body.rsplit(b"gpuflow_history_page_age_seconds ", 1)[1])
    assert age >= 0.2


def test_late_with_no_page_yet_or_too_old_reads_down(child: Child) -> None:
    child.delay_s = 1.0
    page = ChildPage(child.url, timeout_s=0.2, stale_s=0.3)
    assert read(page).endswith(b"gpuflow_history_up 0.0\n")
    child.delay_s = 0.0
    assert read(page).startswith(PAGE)
    child.delay_s = 1.0
    time.sleep(0.2)  # the page is 0.4 s old once this late read gives up: past stale_s
    assert read(page).endswith(b"gpuflow_history_up 0.0\n")


def test_a_refused_connection_reads_down_and_forgets_the_page(child: Child) -> None:
    page = ChildPage(child.url)
    read(page)
    child.stop()
    assert read(page).endswith(b"gpuflow_history_up 0.0\n")
