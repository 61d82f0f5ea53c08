"""Series: regular grids, explicit gap filling, CSV input with one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from forecast import SeriesError, read_series_csv, regularize, season_length
from forecast.series import calendar_features, on_grid, write_series_csv


@pytest.mark.parametrize(
    ("fill", "expected"),
    [
        # points at 0, 60, 180 (120 missing), 240: the gap is filled per policy
        ("interpolate", [1.0, 2.0, 3.0, 4.0, 5.0]),  # 2 -> 4 across the gap: 3
        ("ffill", [1.0, 2.0, 2.0, 4.0, 5.0]),
        ("zero", [1.0, 2.0, 0.0, 4.0, 5.0]),
    ],
)
def test_gaps_are_filled_and_marked(fill: str, expected: list[float]) -> None:
    s = regularize([0, 60, 180, 240], [1.0, 2.0, 4.0, 5.0], fill=fill)
    assert s.step_s == 60  # inferred: the most common spacing
    assert s.values.tolist() == expected
    assert s.filled.tolist() == [False, False, True, False, False]
    assert s.gaps == 1


def test_unsorted_input_and_nan_values_are_gaps() -> None:
    s = regularize([120, 0, 60], [3.0, 1.0, float("nan")])
    assert s.values.tolist() == [1.0, 2.0, 3.0] and s.filled.tolist() == [False, True, False]


@pytest.mark.parametrize(
    ("ts", "values", "message"),
    [
        ([0, 60, 120, 150], [1, 2, 3, 4], "not on the 60 s grid"),  # 150 is half a step off
        ([0, 60, 60], [1, 2, 3], "two values"),
        ([0], [1], "at least two points"),
        ([0, 60], [float("nan")] * 2, "no value"),
    ],
)
def test_irregular_input_is_refused(ts: list[int], values: list[float], message: str) -> None:
    with pytest.raises(SeriesError, match=message):
        regularize(ts, values)


def test_on_grid_starts_at_the_first_value_and_fills_the_rest() -> None:
    # grid of 5 steps from 0; values at 120 and 240 only
    s = on_grid([120, 240], [7.0, 9.0], start_s=0, step_s=60, points=5, fill="ffill")
    assert s.start_s == 120 and s.values.tolist() == [7.0, 7.0, 9.0]
    assert s.filled.tolist() == [False, True, False]
    with pytest.raises(SeriesError, match="off the 60 s grid"):
        on_grid([300], [1.0], start_s=0, step_s=60, points=5, fill="zero")


@pytest.mark.parametrize(
    ("step_s", "season"),
    [(300, 288), (3600, 24), (86_400, 7), (7_200, 12), (7 * 86_400, 1), (7_000, 1)],
)
def test_season_length(step_s: int, season: int) -> None:
    assert season_length(step_s) == season


def test_calendar_features_start_the_week_on_monday() -> None:
    monday, sunday_noon = 1_741_564_800, 1_741_564_800 + 6 * 86_400 + 43_200
    f = calendar_features(np.array([monday, sunday_noon]))
    assert f[0].tolist() == pytest.approx([0.0, 1.0, 0.0, 1.0])  # midnight, week phase 0
    assert f[1, :2].tolist() == pytest.approx([0.0, -1.0])  # noon: half a day


def test_csv_round_trip_with_iso_and_epoch(tmp_path: Path) -> None:
    iso = tmp_path / "iso.csv"
    iso.write_text("ts,value,note\n2025-01-01T00:00:00Z,1.5,a\n2025-01-01T02:00:00,3.5,b\n")
    s = read_series_csv(iso)
    assert (s.start_s, s.step_s, s.values.tolist()) == (1_735_689_600, 7200, [1.5, 3.5])
    epoch = tmp_path / "epoch.csv"
    epoch.write_text("value,ts\n1,1735689600\n,1735693200\n3,1735696800\n")
    s = read_series_csv(epoch)  # an empty value is a gap
    assert s.values.tolist() == [1.0, 2.0, 3.0] and s.filled.sum() == 1
    back = read_series_csv(write_series_csv(s, tmp_path / "out.csv"))
    assert back.values.tolist() == s.values.tolist() and back.start_s == s.start_s


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("time,value\n1,2\n", "missing ts"),
        ("ts,value\nyesterday,1\n2025-01-01,2\n", r"bad.csv:2: ts: cannot read 'yesterday'"),
        ("ts,value\n1735689600000,1\n1735689660000,2\n", "looks like milliseconds"),
        ("ts,value\n1735689600,many\n1735689660,2\n", r"bad.csv:2: value: cannot read 'many'"),
    ],
)
def test_bad_csv_names_the_line_and_column(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(SeriesError, match=message):
        read_series_csv(path)
    with pytest.raises(SeriesError, match="No such file"):
        read_series_csv(tmp_path / "missing.csv")
