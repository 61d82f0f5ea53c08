"""`gpuflow generate requests`: seeded per-minute request rates per service."""

from __future__ import annotations

from pathlib import Path

import typer

from agents.replay.requests import DEMO_SHAPES, RequestShape, generate_requests, write_requests
from gpuflow.commands.common import fail

__all__ = ["write_request_trace"]


def _shapes(services: list[str]) -> dict[str, RequestShape]:
    if not services:
        return dict(DEMO_SHAPES)
    shapes: dict[str, RequestShape] = {}
    for item in services:
        name, _, peak = item.partition("=")
        try:
            rps = float(peak)
        except ValueError:
            raise fail(f"--service: expected NAME=PEAK_RPS, got {item!r}") from None
        if not name or rps <= 0:
            raise fail(f"--service: expected NAME=PEAK_RPS with a peak > 0, got {item!r}")
        base = DEMO_SHAPES.get(name, RequestShape(rps))
        shapes[name] = RequestShape(rps, base.trough, base.weekend, phase_min=base.phase_min)
    return shapes


def write_request_trace(out: Path, days: float, seed: int, services: list[str]) -> None:
    if days <= 0:
        raise fail("--days must be > 0")
    shapes = _shapes(services)
    minutes = round(days * 1440)
    rates = generate_requests(shapes, minutes, seed)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "requests.csv"
    write_requests(path, rates)
    typer.echo(f"wrote {path} ({len(rates)} services x {minutes} minutes)")
