"""The stack file `gpuflow up` writes tells client commands the broker and the region order."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuflow.commands.common import running_config, write_stack_file
from infra.config import load_config


@pytest.fixture(autouse=True)
def _no_gpuflow_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GPUFLOW_KAFKA_BOOTSTRAP_SERVERS", "GPUFLOW_KAFKA_REGION_ORDER", "GPUFLOW_CONFIG"):
        monkeypatch.delenv(name, raising=False)


def test_client_commands_use_the_running_stacks_broker_and_region_order(tmp_path: Path) -> None:
    up = load_config(env={}, data_dir=str(tmp_path)).with_bootstrap("127.0.0.1:39999")
    up = dataclasses.replace(up, kafka=dataclasses.replace(up.kafka, region_order="b,a"))
    write_stack_file(up)
    client = running_config(tmp_path)
    assert client.kafka.bootstrap_servers == "127.0.0.1:39999"
    assert client.kafka.partitioner()("a") == 1


def test_a_configured_region_order_wins_over_the_stack_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    up = load_config(env={}, data_dir=str(tmp_path)).with_bootstrap("127.0.0.1:39999")
    up = dataclasses.replace(up, kafka=dataclasses.replace(up.kafka, region_order="b,a"))
    write_stack_file(up)
    monkeypatch.setenv("GPUFLOW_KAFKA_REGION_ORDER", "a,b")
    assert running_config(tmp_path).kafka.partitioner()("a") == 0
