"""A forgiving CSV reader with exact error positions: cells are stripped, blank lines and
`#` comments are skipped, and every bad cell is reported as `file:line:column (name): why`."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from agents.replay.errors import TraceError

__all__ = ["Row", "positive", "read_rows", "to_bool", "to_float", "to_int", "to_list"]

T = TypeVar("T")
_TRUE, _FALSE = ("1", "true", "yes", "y", "t"), ("0", "false", "no", "n", "f")


@dataclass(frozen=True)
class Row:
    """One data row: its cells by column name, and where it came from (for errors)."""

    path: str
    line: int
    cells: dict[str, str]
    columns: dict[str, int]  # name -> 1-based column number

    def error(self, name: str, message: str) -> TraceError:
        return TraceError(
            self.path, f"({name}) {message}", line=self.line, column=self.columns[name]
        )

    def get(self, name: str) -> str:
        """The stripped cell, "" when the column is absent or empty."""
        return self.cells.get(name, "")

    def parse(self, name: str, convert: Callable[[str], T], default: T) -> T:
        """`convert(cell)`, `default` when empty; a ValueError names the cell."""
        raw = self.get(name)
        return default if raw == "" else self._convert(name, raw, convert)

    def required(self, name: str, convert: Callable[[str], T]) -> T:
        raw = self.get(name)
        if raw == "":
            raise self.error(name, "is required and empty")
        return self._convert(name, raw, convert)

    def _convert(self, name: str, raw: str, convert: Callable[[str], T]) -> T:
        try:
            return convert(raw)
        except ValueError as exc:
            raise self.error(name, f"{exc}, got {raw!r}") from None


def read_rows(
    path: str | Path,
    required: Sequence[str],
    delimiter: str = ",",
    header: Sequence[str] | None = None,
) -> Iterator[Row]:
    """Rows of a CSV file whose header names at least `required` (case and spaces ignored);
    a file without a header line is read with `header`."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise TraceError(name, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TraceError(name, f"not UTF-8 text ({exc.reason})") from None
    lines = text.splitlines()
    reader = csv.reader(lines, delimiter=delimiter, skipinitialspace=True)
    names: list[str] | None = list(header) if header is not None else None
    try:
        for number, cells in enumerate(reader, start=1):
            stripped = [c.strip() for c in cells]
            if not any(stripped) or stripped[0].startswith("#"):
                continue
            if names is None:
                names = [c.lower().replace(" ", "_") for c in stripped]
                _check_header(name, number, names, required)
                continue
            yield _row(name, number, names, stripped)
    except csv.Error as exc:
        raise TraceError(name, f"bad CSV: {exc}", line=reader.line_num) from None
    if names is None:
        raise TraceError(name, f"empty file; expected a header with {', '.join(required)}")


def _check_header(path: str, line: int, header: list[str], required: Sequence[str]) -> None:
    missing = [r for r in required if r not in header]
    if missing:
        raise TraceError(
            path, f"header lacks required column(s) {', '.join(missing)}", line=line, column=1
        )
    seen: set[str] = set()
    for i, col in enumerate(header, start=1):
        if col in seen:
            raise TraceError(path, f"duplicate column {col!r}", line=line, column=i)
        seen.add(col)


def _row(path: str, line: int, header: list[str], cells: list[str]) -> Row:
    if len(cells) > len(header) and any(cells[len(header) :]):
        raise TraceError(
            path,
            f"{len(cells)} cells but the header has {len(header)} columns",
            line=line,
            column=len(header) + 1,
        )
    values = dict(zip(header, cells + [""] * (len(header) - len(cells)), strict=False))
    return Row(path, line, values, {c: i for i, c in enumerate(header, start=1)})


def to_int(raw: str) -> int:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("expected an integer") from None
    if not math.isfinite(value) or not value.is_integer():
        raise ValueError("expected an integer")
    return int(value)


def to_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("expected a number") from None
    if not math.isfinite(value):
        raise ValueError("expected a finite number")
    return value


def to_bool(raw: str) -> bool:
    low = raw.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError("expected true/false (or 1/0)")


def to_list(raw: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in raw.split("|") if p.strip())


def positive(convert: Callable[[str], Any], *, strict: bool = True) -> Callable[[str], Any]:
    """`convert`, refusing values <= 0 (or < 0 when not strict)."""

    def check(raw: str) -> Any:
        value = convert(raw)
        if value < 0 or (strict and value == 0):
            raise ValueError("expected a number > 0" if strict else "expected a number >= 0")
        return value

    return check
