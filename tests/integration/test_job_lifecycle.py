"""A job's lifecycle on the real broker, worker, ClickHouse and executor twin (issue 31):
`gpuflow jobs` and `gpuflow status`, a time limit, cancel of a queued and of a running job
with the quota back, a cancel from another tenant refused and dead-lettered, an admin key,
and nothing run twice after the worker is killed and rebuilds from its logs."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import CODEC, Running, TopicReader, run_stack, wait_for
from typer.testing import CliRunner

from gpuflow.cli import app
from infra.config import AuthConfig, Config
from infra.jobspec import job_record
from infra.kafka import producer
from infra.topics import DEADLETTER, DECISIONS_PLACEMENT, JOBS_SUBMITTED
from schemas.signing import Signer, TenantKey

pytestmark = pytest.mark.integration

A, B, OPS = TenantKey("A", "ka", "sa-1"), TenantKey("B", "kb", "sb-1"), TenantKey("ops", "ko", "so")
POLICY = {
    "tenants": {t: {"quotas": [{"region": "*", "gpu_class": "*", "nominal": 3}]}
                for t in ("A", "B", "ops")},
    "preemption": {"enabled": True, "grace_period_s": 5},
}  # fmt: skip


@pytest.fixture
def stack(config: Config, tmp_path: Path) -> Any:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(POLICY))
    keys = ",".join(f"{k.tenant}:{k.key_id}:{k.secret}" for k in (A, B, OPS))
    auth = AuthConfig(keys=keys, admin_keys="ko", max_age_s=300)
    with run_stack(dataclasses.replace(config, auth=auth), policy_file=str(policy)) as run:
        yield run


def _cli(run: Running, key: TenantKey, *args: str) -> Any:
    env = {
        "GPUFLOW_KAFKA_BOOTSTRAP_SERVERS": run.config.kafka.bootstrap_servers,
        "GPUFLOW_AUTH_TENANT": key.tenant, "GPUFLOW_AUTH_KEY_ID": key.key_id,
        "GPUFLOW_AUTH_SECRET": key.secret,
    }  # fmt: skip
    url = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}"
    return CliRunner().invoke(app, [*args, "--url", url], env=env)


def _jobs(run: Running, tenant: str = "A") -> dict[str, dict[str, Any]]:
    result = _cli(run, A, "jobs", "--tenant", tenant, "--json")
    if result.exit_code != 0:
        return {}
    return {j["job_id"]: j for j in json.loads(result.output)["jobs"]}


def _submit(run: Running, region: str, u: str) -> dict[str, str]:
    ids = {name: f"{name}-{u}" for name in ("run", "lim", "wait")}
    specs = [
        (ids["run"], {"gpu_count": 1, "expected_duration_s": 600}),
        (ids["lim"], {"gpu_count": 1, "expected_duration_s": 600, "time_limit_s": 2}),
        (ids["wait"], {"gpu_count": 3, "expected_duration_s": 600}),  # over A's quota of 3
    ]
    p = producer(run.config.kafka)
    for job_id, fields in specs:
        spec = job_record({"job_id": job_id, "allowed_regions": [region],
                           "allowed_gpu_models": ["A100-80"], **fields})  # fmt: skip
        p.produce(JOBS_SUBMITTED, key=job_id.encode(),
                  value=CODEC.encode("JobSubmitted", Signer(A).sign(spec)))  # fmt: skip
        p.flush(10)
        if job_id == ids["run"]:  # placed first, so the 3-GPU job is the one over quota
            assert wait_for(lambda: _jobs(run).get(ids["run"], {}).get("state") == "RUNNING", 30)
    return ids


def _used(run: Running, tenant: str) -> float:
    url = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}/queue/"
    view = httpx.get(url, timeout=5).json()
    return sum(c["used"] for r in view["regions"].values() for t in r["tenants"]
               if t["tenant"] == tenant for c in t["cells"])  # fmt: skip


def _epochs(run: Running, job_id: str) -> list[dict[str, Any]]:
    result = _cli(run, A, "status", job_id, "--json")
    return json.loads(result.output)["epochs"] if result.exit_code == 0 else []


def test_jobs_status_cancel_and_no_double_run_after_a_restart(stack: Running) -> None:
    run, u = stack, uuid.uuid4().hex[:6]
    region = run.config.kafka.region_order.split(",")[0]
    letters = TopicReader(run.config, DEADLETTER)
    ids = _submit(run, region, u)
    tail = run.worker.log_tail
    assert wait_for(lambda: _jobs(run).get(ids["lim"], {}).get("state") == "TIMEOUT", 30), tail()
    jobs = _jobs(run)
    assert (jobs[ids["run"]]["state"], jobs[ids["run"]]["region"]) == ("RUNNING", region)
    assert (jobs[ids["wait"]]["state"], jobs[ids["wait"]]["reason_code"]) == ("PENDING", "QUOTA")
    table = _cli(run, A, "jobs", "--tenant", "A").output
    assert ids["wait"] in table and "QUOTA" in table and "RUNNING" in table

    # another tenant may not cancel A's job: refused, dead-lettered with the reason
    assert _cli(run, B, "cancel", ids["run"]).exit_code == 0  # sent; the worker decides
    why = "cancel refused: tenant 'B' may not cancel a job of tenant 'A'"
    seen = lambda: any(why in str(r.get("error")) for r in letters.poll(0.3))  # noqa: E731
    assert wait_for(seen, 20), tail()
    assert _jobs(run)[ids["run"]]["state"] == "RUNNING"

    # the owner cancels the queued job; an admin key the running one
    out = _cli(run, A, "cancel", ids["wait"], "--reason", "not needed")
    assert out.exit_code == 0 and "cancel requested (PENDING" in out.output
    assert _cli(run, OPS, "cancel", ids["run"]).exit_code == 0
    over = lambda: {_jobs(run).get(ids[n], {}).get("state") for n in ("run", "wait")}  # noqa: E731
    assert wait_for(lambda: over() == {"CANCELLED"}, 30), tail()
    assert wait_for(lambda: _used(run, "A") == 0.0, 10)  # quota back
    again = _cli(run, A, "cancel", ids["run"])
    assert again.exit_code == 1 and again.output.strip() == (
        f"{ids['run']}: already CANCELLED; nothing to cancel"
    )

    # ClickHouse keeps each epoch with its exit code
    ended = lambda n: [e["state"] for e in _epochs(run, ids[n])]  # noqa: E731
    done = lambda: ended("run") == ["CANCELLED"] and ended("lim") == ["TIMEOUT"]  # noqa: E731
    q = (
        f"SELECT (SELECT count() FROM job_events WHERE job_id = '{ids['lim']}'), "
        f"(SELECT count() FROM placement_decisions WHERE job_id = '{ids['lim']}')"
    )
    assert wait_for(done, 30), _cli(run, A, "sql", q).output + tail(4000)
    [lim] = _epochs(run, ids["lim"])
    assert (lim["exit_code"], lim["nodes"] != [], lim["gpus"]) == (-15, True, 1.0)
    text = _cli(run, A, "status", ids["lim"]).output
    assert "TIMEOUT" in text and "-15" in text and "retries used 0/0" in text
    web = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}/ui/api"
    live = {j["job_id"]: j["state"] for j in httpx.get(f"{web}/live", timeout=5).json()["jobs"]}
    assert live[ids["run"]] == "CANCELLED" and live[ids["lim"]] == "TIMEOUT"
    page = httpx.get(f"{web}/job", params={"job": ids["lim"]}, timeout=10).json()
    assert [(e["state"], e["exit_code"]) for e in page["epochs"]] == [("TIMEOUT", -15)]

    # SIGKILL the worker: the rebuilt one runs none of them again
    decisions = TopicReader(run.config, DECISIONS_PLACEMENT)
    run.worker.kill()
    run.restart_worker()
    assert wait_for(lambda: _jobs(run).get(ids["lim"], {}).get("state") == "TIMEOUT", 60), tail()
    assert {_jobs(run)[ids[n]]["state"] for n in ("run", "wait")} == {"CANCELLED"}
    time.sleep(2.0)  # a replayed record would be placed again by now
    placed = [(d["job_id"], d.get("epoch")) for d in decisions.read_to_end()
              if d.get("job_id") in ids.values() and d["outcome"] == "PLACED"]  # fmt: skip
    assert sorted(placed) == sorted([(ids["run"], 0), (ids["lim"], 0)])
    assert _used(run, "A") == 0.0
