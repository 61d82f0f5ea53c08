"""The worker keeps the configured log level: no Faust spinner turns the root to DEBUG."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import faust
import pytest

from streams.worker.shutdown import GracefulWorker


@pytest.fixture
def saved_logging() -> Iterator[None]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def test_the_worker_leaves_debug_records_unbuilt_at_warning(saved_logging: None) -> None:
    app = faust.App("test-shutdown-logging", broker="kafka://127.0.0.1:1")
    worker = GracefulWorker(app, loglevel="warning", quiet=True, shutdown_timeout_s=5)
    worker._setup_logging()
    # Faust's own worker would have set the root to DEBUG here (for its spinner's handler)
    assert logging.getLogger().level == logging.WARNING
    assert not logging.getLogger("faust.topics").isEnabledFor(logging.DEBUG)
    assert not logging.getLogger("aiokafka.producer.producer").isEnabledFor(logging.DEBUG)


def test_faust_s_worker_would_have_turned_debug_on(saved_logging: None) -> None:
    """The behaviour the override removes, so the test above cannot pass by accident."""
    from faust.worker import Worker

    app = faust.App("test-shutdown-logging-faust", broker="kafka://127.0.0.1:1")
    Worker(app, loglevel="warning", quiet=True)._setup_logging()
    assert logging.getLogger("faust.topics").isEnabledFor(logging.DEBUG)
