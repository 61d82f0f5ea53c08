"""The scheduler's actions, one a file, run from an ordered list per trigger (`registry`)."""

from __future__ import annotations
