"""Integration fixtures live in `harness.py` so tests can import its helpers too."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from harness import running

__all__ = ["running"]
