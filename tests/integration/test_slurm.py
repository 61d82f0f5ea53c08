"""The Slurm bridge against a real Slurm 22.05 (munged, slurmctld, one slurmd per node) on
this host: inventory, a gang on exactly the placed nodes, plain sbatch jobs respected,
preemption, cancel, a drained node, a bridge SIGKILLed and restarted, two clusters."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import TopicReader
from slurm_cluster import (
    Bridge,
    bridge,
    events_of,
    free_gpus,
    needs_slurm,
    place,
    preempt,
    slurm_cluster,
    slurm_config,
    submit,
    until,
    worker,
)

from agents.slurm.commands import expand_hostlist, parse_records
from infra.config import Config
from infra.topics import DECISIONS_PLACEMENT, JOBS_EVENTS, JOBS_LOGS, NODE_INVENTORY

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _slurm_present() -> None:
    needs_slurm()


_OPEN: list[TopicReader] = []


@pytest.fixture(autouse=True)
def _close_readers() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def readers(cfg: Config, *topics: str) -> list[TopicReader]:
    out = [TopicReader(cfg, t) for t in topics]
    _OPEN.extend(out)
    return out


REGION = "slurm-a"
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
            ["sbatch", "--parsable", "--nodelist=a1", "--gres=gpu:h100:6", "--wrap", "sleep 60"],
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


STUBBORN = [
    "bash",
    "-c",
    "trap 'echo got-USR1' USR1; trap 'echo got-TERM; exit 143' TERM; "
    "echo running; while true; do sleep 0.2; done",
]


def _started(events: TopicReader, job_id: str) -> dict:
    until(lambda: "STARTED" in events_of(events.poll(), job_id), 20, f"{job_id} STARTED")
    return next(e for e in events.records if e["job_id"] == job_id and e["type"] == "STARTED")


def _log(logs: TopicReader, job_id: str, epoch: int = 0) -> str:
    return b"".join(
        r["data"] for r in logs.poll() if r["job_id"] == job_id and r["epoch"] == epoch
    ).decode()


def test_preemption_signals_before_the_kill_and_cancel(config: Config, tmp_path: Path) -> None:
    cfg = slurm_config(config, [REGION])
    events, logs = readers(cfg, JOBS_EVENTS, JOBS_LOGS)
    with (
        slurm_cluster(tmp_path / "sa", name="gfa", prefix="a", nodes=2) as sl,
        worker(cfg) as w,
        bridge(cfg, REGION, sl, tmp_path / "bridge.log") as b,
    ):
        for job_id in ("victim", "cancelled"):
            submit(
                cfg,
                {
                    "job_id": job_id,
                    "gpu_count": 4,
                    "command": STUBBORN,
                    "allowed_regions": [REGION],
                    "checkpoint_grace_s": 4.0,
                },
            )
        for job_id in ("victim", "cancelled"):
            until(lambda j=job_id: "running" in _log(logs, j), 40, f"{job_id} running", b, w)
        epoch = int(_started(events, "victim")["epoch"])
        asked = time.monotonic()
        preempt(cfg, "victim", epoch, REGION, "PRIORITY", grace_s=30.0)
        preempt(
            cfg,
            "cancelled",
            int(_started(events, "cancelled")["epoch"]),
            REGION,
            "CANCEL",
            grace_s=2.0,
        )

        def ended():
            return {
                e["job_id"]: e
                for e in events.poll()
                if e["type"] in ("EVICTED", "CANCELLED") and int(e["epoch"]) == epoch
            }

        until(lambda: {"victim", "cancelled"} <= set(ended()), 40, "both stopped", b, w)
        took = time.monotonic() - asked
        victim, cancelled = ended()["victim"], ended()["cancelled"]
        # the job's checkpoint signal came first; it ignored it and was killed after its own
        # grace (4 s, not the decision's 30 s)
        assert victim["type"] == "EVICTED" and "got-USR1" in _log(logs, "victim", epoch)
        assert 4.0 <= took < 25.0
        # the cancel: SIGTERM to the job (no checkpoint signal), reported CANCELLED
        assert cancelled["type"] == "CANCELLED" and "got-TERM" in _log(logs, "cancelled")
        assert "got-USR1" not in _log(logs, "cancelled")
        assert cancelled["exit_code"] is not None


def test_drained_node_sends_the_job_back(config: Config, tmp_path: Path) -> None:
    cfg = slurm_config(config, [REGION])
    (events,) = readers(cfg, JOBS_EVENTS)
    command = ["bash", "-c", 'if [ "$GPUFLOW_EPOCH" = 0 ]; then sleep 120; else echo done; fi']
    with (
        slurm_cluster(tmp_path / "sa", name="gfa", prefix="a", nodes=2) as sl,
        worker(cfg) as w,
        bridge(cfg, REGION, sl, tmp_path / "bridge.log") as b,
    ):
        submit(
            cfg,
            {"job_id": "moved", "gpu_count": 8, "command": command, "allowed_regions": [REGION]},
        )
        until(lambda: "STARTED" in events_of(events.poll(), "moved"), 40, "started", b, w)
        first = _started(events, "moved")["node_ids"]
        sl.scontrol("update", f"nodename={first[0]}", "state=drain", "reason=gpuflow-test")
        until(lambda: "FINISHED" in events_of(events.poll(), "moved"), 60, "finished", b, w)
        mine = [e for e in events.records if e["job_id"] == "moved"]
        evicted = next(e for e in mine if e["type"] == "EVICTED")
        finished = next(e for e in mine if e["type"] == "FINISHED")
        assert evicted["epoch"] == 0 and "drain" in evicted["detail"].lower()
        assert finished["epoch"] > 0 and finished["node_ids"] != first


def _tags(sl: object) -> list[str]:
    text = sl.scontrol("show", "job", "-o")  # type: ignore[attr-defined]
    return [
        r["JobName"] for r in parse_records(text) if r.get("JobName", "").startswith("gpuflow:")
    ]


def _completed(sl: object) -> int:
    text = sl.scontrol("show", "job", "-o")  # type: ignore[attr-defined]
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
        tags = _tags(sl)
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
            assert f"gpuflow:big-{i}:0" in _tags(cluster)
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
        assert not [t for t in _tags(sa) + _tags(sb) if t.startswith("gpuflow:huge:")]


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


def test_worker_preemption_runs_through_slurm(config: Config, tmp_path: Path) -> None:
    """The worker's own PreemptionDecision: an online-inference job arrives on a cluster full
    of a batch job; the bridge signals the batch job (it checkpoints on USR1 and exits), the
    worker places the inference job on the freed GPUs, Slurm runs it."""
    policy = tmp_path / "policy.yaml"
    policy.write_text('{"preemption": {"checkpoint_stale_s": 0, "grace_period_s": 20}}')
    cfg = slurm_config(config, [REGION], policy_file=str(policy))
    events, logs = readers(cfg, JOBS_EVENTS, JOBS_LOGS)
    checkpointing = [
        "bash",
        "-c",
        "trap 'echo checkpointed; exit 0' USR1; echo running; while true; do sleep 0.2; done",
    ]
    with (
        slurm_cluster(tmp_path / "sa", name="gfa", prefix="a", nodes=1) as sl,
        worker(cfg) as w,
        bridge(cfg, REGION, sl, tmp_path / "bridge.log") as b,
    ):
        submit(
            cfg,
            {
                "job_id": "batch",
                "tenant": "research",
                "priority_class": "batch",
                "kind": "TRAINING",
                "gpu_count": 8,
                "command": checkpointing,
                "allowed_regions": [REGION],
                "checkpoint_interval_s": 600,
                "expected_duration_s": 600.0,
            },
        )
        until(lambda: "running" in _log(logs, "batch"), 40, "batch running", b, w)
        submit(
            cfg,
            {
                "job_id": "serve",
                "tenant": "serving",
                "priority_class": "online-inference",
                "kind": "INFERENCE",
                "gpu_count": 4,
                "allowed_regions": [REGION],
                "expected_duration_s": 3.0,
            },
        )
        until(lambda: "STARTED" in events_of(events.poll(), "serve"), 60, "serve started", b, w)
        batch = events_of(events.records, "batch")
        assert batch[:2] == ["STARTED", "EVICTED"], batch
        assert "checkpointed" in _log(logs, "batch")  # the signal reached it before any kill
        assert "gpuflow:serve:0" in _tags(sl)
