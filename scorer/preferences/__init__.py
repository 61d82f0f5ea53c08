"""Preference plugins: soft constraints. After the filters, the placer keeps only the nodes a
preference prefers, unless that would leave none (then the preference gives way)."""

from __future__ import annotations

from scorer.preferences.whole_nodes import WholeNodeReserve

__all__ = ["WholeNodeReserve"]
