"""Human units for reasons and reports: GiB, TFLOPS, hours, dollars.

Reasons reach people (decision lines, `--dry-run`, `gpuflow top`), so numbers are rounded to
what a person compares: "130 GiB", "79.6 GiB", "2.5 h", "$12.40", never "1.17493e+06".
"""

from __future__ import annotations

__all__ = ["gib", "gib_from_bytes", "hours", "tflops", "usd"]

_MIB_PER_GIB = 1024


def gib(mib: float) -> str:
    """MiB as GiB: one decimal below 100 GiB, whole GiB above (e.g. 81,559 -> '79.6 GiB')."""
    value = mib / _MIB_PER_GIB
    return f"{value:.0f} GiB" if value >= 100 else f"{value:.1f} GiB"


def gib_from_bytes(n: float) -> str:
    return gib(n / 2**20)


def tflops(value: float) -> str:
    """'989 TFLOPS', '8.1 TFLOPS'."""
    return f"{value:.0f} TFLOPS" if value >= 100 else f"{value:.1f} TFLOPS"


def hours(seconds: float) -> str:
    """'45 s', '12 min', '2.5 h', '3.2 days'."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 72 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def usd(value: float) -> str:
    """'$0.45', '$12.40', '$1,234'."""
    return f"${value:,.0f}" if value >= 1000 else f"${value:,.2f}"
