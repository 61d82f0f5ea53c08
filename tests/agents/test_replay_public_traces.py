"""Traces as the public ones write them: CPU-only tasks with gpu_milli 0 or empty, the Alibaba
GPU traces' pod and node lists (FGD's openb_*.csv) read as they are, their columns kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.replay import Trace, TraceError, load_jobs, load_nodes, write_jobs
from gpuflow.replay import replay_policy, summarize

NODES = "node_id,region,gpu_model,gpu_count,cpu_milli,memory_mib\nn1,eu,V100,2,32000,65536\n"
HEADER = "job_id,submit_s,num_gpus,duration_s,gpu_milli,cpu_milli,memory_mib\n"
# the openb pod list's header and rows of its kinds (a CPU-only pod writes num_gpu 0, milli 0)
OPENB_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
OPENB_PODS = (
    OPENB_HEADER
    + """openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0
openb-pod-0001,6000,12288,1,460,V100M16|V100M32,BE,Pending,10,20,
openb-pod-0002,4000,8192,0,0,,BE,Running,11,30,12
openb-pod-0003,88000,327680,8,1000,G2,Burstable,Succeeded,40,90,41
"""
)
OPENB_NODES = """sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,96000,786432,8,G2
openb-node-0001,96000,786432,2,V100M32
openb-node-0002,64000,262144,0,
"""


@pytest.mark.parametrize("milli", ["0", ""])
def test_a_cpu_only_job_with_no_share_replays(tmp_path: Path, milli: str) -> None:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "jobs.csv").write_text(HEADER + f"c1,0,0,60,{milli},4000,8192\ng1,1,1,60,,,\n")
    jobs = load_jobs(tmp_path / "jobs.csv")
    assert jobs[0].cpu_only and jobs[0].cpu_milli == 4000
    trace = Trace(load_nodes(tmp_path / "nodes.csv"), jobs)
    s = summarize(replay_policy(trace, "gpuflow", arrivals_only=True), policy="x", engine="y")
    assert s["placed"] == 2 and s["refused"] == 0


def test_a_share_on_a_cpu_only_job_is_one_line_naming_the_cell(tmp_path: Path) -> None:
    (tmp_path / "jobs.csv").write_text(HEADER + "c1,0,0,60,500,4000,8192\n")
    with pytest.raises(TraceError, match=r"jobs.csv:2:5: \(gpu_milli\) a CPU-only job"):
        load_jobs(tmp_path / "jobs.csv")


def test_openb_pod_list_is_read_as_written(tmp_path: Path) -> None:
    (tmp_path / "pods.csv").write_text(OPENB_PODS)
    jobs = load_jobs(tmp_path / "pods.csv")
    one, share, cpu, gang = jobs
    assert (one.job_id, one.num_gpus, one.gpu_milli) == ("openb-pod-0000", 1, 1000)
    assert (one.cpu_milli, one.memory_mib, one.submit_s) == (12000, 16384, 0)
    assert share.gpu_milli == 460 and share.gpu_models == ("V100-16", "V100-32")
    assert share.duration_s == 10  # never scheduled: deletion - creation
    assert cpu.cpu_only and cpu.duration_s == 18  # deletion - scheduled
    assert gang.num_gpus == 8 and gang.gpu_models == ("G2",)  # an anonymised model: opaque
    assert dict(share.extra) == {
        "qos": "BE", "pod_phase": "Pending", "creation_time": "10",
        "deletion_time": "20", "scheduled_time": "",
    }  # fmt: skip


def test_public_columns_round_trip_through_jobs_csv(tmp_path: Path) -> None:
    (tmp_path / "pods.csv").write_text(OPENB_PODS)
    jobs = load_jobs(tmp_path / "pods.csv")
    write_jobs(tmp_path / "jobs.csv", jobs)
    text = (tmp_path / "jobs.csv").read_text()
    assert text.splitlines()[0].endswith("qos,pod_phase,creation_time,deletion_time,scheduled_time")
    assert "openb-pod-0002,11,0,18,0," in text  # a CPU-only job writes milli 0, as openb does
    assert load_jobs(tmp_path / "jobs.csv") == jobs  # 12537496 s survives (no %g rounding)


def test_openb_node_list_and_a_bad_cell(tmp_path: Path) -> None:
    (tmp_path / "nodes.csv").write_text(OPENB_NODES)
    gpu8, v100, cpu = load_nodes(tmp_path / "nodes.csv")
    assert (gpu8.node_id, gpu8.gpu_count, gpu8.cpu_milli) == ("openb-node-0000", 8, 96000)
    assert v100.gpu_model == "V100-32" and cpu.cpu_only and cpu.gpu_model == ""
    (tmp_path / "bad.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,x,T4\n")
    with pytest.raises(TraceError, match=r"bad.csv:2:4: \(gpu\) expected an integer"):
        load_nodes(tmp_path / "bad.csv")
