"""`gpuflow serve` and `gpuflow services`: declare inference services, replay them on a
request-rate trace, list them (docs/services.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from confluent_kafka import KafkaException
from rich.console import Console
from rich.table import Table

from agents.replay.errors import TraceError
from agents.replay.requests import read_requests
from agents.replay.service_fleet import DEMO_FLEET, read_fleet
from agents.replay.service_scalers import GpuflowScaler, ReactiveScaler, Scaler, StaticPeakScaler
from agents.replay.services import ServiceReport, replay_services
from gpuflow.commands.common import fail, running_config, worker_url
from gpuflow.commands.services_view import fetch_services, render_services
from gpuflow.replay.service_stream import replay_services_stream
from infra.kafka import producer, read_to_end
from infra.servicespec import load_service_file, service_record
from infra.topics import SERVICES_LOAD, SERVICES_SCALING, SERVICES_SPECS
from schemas import DecodeError, make_codec
from scorer.services import ServiceSpec, ServiceSpecError, lead_minutes, pool_capacity

__all__ = ["load_services", "report_rows", "report_table", "serve", "service_replay", "services"]

_SCALERS = ("gpuflow", "static-peak", "reactive-hpa", "all")


def load_services(files: list[Path]) -> list[ServiceSpec]:
    try:
        specs = [load_service_file(f) for f in files]
    except ServiceSpecError as exc:
        raise fail(f"bad service file: {exc}") from None
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise fail(f"bad service files: a name is given twice in {names}")
    return specs


def _check_line(spec: ServiceSpec) -> str:
    model = spec.gpu_models[0] if spec.gpu_models else (spec.service_ms_on or "H100")
    pool = pool_capacity(spec, model)
    one = pool[1] if len(pool) > 1 else 0.0
    return (
        f"{spec.name}: {spec.min_replicas}..{spec.max_replicas} replicas of "
        f"{spec.gpus_per_replica} GPU, p99 <= {spec.slo_p99_ms:g} ms; one replica on {model} "
        f"serves {one:.1f} rps, {spec.max_replicas} serve {pool[-1]:.1f}; scales out "
        f"{lead_minutes(spec)} min ahead, in after {spec.scale_in_after_s:g} s"
    )


def _scalers(
    which: str, specs: list[ServiceSpec], rates: dict[str, Any], warm: int
) -> list[Scaler]:
    peak = {s.name: float(rates[s.name][warm:].max()) for s in specs}
    top = {s.name: s.batch * 1000.0 / s.service_ms for s in specs}
    every: dict[str, Scaler] = {
        "gpuflow": GpuflowScaler(),
        "static-peak": StaticPeakScaler(peak),
        "reactive-hpa": ReactiveScaler(top),
    }
    return list(every.values()) if which == "all" else [every[which]]


def report_table(rows: list[tuple[str, ServiceReport, float]]) -> Table:
    table = Table(
        "scaler",
        "service",
        "within SLO",
        "missed",
        "p99 max",
        "GPU-h",
        "util",
        "starts W/N/C/D",
        "training",
        title="service replay",
    )
    for scaler, r, share in rows:
        starts = "/".join(
            str(r.starts_by_tier[t]) for t in ("WARM", "NEIGHBOUR", "COLD", "DEGRADE")
        )
        finite = [p for p in r.p99_ms if p != float("inf")]
        worst = "inf" if len(finite) < len(r.p99_ms) else f"{max(finite, default=0):.0f} ms"
        table.add_row(
            scaler,
            r.service,
            f"{r.within_slo:.3%}",
            str(r.minutes - r.minutes_within_slo),
            worst,
            f"{r.gpu_hours:.1f}",
            f"{r.utilisation:.3f}",
            starts,
            f"{share:.3f}",
        )
    return table


def service_replay(
    specs: list[ServiceSpec],
    requests: Path,
    zones: Path | None,
    which: str,
    warmup: int,
    seed: int,
    engine: str = "inprocess",
) -> list[tuple[str, ServiceReport, float]]:
    """Replay `specs` on the per-minute `requests` trace under `which` scaler(s) ("all": with
    the static-peak and reactive-HPA baselines): (scaler, report, training share) rows. The
    stream engine replays gpuflow's scaler only: it is the worker's autoscaler."""
    if which not in _SCALERS:
        raise fail(f"--scaler must be one of {', '.join(_SCALERS)}, not {which!r}")
    if engine not in ("inprocess", "stream"):
        raise fail(f"--engine must be inprocess or stream, not {engine!r}")
    if engine == "stream" and which not in ("gpuflow", "all"):
        raise fail(f"--scaler {which}: the stream engine replays the worker's autoscaler (gpuflow)")
    try:
        rates = read_requests(requests)
        fleet = read_fleet(zones) if zones else DEMO_FLEET
    except TraceError as exc:
        raise fail(str(exc)) from None
    missing = [s.name for s in specs if s.name not in rates]
    if missing:
        raise fail(f"{requests}: no rates for service {missing[0]}")
    if min(len(rates[s.name]) for s in specs) <= warmup:
        raise fail(f"--warmup {warmup} leaves no minute of {requests} to score")
    rows = []
    for scaler in _scalers("gpuflow" if engine == "stream" else which, specs, rates, warmup):
        try:
            if engine == "stream":
                reports, share = replay_services_stream(
                    specs, rates, fleet, warmup=warmup, seed=seed
                )
            else:
                reports, share = replay_services(
                    specs, rates, fleet, scaler, warmup=warmup, seed=seed
                )
        except ValueError as exc:
            raise fail(str(exc)) from None
        rows += [(scaler.name, r, share) for r in reports]
    return rows


def report_rows(rows: list[tuple[str, ServiceReport, float]]) -> list[dict[str, Any]]:
    """The replay's rows as JSON-ready records (per-minute p99s left out)."""
    out = []
    for scaler, r, share in rows:
        record = {k: v for k, v in dataclasses.asdict(r).items() if k not in ("p99_ms", "looks")}
        finite = [p for p in r.p99_ms if p != float("inf")]
        out.append({**record, "scaler": scaler, "within_slo": r.within_slo,
                    "p99_ms_max": max(finite, default=0.0) if len(finite) == len(r.p99_ms)
                    else None, "training_share": share})  # fmt: skip
    return out


def _publish(specs: list[ServiceSpec], data_dir: Path | None) -> None:
    config = running_config(data_dir)
    codec = make_codec(config.kafka.schema_registry_url or None)
    try:
        p = producer(config.kafka)
        for spec in specs:
            value = codec.encode("ServiceSpec", service_record(spec), topic=SERVICES_SPECS)
            p.produce(SERVICES_SPECS, key=spec.name.encode(), value=value)
        if p.flush(10):
            raise fail("broker did not take the services within 10 s")
    except KafkaException as exc:
        raise fail(f"broker error: {exc}") from None
    for spec in specs:
        typer.echo(f"service {spec.name} declared on {SERVICES_SPECS}")


def serve(
    files: Annotated[list[Path], typer.Argument(help="Service YAML files.")],
    check: Annotated[
        bool, typer.Option(help="Validate and show the sizing; send nothing.")
    ] = False,
    requests: Annotated[
        Path | None, typer.Option(help="Replay on this minute,service,rps trace instead.")
    ] = None,
    zones: Annotated[
        Path | None, typer.Option(help="Replay fleet: zones.csv (default: demo).")
    ] = None,
    scaler: Annotated[
        str, typer.Option(help="Replay: gpuflow, static-peak, reactive-hpa, all.")
    ] = "all",
    warmup: Annotated[int, typer.Option(help="Replay: minutes of history, not scored.")] = 1440,
    seed: Annotated[int, typer.Option(help="Replay: seed of the training load.")] = 0,
    data_dir: Annotated[Path | None, typer.Option(help="Stack data directory.")] = None,
) -> None:
    """Declare services (updating one in place), or check them, or replay them on a trace."""
    if scaler not in _SCALERS:
        raise fail(f"--scaler must be one of {', '.join(_SCALERS)}, not {scaler!r}")
    specs = load_services(files)
    if check:
        for spec in specs:
            typer.echo(_check_line(spec))
    elif requests is not None:
        Console().print(report_table(service_replay(specs, requests, zones, scaler, warmup, seed)))
    else:
        _publish(specs, data_dir)


def _read_topic(config: Any, topic: str, timeout_s: float = 10.0) -> list[tuple[str, dict]]:
    """Every decodable record of `topic`, oldest first, read to its end."""
    codec = make_codec(config.kafka.schema_registry_url or None)

    def decode(value: bytes) -> dict[str, Any] | None:
        try:
            return dict(codec.decode(value)[1])
        except DecodeError:
            return None

    try:
        return [(key, r) for _, key, r in read_to_end(config.kafka, topic, decode, timeout_s)]
    except KafkaException as exc:
        raise fail(f"broker error: {exc}") from None


def services(
    data_dir: Annotated[Path | None, typer.Option(help="Stack data directory.")] = None,
    url: Annotated[
        str | None, typer.Option(help="The worker's web root (default: the running stack's).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the worker's view as JSON.")
    ] = False,
) -> None:
    """Services with replicas by zone and role, load now and forecast, SLO attainment and the
    last scaling decision, from the worker's autoscaler; the declared services and the last
    load and decision on the topics when no worker answers."""
    view = fetch_services(url) if url else None  # a worker named: no broker needed
    config = running_config(data_dir) if view is None else None
    if config is not None and url is None:
        view = fetch_services(worker_url(config))
    if view is not None:
        if as_json:
            typer.echo(json.dumps(view, indent=1))
        else:
            Console().print(render_services(view))
        return
    assert config is not None or url is not None
    config = config or running_config(data_dir)
    specs: dict[str, dict] = {}
    for key, record in _read_topic(config, SERVICES_SPECS):
        specs[key] = record
    load = dict(_read_topic(config, SERVICES_LOAD))
    decided = dict(_read_topic(config, SERVICES_SCALING))
    table = Table(
        "service",
        "replicas",
        "SLO p99",
        "regions",
        "load rps",
        "forecast rps",
        "last decision",
        title="services",
    )
    for name, spec in sorted(specs.items()):
        if spec.get("deleted"):
            continue
        seen, d = load.get(name), decided.get(name)
        table.add_row(
            name,
            f"{spec['min_replicas']}..{spec['max_replicas']}"
            + (f" now {d['replicas_after']}" if d else ""),
            f"{spec['slo_p99_ms']:g} ms",
            ",".join(spec["regions"]),
            f"{seen['requests_per_s']:.1f}" if seen else "-",
            f"{d['forecast_rps']:.1f}" if d else "-",
            f"{d['action']}: {d['reason']}" if d else "-",
        )
    Console().print(table)
