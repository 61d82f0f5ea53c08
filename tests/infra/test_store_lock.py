"""A chdb directory held by another process gives a one-line StoreError with a hint."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.config import load_config
from infra.store import StoreError, open_store

REPO = Path(__file__).resolve().parents[2]


def test_directory_held_by_another_process(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from infra.config import load_config;"
            "from infra.store import open_store;"
            f"s = open_store(load_config(env={{}}, data_dir={str(tmp_path)!r}));"
            "print('open', flush=True); time.sleep(30)",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        started = time.monotonic()
        with pytest.raises(StoreError) as err:
            open_store(load_config(env={}, data_dir=str(tmp_path)))
        assert "only one process" in str(err.value) and "\n" not in str(err.value)
        assert time.monotonic() - started < 10
    finally:
        holder.kill()
        holder.wait(10)
