"""Tenant identity on the real broker and worker: only signed, fresh, first-seen submissions
are placed; every other one gets REJECTED (admitted=false) with its reason and a dead letter,
and no secret leaks into logs, decisions, ClickHouse or /state/."""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

import httpx
import pytest
from harness import CODEC, Running, TopicReader, run_stack, wait_for
from typer.testing import CliRunner

from gpuflow.cli import app
from infra.config import AuthConfig, Config
from infra.jobspec import job_record
from infra.kafka import producer
from infra.topics import DEADLETTER, DECISIONS_PLACEMENT, JOBS_ROUTED, JOBS_SUBMITTED
from schemas.signing import Signer, TenantKey

pytestmark = pytest.mark.integration

SECRET_V, SECRET_N = "SECRET-vision-7f3a9", "SECRET-nlp-c41d2"
VISION = TenantKey("vision", "kv1", SECRET_V)


def _job(job_id: str, **fields: Any) -> dict[str, Any]:
    return job_record({"job_id": job_id, "gpu_count": 1, "gpu_model": None, **fields})


def _spec(job_id: str) -> dict[str, Any]:
    return job_record({"job_id": job_id, "gpu_count": 1})


def _produce(run: Running, records: list[tuple[str, dict[str, Any]]]) -> dict[str, bytes]:
    p, sent = producer(run.config.kafka), {}
    for key, record in records:
        value = CODEC.encode("JobSubmitted", record)
        p.produce(JOBS_SUBMITTED, key=key.encode(), value=value)
        sent[record["job_id"]] = value
    p.flush(10)
    return sent


def _decisions(reader: TopicReader, job_id: str) -> list[dict[str, Any]]:
    return [d for d in reader.poll(0.3) if d.get("job_id") == job_id]


def _settled(reader: TopicReader, job_ids: list[str]) -> bool:
    got = {d.get("job_id") for d in reader.poll(0.3) if d.get("outcome") != "QUEUED"}
    return set(job_ids) <= got


@pytest.fixture
def signed_run(config: Config) -> Any:
    auth = AuthConfig(keys=f"vision:kv1:{SECRET_V},nlp:kn1:{SECRET_N}", max_age_s=300)
    with run_stack(dataclasses.replace(config, auth=auth)) as run:
        yield run


def test_only_signed_fresh_first_seen_submissions_are_placed(signed_run: Running) -> None:
    run, sign = signed_run, Signer(VISION).sign
    forged = Signer(TenantKey("vision", "kv1", "not-the-secret")).sign(_spec("forged"))
    tampered = {**sign(_spec("tampered")), "gpu_count": 2}
    expired = Signer(VISION).sign(_spec("expired"), now_ms=int(time.time() * 1000) - 3_600_000)
    as_other = {**Signer(VISION).sign(_spec("as-other")), "tenant": "nlp"}
    wrong_key = sign(_spec("wrong-key"))
    refused = {
        "unsigned": "unsigned submission",
        "forged": "bad signature",
        "tampered": "bad signature",
        "expired": "expired",
        "as-other": "does not belong to tenant 'nlp'",
        "wrong-key": "message key is not the job id",
    }
    sent = _produce(
        run,
        [
            ("signed-ok", sign(_spec("signed-ok"))),
            ("unsigned", _spec("unsigned")),
            ("forged", forged),
            ("tampered", tampered),
            ("expired", expired),
            ("as-other", as_other),
            ("not-wrong-key", wrong_key),
            ("squatted", _spec("squatted")),  # an impostor's unsigned claim on a job id
        ],
    )
    decisions = TopicReader(run.config, DECISIONS_PLACEMENT)
    jobs = ["signed-ok", "squatted", *refused]
    assert wait_for(lambda: _settled(decisions, jobs), 90), run.worker.log_tail()

    placed = _decisions(decisions, "signed-ok")
    assert [d["outcome"] for d in placed] == ["PLACED"] and placed[0]["tenant"] == "vision"
    for job_id, reason in refused.items():
        got = _decisions(decisions, job_id)
        assert [(d["outcome"], d["admitted"]) for d in got] == [("REJECTED", False)], got
        assert reason in got[0]["reasons"][0], got

    # the job id an impostor tried stays free for its owner
    _produce(run, [("squatted", sign(_spec("squatted")))])
    assert wait_for(
        lambda: any(d["outcome"] == "PLACED" for d in _decisions(decisions, "squatted")), 60
    ), run.worker.log_tail()

    # the same signed bytes again: a replay, refused; still one placement
    p = producer(run.config.kafka)
    p.produce(JOBS_SUBMITTED, key=b"signed-ok", value=sent["signed-ok"])
    p.flush(10)
    assert wait_for(lambda: len(_decisions(decisions, "signed-ok")) >= 2, 60)
    replay = _decisions(decisions, "signed-ok")
    assert [d["outcome"] for d in replay] == ["PLACED", "REJECTED"]
    assert "replayed submission" in replay[1]["reasons"][0] and replay[1]["admitted"] is False

    letters = TopicReader(run.config, DEADLETTER)
    assert wait_for(lambda: len(letters.poll(0.3)) >= len(refused) + 2, 30)
    why = {(r["key"], r["error"].split(": ")[1]) for r in letters.records}
    assert (b"unsigned", "unsigned submission") in why
    assert (b"signed-ok", "replayed submission") in why
    assert all(r["consumer"] == "router" for r in letters.records)

    # A worker that owns the region places its job without the `jobs.routed` hop; whatever
    # was handed on carries the verified tenant, and nothing refused was ever routed.
    routed = TopicReader(run.config, JOBS_ROUTED)
    routed.read_to_end()
    mine = [r for r in routed.records if r["job"]["job_id"] == "signed-ok"]
    assert {r["verified_tenant"] for r in mine} <= {"vision"}
    assert not [r for r in routed.records if r["job"]["job_id"] in refused], routed.records
    _assert_no_secret_leaks(run, decisions)
    for reader in (decisions, letters, routed):
        reader.close()


def test_gpuflow_submit_signs_with_the_configured_key(signed_run: Running) -> None:
    env = {
        "GPUFLOW_KAFKA_BOOTSTRAP_SERVERS": signed_run.config.kafka.bootstrap_servers,
        "GPUFLOW_KAFKA_REGION_ORDER": signed_run.config.kafka.region_order,
        "GPUFLOW_AUTH_TENANT": "nlp",
        "GPUFLOW_AUTH_KEY_ID": "kn1",
        "GPUFLOW_AUTH_SECRET": SECRET_N,
    }
    job_id = f"cli-{uuid.uuid4().hex[:6]}"
    args = ["submit", "--job-id", job_id, "--gpus", "1", "--timeout", "60", "--json"]
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output + signed_run.worker.log_tail()
    assert '"outcome": "PLACED"' in result.output and '"tenant": "nlp"' in result.output

    wrong = {**env, "GPUFLOW_AUTH_SECRET": "guessed"}
    result = CliRunner().invoke(app, [*args[:2], f"{job_id}-x", *args[3:]], env=wrong)
    assert result.exit_code == 1 and "bad signature for key 'kn1'" in result.output

    half = {k: v for k, v in env.items() if k != "GPUFLOW_AUTH_SECRET"}
    result = CliRunner().invoke(app, args, env=half)
    assert result.exit_code == 2 and "auth.secret" in result.output


def _assert_no_secret_leaks(run: Running, decisions: TopicReader) -> None:
    base = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}"
    texts = [run.worker.log_path.read_text(errors="replace"), httpx.get(f"{base}/state/").text]
    texts += [bytes(m.value()).decode("latin-1") for m in decisions.raw]
    history = run.config.data_dir / "history.log"
    texts.append(history.read_text(errors="replace") if history.exists() else "")

    def rows(table: str) -> httpx.Response | None:
        query = {"query": f"SELECT * FROM {table}"}
        answer = httpx.post(f"{base}/sql/", json=query, timeout=60)
        return answer if answer.status_code == 200 and answer.json()["rows"] else None

    # the history child opens chDB in ~1 s alone, ~10 s on a loaded machine, and stores each
    # topic as it reads it: wait for every table
    found: dict[str, httpx.Response] = {}

    def stored(table: str) -> bool:
        answer = rows(table)
        if answer is not None:
            found[table] = answer
        return answer is not None

    for table in ("jobs_submitted", "placement_decisions", "dead_letters"):
        assert wait_for(lambda t=table: stored(t), 90), (table, run.worker.log_tail())
        texts.append(found[table].text)
    for secret in (SECRET_V, SECRET_N):
        assert not [t for t in texts if secret in t]
