"""Priority preemption on the real broker and worker: a region's A100s full of one tenant's
batch gangs, an online-inference job of another tenant arrives. Preemption -> eviction ->
placement within a bounded number of events, the victim requeues and completes, and no GPU is
promised twice, judged from the decision and job-event logs alone; a SIGKILL of the worker
between the preemption and the placement loses neither job."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import (
    Running,
    TopicReader,
    duplicated,
    logged_overbooking,
    start_running,
    submit_jobs,
    wait_for,
)
from typer.testing import CliRunner

from gpuflow.cli import app
from infra.config import Config
from infra.topics import DECISIONS_PLACEMENT, DECISIONS_PREEMPTION, JOBS_EVENTS

pytestmark = pytest.mark.integration

REGION, MODEL = "us-east", "A100-80"  # two 8-GPU A100 nodes in the harness fleet
# every victim checkpoints first, so the executor's checkpoint is a window to crash in
POLICY = {"preemption": {"checkpoint_stale_s": 0, "grace_period_s": 120}}


def _batch(i: int) -> dict[str, Any]:
    return {
        "job_id": f"batch-{i}", "tenant": "research", "priority_class": "batch", "kind": "TRAINING",
        "precision": "FP16", "gpu_count": 8, "allowed_regions": [REGION],
        "allowed_gpu_models": [MODEL], "expected_duration_s": 20.0, "checkpoint_interval_s": 600,
    }  # fmt: skip


SERVING = {
    "job_id": "serve-0", "tenant": "serving", "priority_class": "online-inference",
    "kind": "INFERENCE", "precision": "FP16", "gpu_count": 4, "allowed_regions": [REGION],
    "allowed_gpu_models": [MODEL], "expected_duration_s": 5.0,
}  # fmt: skip


def _policy(tmp_path: Path) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(json.dumps(POLICY))
    return str(path)


def _fill(run: Running, decisions: TopicReader) -> None:
    submit_jobs(run.config, [_batch(0), _batch(1)], rate_per_s=20.0)
    placed = lambda: {d["job_id"] for d in decisions.poll() if d["outcome"] == "PLACED"}  # noqa: E731
    assert wait_for(lambda: {"batch-0", "batch-1"} <= placed(), 60), run.worker.log_tail()


def _scene(run: Running) -> tuple[TopicReader, TopicReader, TopicReader]:
    """The A100s full of research's batch gangs, then the serving job: the three logs."""
    decisions = TopicReader(run.config, DECISIONS_PLACEMENT)
    preemptions = TopicReader(run.config, DECISIONS_PREEMPTION)
    events = TopicReader(run.config, JOBS_EVENTS)
    _fill(run, decisions)
    submit_jobs(run.config, [SERVING], rate_per_s=1.0)
    return decisions, preemptions, events


def _about(records: list[dict[str, Any]], jobs: set[str]) -> list[dict[str, Any]]:
    return [r for r in records if r["job_id"] in jobs]


def _chain(decisions: list[dict[str, Any]], preemptions: list[dict[str, Any]],
           events: list[dict[str, Any]]) -> list[tuple[str, str, str]]:  # fmt: skip
    """What happened to the preemptor and its victims, in time order."""
    victims = {p["job_id"] for p in preemptions if p["for_job_id"] == "serve-0"}
    rows = [
        (d["ts"], "decision", d["job_id"], d["outcome"])
        for d in _about(decisions, {"serve-0", *victims})
    ]
    rows += [(p["ts"], "preemption", p["job_id"], p["for_job_id"]) for p in preemptions]
    rows += [(e["ts"], "event", e["job_id"], e["type"]) for e in _about(events, victims)]
    return [r[1:] for r in sorted(rows)]


def _finished(events: list[dict[str, Any]]) -> set[tuple[str, int]]:
    return {(e["job_id"], int(e["epoch"])) for e in events if e["type"] == "FINISHED"}


def test_preemption_eviction_placement_and_the_victim_completes(
    config: Config, tmp_path: Path
) -> None:
    with start_running(config, checkpoint_s=6.0, policy_file=_policy(tmp_path)) as run:
        decisions, preemptions, events = _scene(run)
        assert wait_for(
            lambda: any(p["for_job_id"] == "serve-0" for p in preemptions.poll()), 30
        ), run.worker.log_tail()
        # while the victim checkpoints, `gpuflow queue` shows the preemptor waiting on it
        url = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}"
        view = CliRunner().invoke(app, ["queue", "--url", url, "--json", "--region", REGION])
        waiting = {j["job_id"]: j for j in json.loads(view.output)["regions"][REGION]["waiting"]}
        assert waiting["serve-0"]["reason_code"] == "PREEMPTING", view.output
        served = lambda: any(  # noqa: E731
            d["job_id"] == "serve-0" and d["outcome"] == "PLACED" for d in decisions.poll()
        )
        assert wait_for(served, 30), run.worker.log_tail()
        [pre] = preemptions.records
        victim = pre["job_id"]
        # one whole 8-GPU gang goes for 4 GPUs (never half of one); checkpoint first
        assert pre["victim_tenant"] == "research" and pre["cause"] == "PRIORITY"
        assert sum(len(a["gpu_indices"]) for a in pre["victim_assignments"]) == 8
        assert pre["checkpoint_first"] and pre["victim_epoch"] == 0
        chain = _chain(decisions.records, preemptions.records, events.poll())
        placed_at = chain.index(("decision", "serve-0", "PLACED"))
        # bounded: from the victim's placement to the preemptor's, seven events and no more
        # (the victim placed and started; the preemptor queued, preempting; the preemption;
        # the eviction; the victim requeued; the preemptor placed), in causal order
        assert sorted(chain[: placed_at + 1]) == sorted(
            [
                ("decision", victim, "PLACED"),
                ("event", victim, "STARTED"),
                ("decision", "serve-0", "QUEUED"),
                ("preemption", victim, "serve-0"),
                ("event", victim, "EVICTED"),
                ("decision", victim, "QUEUED"),
                ("decision", "serve-0", "PLACED"),
            ]
        ), chain
        preempted_at = chain.index(("preemption", victim, "serve-0"))
        assert preempted_at < chain.index(("event", victim, "EVICTED")) < placed_at
        # the victim waits again at epoch 1 with its progress, then runs and completes
        done = {("batch-0", 0), ("batch-1", 0), ("serve-0", 0)} - {(victim, 0)} | {(victim, 1)}
        assert wait_for(lambda: done <= _finished(events.poll()), 90), (
            _chain(decisions.poll(), preemptions.poll(), events.records),
            run.worker.log_tail(),
        )
        requeued = [d for d in decisions.poll(1.0) if d["job_id"] == victim and d["epoch"] == 1]
        assert [d["outcome"] for d in requeued] == ["QUEUED", "PLACED"]
        evicted = next(e for e in events.records if e["type"] == "EVICTED")
        assert 0 < evicted["progress"] < 1 and evicted["lost_gpu_s"] == 0.0  # checkpointed
        assert duplicated(decisions.records) == {}
        assert logged_overbooking(decisions, events) == []
        _lost_by_tenant_in_history(run)
        for reader in (decisions, preemptions, events):
            reader.close()


def _lost_by_tenant_in_history(run: Running) -> None:
    """The preemption lands in ClickHouse and the ready query answers for the victim's tenant."""
    from infra.store.queries import GPU_HOURS_LOST_TO_PREEMPTION_BY_TENANT

    url = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}/sql/"

    def rows() -> list[Any]:
        answer = httpx.post(url, json={"query": GPU_HOURS_LOST_TO_PREEMPTION_BY_TENANT}, timeout=30)
        return list(answer.json().get("rows", [])) if answer.status_code == 200 else []

    assert wait_for(lambda: [r[:5] for r in rows()] == [["research", 1, 0, 8, 0]], 60), rows()


def test_sigkill_between_preemption_and_placement_loses_neither_job(
    config: Config, tmp_path: Path
) -> None:
    # the executor's checkpoint takes 8 s: the worker dies while the victim is checkpointing
    with start_running(config, checkpoint_s=8.0, policy_file=_policy(tmp_path)) as run:
        decisions, preemptions, events = _scene(run)
        assert wait_for(lambda: bool(preemptions.poll()), 30), run.worker.log_tail()
        run.worker.kill()
        killed_at = time.time() * 1000
        victim = preemptions.records[0]["job_id"]
        early = [
            d for d in decisions.poll(0.5) if d["job_id"] == "serve-0" and d["outcome"] == "PLACED"
        ]
        assert early == [], "the kill must land between the preemption and the placement"
        time.sleep(1.0)
        run.restart_worker()
        done = {("batch-0", 0), ("batch-1", 0), ("serve-0", 0)} - {(victim, 0)} | {(victim, 1)}
        assert wait_for(lambda: done <= _finished(events.poll()), 150), (
            _chain(decisions.poll(), preemptions.poll(), events.records),
            run.worker.log_tail(4000),
        )
        placed = [
            d for d in decisions.poll(3.0) if d["job_id"] == "serve-0" and d["outcome"] == "PLACED"
        ]
        assert len(placed) == 1 and placed[0]["ts"] > killed_at  # placed by the new worker
        assert duplicated(decisions.records) == {}
        assert logged_overbooking(decisions, events) == []
        for reader in (decisions, preemptions, events):
            reader.close()


def test_the_grace_period_ends_on_the_worker_timer(config: Config, tmp_path: Path) -> None:
    """No executor: nobody reports the eviction. The worker's timer (a tick per owned
    partition, as an event, so table writes land in the right changelog) ends the grace
    period: the victim is requeued at epoch 1 and the preemptor placed."""
    path = tmp_path / "policy.yaml"
    path.write_text(json.dumps({"preemption": {"grace_period_s": 3}}))
    with start_running(config, executor=False, policy_file=str(path), replan_interval_s=1.0) as run:
        decisions = TopicReader(run.config, DECISIONS_PLACEMENT)
        _fill(run, decisions)
        submit_jobs(run.config, [SERVING], rate_per_s=1.0)
        served = lambda: [  # noqa: E731
            d for d in decisions.poll() if d["job_id"] == "serve-0" and d["outcome"] == "PLACED"
        ]
        assert wait_for(lambda: bool(served()), 60), run.worker.log_tail(4000)
        queued = [
            d for d in decisions.records if d["job_id"] == "serve-0" and d["outcome"] == "QUEUED"
        ]
        assert served()[0]["ts"] - queued[0]["ts"] >= 3000  # not before the deadline
        requeued = [d for d in decisions.records if d.get("epoch") == 1]
        assert len(requeued) == 1 and "grace period over" in requeued[0]["reasons"][0]
        decisions.close()
