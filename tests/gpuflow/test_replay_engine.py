"""In-process replay: summary fields and their consistency, policies, CLI output and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from agents.replay import Trace, gavel_cluster, gavel_jobs, write_jobs, write_nodes
from gpuflow.commands.replay import replay
from gpuflow.replay import InProcessDecider, replay_policy, run_replay, summarize
from scorer import GAVEL_CSV, load_gavel_csv

TABLE = GAVEL_CSV
FIELDS = (
    "jobs",
    "completed",
    "rejected",
    "avg_jct_s",
    "p50_jct_s",
    "p99_jct_s",
    "avg_wait_s",
    "p99_wait_s",
    "makespan_s",
    "gpu_alloc_rate",
    "gpu_hours",
    "preemptions",
    "migrations",
    "cost",
    "carbon_kg",
)


@pytest.fixture(scope="module")
def trace() -> Trace:
    tp = load_gavel_csv(TABLE)
    return Trace(gavel_cluster(12, 4), gavel_jobs(tp, 80, 300.0, seed=4), tp)


def test_summary_fields_present_and_consistent(trace: Trace) -> None:
    s = summarize(replay_policy(trace, "gpuflow"), policy="gpuflow", engine="inprocess")
    assert all(k in s for k in FIELDS)
    assert s["completed"] + s["rejected"] + s["running"] + s["waiting"] == s["jobs"] == 80
    assert s["completed"] == 80  # every job ends once the trace drains
    assert 0 < s["gpu_alloc_rate"] <= 1 and s["p50_jct_s"] <= s["p99_jct_s"]
    assert s["avg_wait_s"] >= 0 and s["makespan_s"] > 0 and s["cost"] > 0
    assert s["gpu_hours"] == pytest.approx(sum(s["gpu_hours_by_model"].values()), rel=1e-3)


def test_arrivals_only_reports_packing(trace: Trace) -> None:
    s = summarize(replay_policy(trace, "fgd", arrivals_only=True), policy="fgd", engine="x")
    assert s["completed"] == 0 and s["running"] + s["waiting"] + s["rejected"] == s["jobs"]
    assert 0 < s["first_refusal_alloc_rate"] <= s["final_alloc_rate"] <= 1
    assert s["gpu_hours"] > 0  # running jobs count their GPU time so far


def test_replay_matches_the_scheduler_decisions(trace: Trace) -> None:
    result = run_replay(trace, InProcessDecider("fifo", trace.throughput))
    placed = [d for d in result.decisions if d["outcome"] == "PLACED"]
    assert len({d["job_id"] for d in placed}) == len(placed) == 80  # each job placed once


def test_gpuflow_beats_heterogeneity_blind_fifo(trace: Trace) -> None:
    assert trace.throughput is not None
    trace = Trace(trace.nodes, gavel_jobs(trace.throughput, 80, 900.0, seed=4), trace.throughput)
    jct = {
        p: summarize(replay_policy(trace, p), policy=p, engine="inprocess")["avg_jct_s"]
        for p in ("fifo", "gpuflow")
    }
    assert jct["gpuflow"] < 0.8 * jct["fifo"]


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("replay")(replay)
    app.command("noop")(lambda: None)
    return app


def _replay_args(tmp_path: Path, *rest: str) -> list[str]:
    """`gpuflow replay` over the nodes.csv and jobs.csv in `tmp_path`."""
    nodes, jobs = str(tmp_path / "nodes.csv"), str(tmp_path / "jobs.csv")
    return ["replay", "--nodes", nodes, "--jobs", jobs, *rest]


def test_cli_compare_writes_summary_and_plots(tmp_path: Path, trace: Trace) -> None:
    write_nodes(tmp_path / "nodes.csv", trace.nodes)
    write_jobs(tmp_path / "jobs.csv", trace.jobs[:30])
    out = tmp_path / "out"
    args = _replay_args(tmp_path, "--throughputs", "gavel")
    res = CliRunner().invoke(
        _app(), [*args, "--compare", "fifo,bestfit,fgd,gpuflow", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "summary.json").read_text())
    assert set(doc["policies"]) == {"fifo", "bestfit", "fgd", "gpuflow"}
    assert (out / "jct_cdf.png").stat().st_size > 1000 and (out / "allocation.png").is_file()
    single = CliRunner().invoke(
        _app(), [*args, "--policy", "fgd", "--arrivals-only", "--out", str(out / "one")]
    )
    assert single.exit_code == 0, single.output
    assert "final_alloc_rate" in json.loads((out / "one" / "summary.json").read_text())


@pytest.mark.parametrize(
    ("jobs_text", "extra", "expect"),
    [
        ("job_id,submit_s,num_gpus,duration_s\nj1,0,x,5\n", [], "jobs.csv:2:3"),
        ("job_id,submit_s,num_gpus,duration_s\nj1,0,1,5\n", ["--policy", "nope"], "nope"),
        ("job_id,submit_s,num_gpus,duration_s\nj1,0,1,5\n", ["--engine", "warp"], "warp"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(
    tmp_path: Path, trace: Trace, jobs_text: str, extra: list[str], expect: str
) -> None:
    write_nodes(tmp_path / "nodes.csv", trace.nodes)
    (tmp_path / "jobs.csv").write_text(jobs_text)
    res = CliRunner().invoke(_app(), _replay_args(tmp_path, "--out", str(tmp_path / "o"), *extra))
    assert res.exit_code == 2
    assert expect in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_gavel_rounds_stop_and_resume_jobs_in_one_tick() -> None:
    """All jobs at t=0 on a small cluster: Gavel's rounds end leases (checkpoint-first
    preemptions) and place jobs again in the same tick; every job completes, nothing is lost."""
    tp = load_gavel_csv(TABLE)
    static = Trace(gavel_cluster(4, 4), gavel_jobs(tp, 24, 0.0, seed=1), tp)
    result = replay_policy(static, "gavel")
    s = summarize(result, policy="gavel", engine="inprocess")
    assert s["completed"] == s["jobs"] == 24
    assert s["preemptions"] > 0  # leases changed hands between rounds
    assert sum(r.lost_gpu_seconds for r in result.twin.runs.values()) == 0.0
