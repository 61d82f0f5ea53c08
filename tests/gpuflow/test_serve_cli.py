"""`gpuflow serve`, `gpuflow services` and `gpuflow generate requests`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuflow.cli import app
from infra.config import Config
from infra.kafka import producer
from infra.servicespec import load_service_file, service_from_record, service_record
from infra.topics import SERVICES_LOAD
from schemas import make_codec
from scorer.services import ServiceSpecError

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "services"
GOOD = "name: svc\nregions: [r1]\nmin_replicas: 1\nmax_replicas: 8\n"


def _one_line_error(result: object, *words: str) -> None:
    out = result.output.strip()  # type: ignore[attr-defined]
    assert result.exit_code == 2, out  # type: ignore[attr-defined]
    assert len(out.splitlines()) == 1, out
    assert all(w in out for w in words) and "Traceback" not in out, out


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (GOOD + "max_zone_share: 2\n", "max_zone_share"),
        (GOOD + "replicas: 3\n", "replicas"),
        (GOOD.replace("max_replicas: 8", "max_replicas: 0"), "max_replicas"),
        ("name: svc\n", "regions"),
        ("name: [svc\n", "not valid YAML"),
        ("- a list\n", "service"),
    ],
)
def test_a_bad_service_file_is_one_line_naming_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    path = tmp_path / "svc.yaml"
    path.write_text(text)
    _one_line_error(runner.invoke(app, ["serve", "--check", str(path)]), "svc.yaml", field)


def test_check_shows_the_sizing_of_every_example() -> None:
    files = sorted(str(p) for p in EXAMPLES.glob("*.yaml"))
    result = runner.invoke(app, ["serve", "--check", *files])
    assert result.exit_code == 0, result.output
    assert result.output.count("replicas of") == len(files) == 4
    assert "chat: 2..64 replicas of 4 GPU, p99 <= 230 ms" in result.output


def test_a_service_record_round_trips_through_the_codec() -> None:
    spec = load_service_file(EXAMPLES / "chat.yaml")
    codec = make_codec(None)
    _, back = codec.decode(codec.encode("ServiceSpec", service_record(spec), topic="t"))
    assert service_from_record(back) == spec
    with pytest.raises(ServiceSpecError, match=r"^max_replicas: "):
        service_from_record({**back, "max_replicas": 0})


def test_generate_requests_then_replay_them(tmp_path: Path) -> None:
    gen = [
        "generate",
        "requests",
        "--out",
        str(tmp_path),
        "--days",
        "0.5",
        "--seed",
        "2",
        "--service",
        "svc=400",
    ]
    result = runner.invoke(app, gen)
    assert result.exit_code == 0, result.output
    trace = tmp_path / "requests.csv"
    first = trace.read_text()
    assert first.startswith("minute,service,rps\n0,svc,") and first.count("\n") == 721
    assert runner.invoke(app, gen).exit_code == 0 and trace.read_text() == first  # seeded
    zones = tmp_path / "zones.csv"
    zones.write_text("region,zone,gpu_model,gpus\nr1,r1-a,H100,16\nr1,r1-b,H100,16\n")
    svc = tmp_path / "svc.yaml"
    svc.write_text(GOOD)
    args = ["serve", str(svc), "--requests", str(trace), "--zones", str(zones), "--warmup", "60"]
    result = runner.invoke(app, [*args, "--scaler", "all"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert all(s in result.output for s in ("gpuflow", "static-peak", "reactive-hpa"))
    _one_line_error(runner.invoke(app, [*args, "--scaler", "magic"]), "--scaler")
    _one_line_error(runner.invoke(app, [*args[:-1], "5000"]), "--warmup")

    # `gpuflow replay` takes the same services and trace, and writes what `serve` printed
    out = tmp_path / "out"
    again = ["replay", "--services", str(svc), "--requests", str(trace), "--zones", str(zones)]
    again += ["--warmup", "60", "--scaler", "all", "--out", str(out)]
    replayed = runner.invoke(app, again, env={"COLUMNS": "200"})
    assert replayed.exit_code == 0, replayed.output
    rows = json.loads((out / "services.json").read_text())
    assert sorted(r["scaler"] for r in rows) == ["gpuflow", "reactive-hpa", "static-peak"]
    assert all(r["service"] == "svc" and r["minutes"] == 720 - 60 for r in rows), rows
    ours = next(r for r in rows if r["scaler"] == "gpuflow")
    assert f"{ours['within_slo']:.3%}" in result.output  # the same replay as `serve` ran
    _one_line_error(runner.invoke(app, again[:3]), "--requests")
    _one_line_error(runner.invoke(app, ["replay", "--out", str(out)]), "--nodes")
    stream = [*again[:-4], "--engine", "stream", "--scaler", "static-peak"]
    _one_line_error(runner.invoke(app, stream), "--scaler")  # the worker's scaler only


def test_generate_requests_refuses_a_bad_service_flag(tmp_path: Path) -> None:
    result = runner.invoke(app, ["generate", "requests", "--out", str(tmp_path), "--service", "x"])
    _one_line_error(result, "--service")


@pytest.mark.integration
def test_serve_declares_on_the_broker_and_services_lists_it(
    config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFLOW_KAFKA_BOOTSTRAP_SERVERS", config.kafka.bootstrap_servers)
    svc = tmp_path / "svc.yaml"
    svc.write_text(GOOD)
    result = runner.invoke(app, ["serve", str(svc)])
    assert result.exit_code == 0, result.output
    assert "service svc declared on gpuflow.services.specs" in result.output
    svc.write_text(GOOD.replace("max_replicas: 8", "max_replicas: 12"))  # updated in place
    assert runner.invoke(app, ["serve", str(svc)]).exit_code == 0
    listed = runner.invoke(app, ["services"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    rows = [line for line in listed.output.splitlines() if " svc " in line]
    assert len(rows) == 1 and "1..12" in rows[0] and "123.4" not in rows[0], listed.output
    load = {"event_id": "svc:load:1", "ts": 1, "service": "svc", "requests_per_s": 123.4}
    p = producer(config.kafka)
    p.produce(SERVICES_LOAD, key=b"svc", value=make_codec(None).encode("ServiceLoad", load))
    assert p.flush(10) == 0
    listed = runner.invoke(app, ["services"], env={"COLUMNS": "200"})
    rows = [line for line in listed.output.splitlines() if " svc " in line]
    assert len(rows) == 1 and "123.4" in rows[0], listed.output
