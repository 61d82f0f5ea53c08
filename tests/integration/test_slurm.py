"""The Slurm bridge against a real Slurm 22.05 (munged, slurmctld, one slurmd per node) on
this host: inventory, a gang on exactly the placed nodes, plain sbatch jobs respected, a
refused placement, a bridge SIGKILLed and restarted, two clusters. Stopping jobs (preemption,
cancel, a drained node) is `test_slurm_stops.py`."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from slurm_cluster import (
    REGION,
    Bridge,
    bridge,
    events_of,
    free_gpus,
    place,
    readers,
    slurm_cluster,
    slurm_config,
    slurm_tags,
    submit,
    until,
    worker,
)

from agents.slurm.commands import expand_hostlist, parse_records
from agents.slurm.local import LocalSlurm
from infra.config import Config
from infra.topics import DECISIONS_PLACEMENT, JOBS_EVENTS, JOBS_LOGS, NODE_INVENTORY

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("slurm")]


PRINT_ENV = [
    "bash",
    "-c",
    "echo NODE=$SLURMD_NODENAME ID=$SLURM_NODEID "
    "LIST=$SLURM_JOB_NODELIST GPUS=$CUDA_VISIBLE_DEVICES JOB=$GPUFLOW_JOB_ID",
]


def test_inventory_gang_and_plain_sbatch(config: Config, tmp_path: Path) -> None:
    cfg = slurm_config(config, [REGION])
    inv, decisions, events, logs = readers(
        cfg, NODE_INVENTORY, DECISIONS_PLACEMENT, JOBS_EVENTS, JOBS_LOGS
    )
    with (
        slurm_cluster(tmp_path / "sa", name="gfa", prefix="a") as sl,
        worker(cfg) as w,
        bridge(cfg, REGION, sl, tmp_path / "bridge.log") as b,
    ):
        # inventory equals what scontrol reports
        until(lambda: len({r["node_id"] for r in inv.poll()}) == 4, 30, "inventory", b)
        nodes = {r["NodeName"]: r for r in parse_records(sl.scontrol("show", "node", "-o"))}
        for r in {r["node_id"]: r for r in inv.records}.values():
            n = nodes[r["node_id"]]
            assert r["region"] == REGION and r["gpu_model"] == "H100" and r["gpu_count"] == 8
            assert r["cpu_milli"] == int(n["CPUTot"]) * 1000
            assert r["memory_mib"] == int(n["RealMemory"])
        # a plain sbatch job holds 6 GPUs of a1 for a while
        plain = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--nodelist=a1",
                "--gres=gpu:h100:6",
                f"--output={tmp_path / 'plain.out'}",  # not slurm-N.out in the repository
                "--wrap",
                "sleep 60",
            ],
            env=sl.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        # the bridge reports its GPUs taken: gpuflow's free count drops from 32 to 26
        until(lambda: free_gpus(cfg, REGION) == 26, 30, "free GPUs 26", b, w)
        # a 16-GPU gang, then 4 jobs of 2 GPUs: 32 - 6 = 26 free, so they all fit, none on
        # a1 beyond its 2 free GPUs
        submit(
            cfg,
            {
                "job_id": "gang",
                "kind": "TRAINING",
                "gpu_count": 16,
                "tensor_parallel": 8,
                "command": PRINT_ENV,
                "expected_duration_s": 5.0,
                "allowed_regions": [REGION],
            },
        )
        for i in range(4):
            submit(
                cfg,
                {
                    "job_id": f"small-{i}",
                    "gpu_count": 2,
                    "expected_duration_s": 20.0,
                    "allowed_regions": [REGION],
                },
            )

        def done():
            return "FINISHED" in events_of(events.poll(), "gang")

        until(done, 60, "the gang finished", b, w)
        placed = [d for d in decisions.poll() if d["outcome"] == "PLACED"]
        gang = next(d for d in placed if d["job_id"] == "gang")
        gang_nodes = sorted(a["node_id"] for a in gang["assignments"])
        assert "a1" not in gang_nodes  # a1 has only 2 GPUs free
        until(lambda: any(r["job_id"] == "gang" and r["last"] for r in logs.poll()), 20, "logs", b)
        out = b"".join(r["data"] for r in logs.records if r["job_id"] == "gang").decode()
        lines = sorted(ln for ln in out.splitlines() if ln.startswith("NODE="))
        assert len(lines) == 2, out
        for i, line in enumerate(lines):
            fields = dict(kv.split("=", 1) for kv in line.split())
            assert sorted(expand_hostlist(fields["LIST"])) == gang_nodes
            assert fields["ID"] == str(i) and len(fields["GPUS"].split(",")) == 8
            assert fields["JOB"] == "gang"
        # the plain job's GPUs were never given: a1 carries at most 2 gpuflow GPUs at a time
        on_a1 = [
            sum(len(a["gpu_indices"]) for a in d["assignments"] if a["node_id"] == "a1")
            for d in placed
        ]
        assert sum(on_a1) <= 2 * (1 + len(placed)) and max(on_a1, default=0) <= 2
        jobs = sl.scontrol("show", "job", "-o")
        assert f"JobId={plain} " in jobs and "JobState=RUNNING" in jobs.split(f"JobId={plain} ")[1]


def _completed(sl: LocalSlurm) -> int:
    text = sl.scontrol("show", "job", "-o")
    return sum(1 for r in parse_records(text) if r.get("JobState") == "COMPLETED")


def test_bridge_sigkilled_and_restarted_submits_nothing_twice(
    config: Config, tmp_path: Path
) -> None:
    cfg = slurm_config(config, [REGION])
    (events,) = readers(cfg, JOBS_EVENTS)
    jobs = [f"r-{i}" for i in range(4)]
    with slurm_cluster(tmp_path / "sa", name="gfa", prefix="a", nodes=2) as sl, worker(cfg) as w:
        first = Bridge(cfg, REGION, sl, tmp_path / "bridge.log").start()
        second = Bridge(cfg, REGION, sl, tmp_path / "bridge2.log")
        try:
            for job_id in jobs[:3]:
                submit(
                    cfg,
                    {
                        "job_id": job_id,
                        "gpu_count": 4,
                        "expected_duration_s": 12.0,
                        "allowed_regions": [REGION],
                    },
                )

            def started():
                return all("STARTED" in events_of(events.poll(), j) for j in jobs[:3])

            until(started, 40, "three started", first, w)
            first.kill()  # SIGKILL: no state saved on the way out
            submit(
                cfg,
                {
                    "job_id": jobs[3],
                    "gpu_count": 4,
                    "expected_duration_s": 2.0,
                    "allowed_regions": [REGION],
                },
            )  # placed while the bridge is down
            # the first three end in Slurm meanwhile, nobody reports them
            until(lambda: _completed(sl) >= 3, 40, "the three ended in Slurm", w)
            assert not any("FINISHED" in events_of(events.poll(), j) for j in jobs[:3])
            second.start()

            def finished():
                return all("FINISHED" in events_of(events.poll(), j) for j in jobs)

            until(finished, 40, "all four finished", second, w)
        finally:
            first.stop()
            second.stop()
        tags = slurm_tags(sl)
        assert sorted(tags) == sorted(f"gpuflow:{j}:0" for j in jobs), tags  # each once
        for j in jobs:
            assert events_of(events.records, j).count("FINISHED") == 1


def test_two_clusters_spill_and_no_cross_region_gang(config: Config, tmp_path: Path) -> None:
    regions = ["slurm-a", "slurm-b"]
    cfg = slurm_config(config, regions)
    decisions, events = readers(cfg, DECISIONS_PLACEMENT, JOBS_EVENTS)
    with (
        slurm_cluster(tmp_path / "sa", name="gfa", prefix="a", nodes=2) as sa,
        slurm_cluster(tmp_path / "sb", name="gfb", prefix="b", nodes=2) as sb,
        worker(cfg) as w,
        bridge(cfg, "slurm-a", sa, tmp_path / "ba.log") as ba,
        bridge(cfg, "slurm-b", sb, tmp_path / "bb.log") as bb,
    ):
        for region in regions:  # a job sent before the worker knows a cluster cannot spill to it
            until(lambda r=region: free_gpus(cfg, r) == 16, 60, f"{region}'s 16 GPUs", ba, bb, w)
        for i in range(2):  # each needs a whole cluster: the second spills to the other one
            submit(
                cfg,
                {
                    "job_id": f"big-{i}",
                    "kind": "TRAINING",
                    "gpu_count": 16,
                    "tensor_parallel": 8,
                    "expected_duration_s": 15.0,
                },
            )

        def both():
            return all("STARTED" in events_of(events.poll(), f"big-{i}") for i in range(2))

        until(both, 60, "both running", ba, bb, w)
        placed = {d["job_id"]: d for d in decisions.poll() if d["outcome"] == "PLACED"}
        assert {placed["big-0"]["region"], placed["big-1"]["region"]} == set(regions)
        for i in range(2):
            cluster = sa if placed[f"big-{i}"]["region"] == "slurm-a" else sb
            assert f"gpuflow:big-{i}:0" in slurm_tags(cluster)
        # 32 GPUs in one gang: more than a cluster; the network rules (cross_region_gangs
        # off) do not split it over the two, so it waits and no Slurm job exists for it
        submit(
            cfg,
            {
                "job_id": "huge",
                "kind": "TRAINING",
                "gpu_count": 32,
                "tensor_parallel": 8,
                "cross_region_ok": True,
                "expected_duration_s": 5.0,
            },
        )
        time.sleep(4)
        assert not [
            d for d in decisions.poll() if d["job_id"] == "huge" and d["outcome"] == "PLACED"
        ]
        assert not [t for t in slurm_tags(sa) + slurm_tags(sb) if t.startswith("gpuflow:huge:")]


def test_slurm_refusing_a_placement_is_failed_refused(config: Config, tmp_path: Path) -> None:
    """A placement onto a node Slurm will not run it on (drained before gpuflow heard) or a
    node the cluster does not have: FAILED cause REFUSED with Slurm's reason (gpuflow's
    scheduler requeues REFUSED)."""
    cfg = slurm_config(config, [REGION])
    (events,) = readers(cfg, JOBS_EVENTS)
    with (
        slurm_cluster(tmp_path / "sa", name="gfa", prefix="a", nodes=2) as sl,
        bridge(cfg, REGION, sl, tmp_path / "bridge.log") as b,
    ):
        sl.scontrol("update", "nodename=a2", "state=drain", "reason=gpuflow-test")
        place(cfg, "onto-drained", REGION, {"a2": [0, 1]})
        place(cfg, "nowhere", REGION, {"zz9": [0]})

        def failed():
            return {e["job_id"]: e for e in events.poll() if e["type"] == "FAILED"}

        until(lambda: {"onto-drained", "nowhere"} <= set(failed()), 30, "refused", b)
        drained, nowhere = failed()["onto-drained"], failed()["nowhere"]
        assert drained["cause"] == nowhere["cause"] == "REFUSED"
        assert "ReqNodeNotAvail" in drained["detail"] and "zz9" in nowhere["detail"]
        assert "STARTED" not in events_of(events.records, "onto-drained")
