"""Handing freed heap memory back to the operating system.

glibc keeps memory a process freed in its arenas for reuse, so a burst that allocates a lot at
once (the worker's ledger snapshot folds a whole save interval of decisions in a thread) leaves
the process's RSS at the burst's high-water mark long after the objects are gone. `trim_heap`
asks glibc to return the free pages of every arena (`malloc_trim(0)`). Elsewhere (musl, macOS)
it does nothing and says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from typing import Any

__all__ = ["trim_heap"]

log = logging.getLogger(__name__)


@functools.cache
def _malloc_trim() -> Any:
    """glibc's `malloc_trim`, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def trim_heap() -> bool:
    """Return free heap pages to the OS; True if any were (False where glibc is absent)."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
