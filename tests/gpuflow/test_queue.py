"""`gpuflow queue` and `gpuflow policy`: the view a real scheduler gives, rendered; errors in one
line; and the preemption / advisory lines of `gpuflow watch`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from typer.testing import CliRunner

from gpuflow.cli import app
from gpuflow.commands.queue import render_queue
from gpuflow.render import advisory_line, preemption_line
from scorer import ClusterState, Placer
from scorer.tenancy import parse_policy
from streams.scheduler.core import Scheduler
from streams.web.queue_view import queue_snapshot

runner = CliRunner()
POLICY = {
    "tenants": {
        "vision": {"cohort": "c", "quotas": [{"nominal": 4, "borrowing_limit": 2}]},
        "nlp": {"cohort": "c", "quotas": [{"nominal": 4}]},
    }
}


def _text(parts: list[Any]) -> str:
    console = Console(width=220, record=True, color_system=None)
    for part in parts:
        console.print(part)
    return console.export_text()


def _scheduler() -> Scheduler:
    state = ClusterState()
    now = [1_700_000_000_000]
    s = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=4,
                  view_ttl_s=0, tenancy=parse_policy(POLICY), clock=lambda: now[0])  # fmt: skip
    s.nodes["n1"] = {"node_id": "n1", "region": "eu", "gpu_model": "A100-80", "gpu_count": 8,
                     "gpu_memory_mib": 81920}  # fmt: skip
    s.rebuild({})
    for i, (tenant, gpus) in enumerate(
        [("vision", 4), ("vision", 2), ("nlp", 2), ("vision", 1), ("ghost", 1)]
    ):
        record = {"event_id": f"e{i}", "ts": now[0], "job_id": f"j{i}", "tenant": tenant,
                  "gpu_count": gpus, "priority_class": "batch"}  # fmt: skip
        out = s.route(record, started_ns=0)
        for msg in out:
            s.place(dict(msg.record), started_ns=0)
    now[0] += 90_000
    return s


def test_the_queue_view_shows_usage_against_quota_and_why_each_job_waits() -> None:
    view = json.loads(json.dumps(queue_snapshot(_scheduler())))  # as the worker serves it
    eu = view["regions"]["eu"]
    vision = next(t for t in eu["tenants"] if t["tenant"] == "vision")
    # vision runs 4 (nominal) + 2 borrowed from nlp's idle quota = 6 of its limit 4 + 2
    assert vision["cells"] == [
        {
            "gpu_class": "A100-80",
            "used": 6.0,
            "nominal": 4.0,
            "borrowed": 2.0,
            "borrowing_limit": 2.0,
        }
    ]
    waiting = {j["job_id"]: j for j in eu["waiting"]}
    assert (
        waiting["j3"]["reason_code"] == "QUOTA" and "borrowing limit 6" in waiting["j3"]["reason"]
    )
    assert waiting["j4"]["reason"] == "quota: tenant 'ghost' has no quota in the policy"
    assert waiting["j3"]["waited_s"] == 90.0
    text = _text(render_queue(view))
    assert "eu: 0 of 8 GPUs free, 2 waiting" in text
    assert "QUOTA: quota: vision holds 6 of nominal 4 GPUs in eu/A100-80, borrowing limit 6" in text
    assert "vision" in text and "nlp" in text


def test_queue_without_a_worker_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["queue", "--url", "http://127.0.0.1:9", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "no worker answering" in result.output


def test_policy_check_names_the_bad_field_or_summarises(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("tenants:\n  vision:\n    quotas:\n      - {nominal: -3}\n")
    result = runner.invoke(app, ["policy", str(bad)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "tenants.vision.quotas[0].nominal: must be >= 0, got -3" in result.output
    good = tmp_path / "good.yaml"
    good.write_text(json.dumps(POLICY))  # JSON is YAML
    result = runner.invoke(app, ["policy", str(good)])
    assert result.exit_code == 0, result.output
    assert "online-inference 1000 (not preemptible)" in result.output and "vision" in result.output


def _plain(markup: str) -> str:
    console = Console(width=400, record=True, color_system=None)
    console.print(markup, highlight=False, soft_wrap=True)
    return console.export_text().strip()


def test_watch_lines_for_preemptions_and_advisories() -> None:
    pre = {
        "job_id": "b1", "for_job_id": "inf", "region": "eu", "cause": "RECLAIM",
        "victim_assignments": [{"node_id": "n1", "gpu_indices": [0, 1], "gpu_milli": 1000}],
        "checkpoint_first": True, "grace_period_s": 60.0, "victim_priority": 0, "victim_epoch": 2,
        "victim_tenant": "batch-team", "for_tenant": "serving", "for_priority": 1000,
        "expected_lost_gpu_s": 812.0, "reason": "reclaim: [quota]",
    }  # fmt: skip
    text = _plain(preemption_line(pre))
    assert text.startswith("RECLAIM  b1")
    assert (
        "(batch-team, priority 0, 2 GPUs, epoch 2) for inf (serving, priority 1000) in eu" in text
    )
    assert "checkpoint first, grace 60s; 812 GPU-s unsaved  reclaim: [quota]" in text
    adv = {"node_id": "n1", "region": "eu", "action": "CORDON", "reason": "GPU_ERRORS",
           "detail": "2 ECC/XID errors within 600s", "job_ids": ["a", "b"]}  # fmt: skip
    assert _plain(advisory_line(adv)) == (
        "CORDON   n1                     in eu GPU_ERRORS: 2 ECC/XID errors within 600s [a, b]"
    )
