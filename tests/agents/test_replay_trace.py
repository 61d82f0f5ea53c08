"""Trace parsing: the documented format, forgiving whitespace, errors naming file:line:column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.replay import TraceError, load_gavel_trace, load_jobs, load_nodes, load_philly_trace
from agents.replay.trace_reader import load_throughputs, load_trace
from scorer import GAVEL_CSV, load_gavel_csv

TABLE = GAVEL_CSV

NODES = """node_id, region, gpu_model, gpu_count, zone
n1, eu, v100, 4, eu-a

# comment
n2 ,eu,P100,4,
"""
JOBS = """job_id,submit_s,num_gpus,duration_s,gpu_milli,gpu_models,job_type
j2, 10, 1, 100, 500, ,
j1, 0, 2, 3600, , V100|p100, ResNet-50 (batch size 64)
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_parses_with_whitespace_blank_lines_comments_and_aliases(tmp_path: Path) -> None:
    nodes = load_nodes(write(tmp_path, "nodes.csv", NODES))
    assert [n.node_id for n in nodes] == ["n1", "n2"]
    assert nodes[0].gpu_model == "V100-16" and nodes[1].zone == ""
    assert nodes[0].gpu_memory_mib == 16384 and nodes[0].price_per_gpu_hour > 0
    jobs = load_jobs(write(tmp_path, "jobs.csv", JOBS))
    assert [j.job_id for j in jobs] == ["j1", "j2"]  # sorted by submit time
    assert jobs[0].gpu_models == ("V100-16", "P100") and jobs[0].gpu_milli == 1000
    assert jobs[1].gpu_milli == 500 and jobs[1].gpu_models == ()


@pytest.mark.parametrize(
    ("name", "text", "where", "words"),
    [
        # header lacks a required column: line 1, column 1
        ("nodes.csv", "node_id,region,gpu_model\nn1,eu,V100\n", ":1:1", "gpu_count"),
        # gpu_count "four" on line 3, 4th column
        (
            "nodes.csv",
            "node_id,region,gpu_model,gpu_count\nn1,eu,V100,4\nn2,eu,V100,four\n",
            ":3:4",
            "integer",
        ),
        ("nodes.csv", "node_id,region,gpu_model,gpu_count\nn1,eu,,4\n", ":2:3", "required"),
        (
            "nodes.csv",
            "node_id,region,gpu_model,gpu_count\nn1,eu,V100,4\nn1,eu,K80,4\n",
            ":3:1",
            "duplicate",
        ),
        ("jobs.csv", "job_id,submit_s,num_gpus,duration_s\nj1,0,1,-5\n", ":2:4", "> 0"),
        (
            "jobs.csv",
            "job_id,submit_s,num_gpus,duration_s,gpu_milli\nj1,0,2,5,500\n",
            ":2:5",
            "num_gpus 1",
        ),
        (
            "jobs.csv",
            "job_id,submit_s,num_gpus,duration_s,gpu_milli\nj1,0,1,5,1500\n",
            ":2:5",
            "1..1000",
        ),
        ("jobs.csv", "job_id,submit_s,num_gpus,duration_s\nj1,,1,5\n", ":2:2", "required"),
        ("jobs.csv", "job_id,submit_s,num_gpus,duration_s\nj1,0,1,5,7\n", ":2:5", "cells"),
        (  # a CPU-only job must ask for some host resource
            "jobs.csv",
            "job_id,submit_s,num_gpus,duration_s\nj1,0,0,5\n",
            ":2:3",
            "CPU-only",
        ),
        ("jobs.csv", "job_id,submit_s,num_gpus,duration_s,kind\nj1,0,1,5,GAME\n", ":2:5", "kind"),
        ("jobs.csv", "", "jobs.csv", "empty"),
    ],
)
def test_bad_files_name_file_line_and_column(
    tmp_path: Path, name: str, text: str, where: str, words: str
) -> None:
    path = write(tmp_path, name, text)
    loader = load_nodes if name == "nodes.csv" else load_jobs
    with pytest.raises(TraceError) as err:
        loader(path)
    message = str(err.value)
    assert message.startswith(str(path)) and where in message and words in message
    assert "\n" not in message


def test_missing_file_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read"):
        load_jobs(tmp_path / "nope.csv")


def test_throughputs_csv_and_gavel_table(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "t.csv",
        "job_type,gpu_model,num_gpus,steps_per_s\nbert,V100,1,10\nbert,K80,1,2.5\n",
    )
    tp = load_throughputs(path)
    assert tp.measured[("bert", "K80", 1, True)] == 2.5
    trace = load_trace(write(tmp_path, "n.csv", NODES), write(tmp_path, "j.csv", JOBS), TABLE)
    assert trace.throughput is not None and trace.throughput.knows("A3C")
    bad = write(tmp_path, "b.csv", "job_type,gpu_model,num_gpus,steps_per_s\nbert,V100,1,x\n")
    with pytest.raises(TraceError, match=r"b.csv:2:4"):
        load_throughputs(bad)


def test_gavel_adapter_derives_durations_from_steps(tmp_path: Path) -> None:
    tp = load_gavel_csv(TABLE)
    nodes = load_nodes(write(tmp_path, "nodes.csv", NODES))
    v100 = tp.measured[("A3C", "V100-16", 1, True)]
    line = "A3C\tcmd\tdir\t--steps\tFalse\t{steps}\t1\t1\t-1\t{t}\n"
    path = write(
        tmp_path, "g.trace", line.format(steps=v100 * 3600, t=0) + line.format(steps=100, t=30)
    )
    trace = load_gavel_trace(nodes, path, tp)
    assert [j.submit_s for j in trace.jobs] == [0, 30]
    assert trace.jobs[0].duration_s == pytest.approx(3600)
    bad = write(tmp_path, "bad.trace", line.format(steps="lots", t=0))
    with pytest.raises(TraceError, match=r"bad.trace:1:6"):
        load_gavel_trace(nodes, bad, tp)


def test_philly_adapter_maps_attempts(tmp_path: Path) -> None:
    nodes = load_nodes(write(tmp_path, "nodes.csv", NODES))
    log = [
        {
            "jobid": "a",
            "submitted_time": "2017-10-03 10:00:00",
            "status": "Pass",
            "vc": "vc1",
            "user": "u",
            "attempts": [
                {
                    "start_time": "2017-10-03 10:01:00",
                    "end_time": "2017-10-03 10:11:00",
                    "detail": [
                        {"ip": "m1", "gpus": ["gpu0", "gpu1"]},
                        {"ip": "m2", "gpus": ["gpu0"]},
                    ],
                },
                {
                    "start_time": "2017-10-03 11:00:00",
                    "end_time": "2017-10-03 11:05:00",
                    "detail": [{"ip": "m1", "gpus": ["gpu0"]}],
                },
            ],
        },
        {
            "jobid": "never",
            "submitted_time": "2017-10-03 10:05:00",
            "status": "Killed",
            "vc": "vc2",
            "user": "u",
            "attempts": [],
        },
    ]
    path = write(tmp_path, "philly.json", json.dumps(log, indent=1))
    trace = load_philly_trace(nodes, path)
    [job] = trace.jobs
    assert (job.job_id, job.num_gpus, job.duration_s, job.tenant) == ("a", 3, 900.0, "vc1")
    broken = write(tmp_path, "broken.json", '[{"jobid": "a",\n "submitted_time": }]')
    with pytest.raises(TraceError, match=r"broken.json:2:20"):
        load_philly_trace(nodes, broken)
