"""The world around a simulated fleet: diurnal load and grid signals (links: agents/backbone.py)."""

from __future__ import annotations

import numpy as np

from agents.spec import FleetSpec

__all__ = ["diurnal_load", "grid_events", "local_hour"]

_MS_PER_H = 3_600_000


def local_hour(now_ms: int, utc_offset_h: float | np.ndarray) -> float | np.ndarray:
    """Hour of day (0..24) at a UTC offset."""
    return (now_ms / _MS_PER_H + utc_offset_h) % 24.0


def diurnal_load(now_ms: int, utc_offset_h: float | np.ndarray) -> float | np.ndarray:
    """Share of capacity in demand: ~0.9 mid-afternoon local time, ~0.2 before dawn."""
    h = local_hour(now_ms, utc_offset_h)
    return 0.55 + 0.35 * np.sin(2 * np.pi * (h - 9.0) / 24.0)


def grid_events(spec: FleetSpec, now_ms: int, rng: np.random.Generator) -> list[dict]:
    """One GridSignal per region: solar lowers carbon at midday, prices peak in the evening."""
    out = []
    for r in spec.regions:
        h = float(local_hour(now_ms, r.utc_offset_h))
        solar = max(0.0, float(np.sin(np.pi * (h - 6.0) / 12.0)))
        evening = max(0.0, float(np.sin(np.pi * (h - 16.0) / 6.0)))
        renewable = min(0.95, r.renewable_share + 0.25 * solar)
        carbon = r.carbon_g_per_kwh * (1.0 - 0.6 * (renewable - r.renewable_share))
        price = r.price_per_kwh * (1.0 + 0.35 * evening - 0.15 * solar)
        jitter = 1.0 + float(rng.normal(0.0, 0.02))
        out.append(
            {
                "event_id": f"grid:{r.name}:{now_ms}",
                "ts": now_ms,
                "schema": 1,
                "region": r.name,
                "price_per_kwh": round(price * jitter, 5),
                "carbon_g_per_kwh": round(carbon * jitter, 2),
                "renewable_share": round(renewable, 3),
            }
        )
    return out
