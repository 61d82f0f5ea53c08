"""Shared fixtures: the real embedded broker on a free loopback port, and unique names."""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.broker import EmbeddedBroker
from infra.config import Config, load_config
from infra.kafka import ensure_topics

REPO = Path(__file__).resolve().parents[1]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`@pytest.mark.engines("logbroker", "tansu")`: the test runs once on each engine."""
    marker = metafunc.definition.get_closest_marker("engines")
    if marker is not None and "broker" in metafunc.fixturenames:
        metafunc.parametrize("broker", marker.args, indirect=True)


@pytest.fixture
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A real broker per test, stopped by PID at the end: the default engine (the log broker),
    the one GPUFLOW_TEST_BROKER_ENGINE names (`tansu`: the same tests on Tansu), or each of
    those an `engines` mark names."""
    base = load_config(env={})
    engine = getattr(request, "param", None) or os.environ.get(
        "GPUFLOW_TEST_BROKER_ENGINE", base.broker.engine
    )
    settings = dataclasses.replace(base.broker, engine=engine)
    with EmbeddedBroker(settings, tmp_path / "broker") as b:
        yield b


@pytest.fixture
def config(broker: EmbeddedBroker, tmp_path: Path) -> Config:
    """A config pointing at the session broker, with a fresh data dir and app id per test."""
    base = load_config(env={}, data_dir=str(tmp_path / "data"))
    app_id = f"gpuflow-test-{uuid.uuid4().hex[:8]}"
    cfg = dataclasses.replace(
        base.with_bootstrap(broker.bootstrap_servers),
        # info: a failing test's message carries the worker's log tail, rebalances included
        worker=dataclasses.replace(base.worker, app_id=app_id, log_level="info"),
    )
    ensure_topics(cfg.kafka)
    return cfg


@pytest.fixture
def unique() -> str:
    """A short unique suffix for topic and group names."""
    return uuid.uuid4().hex[:10]
