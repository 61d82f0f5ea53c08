"""`gpuflow schemas`: the event schemas and their fingerprints, for clients in other languages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from infra.topics import TOPICS
from schemas import EVENT_NAMES, default_schemas

__all__ = ["schemas_command"]


def schemas_command(
    out: Annotated[
        Path | None,
        typer.Option(help="Write each schema, self-contained, to DIR/<Event>.avsc."),
    ] = None,
) -> None:
    """List events with their topics and single-object fingerprints (spec; Avro Python)."""
    schemas = default_schemas()
    topics: dict[str, list[str]] = {}
    for spec in TOPICS:
        topics.setdefault(spec.event, []).append(spec.name)
    table = Table("event", "topics", "fingerprint", "avro (Python) fingerprint")
    for name in EVENT_NAMES:
        schema = schemas.get(name)
        other = [f.hex() for f in schema.fingerprints[1:2]]
        table.add_row(name, ", ".join(topics.get(name, [])), schema.fingerprint.hex(), *other)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{name}.avsc").write_text(json.dumps(schema.self_contained, indent=2) + "\n")
    Console().print(table)
    if out is not None:
        typer.echo(f"wrote {len(EVENT_NAMES)} self-contained schemas to {out}")
