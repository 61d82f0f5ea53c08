"""The worker's scheduling core: one book of state (`book`), changed only through it."""

from __future__ import annotations
