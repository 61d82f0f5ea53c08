"""Time limits as people write them: seconds, a unit suffix, or Slurm's forms."""

from __future__ import annotations

import re

__all__ = ["parse_time_limit"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_SLURM = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_time_limit(text: str | int | float) -> int:
    """Seconds from "90" (seconds: gpuflow's unit, unlike Slurm's bare minutes), "90s", "30m",
    "2h", "1d", or Slurm's "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS"; ValueError if
    none of these. 0 = no limit."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        if text < 0 or text != int(text):
            raise ValueError(text)
        return int(text)
    s = str(text).strip().lower()
    if s.isdigit():
        return int(s)
    if s[:-1].isdigit() and s[-1:] in _UNITS:
        return int(s[:-1]) * _UNITS[s[-1]]
    m = _SLURM.match(s)
    if m is None or (":" not in s and "-" not in s):
        raise ValueError(text)
    days, a, b, c = m.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        return int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    if c is not None:  # HH:MM:SS
        return int(a) * 3600 + int(b) * 60 + int(c)
    return int(a) * 60 + int(b)  # MM:SS
