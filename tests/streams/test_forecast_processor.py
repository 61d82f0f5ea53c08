"""The forecast processor on a real chDB store with little history: it waits, it does not fail.

With less than the baseline needs it does not even start its fitting pool.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from infra.config import load_config
from infra.store import open_store
from infra.store import samples as S
from infra.store.rows import RowContext, to_rows
from streams.forecasting.processor import ForecastProcessor


def test_a_short_history_waits_and_reads_it_all_next_time(tmp_path: Path) -> None:
    base = load_config(env={}, data_dir=str(tmp_path / "data"))
    config = dataclasses.replace(
        base.with_bootstrap("127.0.0.1:1"),  # nothing is published: nothing to forecast yet
        forecast=dataclasses.replace(base.forecast, plans="short", series="gpus_in_use"),
    )
    now = int(time.time()) // 300 * 300
    with open_store(config) as store:
        rows = []
        for t in range(now - 3 * 3600, now, 60):  # three hours of summaries: 36 five-minute points
            record = S.region_summary("eu", t * 1000, total={"H100": 8}, free={"H100": 3})
            rows.extend(to_rows("RegionSummary", record, RowContext())[1])
        store.insert_rows("region_state", rows)
        started: list[int] = []

        def pool() -> ThreadPoolExecutor:
            started.append(1)
            return ThreadPoolExecutor(1)

        processor = ForecastProcessor(config, store, pool=pool)
        report = processor.run_once(now_s=now)
        assert (report.series, report.forecasts, report.failed) == (0, 0, [])
        assert report.waiting == ["gpus_in_use/eu/*/short"]
        assert processor._refit_at == {}  # the whole window is read again next run
        assert started == []  # nothing to fit: no pool process was spawned
