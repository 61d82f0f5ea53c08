"""The Slurm bridge: one Slurm cluster as gpuflow region `region` (docs/slurm.md).

Every `slurm.poll_s` it reads the cluster (`scontrol -d show node/job -o`), publishes
NodeInventory and NodeTelemetry for its nodes, turns its jobs' Slurm states into JobEvents and
ships their output as JobLog chunks. A PLACED decision in its region becomes `sbatch` on
exactly the placed nodes; a preemption, migration, cancel or a drained node under a running
job becomes `scancel --signal` and, after the grace, `scancel`. Its book (`runs.RunBook`) and
its consumer group position survive a restart; Slurm jobs are found again by their
`gpuflow:JOB:EPOCH` name.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from agents.slurm.commands import SlurmCli, SlurmJob, SlurmNode
from agents.slurm.dispatch import TAG, build_request, parse_tag, signal_name
from agents.slurm.errors import SlurmCommandError
from agents.slurm.inventory import GpuModels, NodeReports, foreign_gpus
from agents.slurm.kafka_io import BridgeIO
from agents.slurm.logs import RunLogs, tail
from agents.slurm.runs import ENDED_STATES, HOPELESS, Run, RunBook, end_event
from infra.config import Config
from infra.topics import NODE_INVENTORY, NODE_TELEMETRY

__all__ = ["SlurmBridge"]

log = logging.getLogger(__name__)

SPEC_WAIT_S = 10.0  # a placement whose submission is not read by then runs as a placeholder


class SlurmBridge:
    def __init__(self, config: Config, region: str, *, cli: SlurmCli | None = None) -> None:
        self.config, self.region, self.s = config, region, config.slurm
        self.cli = cli or SlurmCli(config.slurm)
        root = config.data_dir / "slurm"
        self.out_dir = Path(self.s.output_dir or root / "out").resolve()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.book = RunBook(root / f"{region}.json")
        self.models = GpuModels(self.s.gres_map())
        self.group_id = f"{config.worker.app_id}-slurm-{region}"
        self.comment = f"{TAG}{region}"
        self.nodes: dict[str, SlurmNode] = {}
        self.jobs: dict[int, SlurmJob] = {}
        self.logs = RunLogs(self.s.log_max_bytes)
        self.reports = NodeReports(region, self.s, self.models)
        self.io: BridgeIO | None = None
        self.submitted = 0  # sbatch calls made by this process
        self.dispatch_s: list[float] = []  # decision read -> sbatch returned, the last 10,000

    # -- the loop ---------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        self.io = BridgeIO(self.config, self.region, self.group_id)
        log.info("slurm bridge started region=%s group=%s", self.region, self.group_id)
        try:
            self.io.poll_specs(1.0)
            self._read_cluster()
            self._adopt()
            next_sync = 0.0
            while not stop.is_set():
                self.io.poll_specs()
                for name, record in self.io.poll_decisions(min(0.05, self.s.poll_s)):
                    self._on_decision(name, record)
                self._submit_due()
                if time.monotonic() >= next_sync:
                    next_sync = time.monotonic() + self.s.poll_s
                    self.sync()
                self.book.save()
                self.io.commit()
        finally:
            self.book.save()
            self.io.close()
            log.info("slurm bridge stopped region=%s", self.region)

    def sync(self) -> None:
        """Read the cluster; events for state changes; stops due; logs; telemetry."""
        try:
            self._read_cluster()
        except SlurmCommandError as exc:
            log.warning("slurm bridge cannot read the cluster: %s", exc)
            return
        now = time.time()
        for run in list(self.book.runs.values()):
            if run.slurm_id:
                self._track(run, now)
        self._publish_nodes()

    def _read_cluster(self) -> None:
        self.nodes = {n.name: n for n in self.cli.nodes()}
        self.jobs = {j.job_id: j for j in self.cli.jobs()}

    # -- decisions --------------------------------------------------------------------------
    def _on_decision(self, name: str, d: dict[str, Any]) -> None:
        if name == "PlacementDecision" and d.get("outcome") == "PLACED":
            if d.get("region") == self.region:
                self._on_placement(d)
        elif name == "PreemptionDecision" and d.get("region") == self.region:
            self._on_preemption(d)
        elif name == "MigrationDecision" and d.get("from_region") in (self.region, ""):
            run = self.book.live_for(str(d["job_id"]))
            if run is not None:
                grace = run.grace_s or self.s.grace_s
                self._stop(
                    run,
                    "evict",
                    f"migration {d.get('reason')}",
                    run.signal,
                    grace if d.get("checkpoint_first", True) else 0.0,
                )

    def _on_placement(self, d: dict[str, Any]) -> None:
        job_id, epoch = str(d["job_id"]), int(d.get("epoch") or 0)
        if self.book.known(job_id, epoch):
            return  # a decision read again (restart, at-least-once): submitted once
        assignments = [
            {"node_id": a["node_id"], "gpu_indices": list(a["gpu_indices"])}
            for a in d.get("assignments") or ()
        ]
        p = self.s.node_prefix
        placed = {a["node_id"][len(p) :]: a["gpu_indices"] for a in assignments}
        decision = {
            "job_id": job_id,
            "epoch": epoch,
            "assignments": assignments,
            "expected_duration_s": d.get("expected_duration_s"),
            "seen_s": time.time(),
        }
        self.book.add(
            Run(job_id, epoch, [a["node_id"] for a in assignments], placed, decision=decision)
        )

    def _on_preemption(self, d: dict[str, Any]) -> None:
        run = self.book.runs.get(f"{d['job_id']}:{int(d.get('victim_epoch') or 0)}")
        if run is None or run.stop:
            return
        grace = float(d.get("grace_period_s") or 0.0)
        if d.get("cause") == "CANCEL":
            self._stop(
                run,
                "cancel",
                f"cancelled: {d.get('reason') or 'by its tenant'}",
                "TERM",
                grace or self.s.grace_s,
                full=True,
            )
            return
        grace = run.grace_s or grace or self.s.grace_s
        self._stop(
            run,
            "evict",
            f"preempted for {d.get('for_job_id')} ({d.get('cause')})",
            run.signal,
            grace if d.get("checkpoint_first") else 0.0,
        )

    # -- dispatch ---------------------------------------------------------------------------
    def _submit_due(self) -> None:
        assert self.io is not None
        for run in [r for r in self.book.runs.values() if not r.slurm_id and r.decision]:
            spec = self.io.specs.get(run.job_id)
            if spec is None and time.time() - run.decision["seen_s"] < SPEC_WAIT_S:
                continue
            if spec is None:
                log.warning(
                    "no submission read for job_id=%s: it runs as a placeholder", run.job_id
                )
            self._submit(run, spec)

    def _submit(self, run: Run, spec: dict[str, Any] | None) -> None:
        names = list(run.placed)
        unknown = [n for n in names if n not in self.nodes]
        if unknown:
            self._refuse(
                run,
                f"node {self.s.node_prefix}{unknown[0]} is not in this Slurm "
                f"cluster (region {self.region})",
            )
            return
        counts = [len(run.placed[n]) for n in names]
        gres_type = self.nodes[names[0]].gpu_type
        req = build_request(
            run.decision, spec, names, counts, gres_type, self.s, self.out_dir, self.region
        )
        run.signal = signal_name(str((spec or {}).get("checkpoint_signal") or ""))
        run.grace_s = float((spec or {}).get("checkpoint_grace_s") or 0.0)
        run.stdout, run.stderr = str(req.stdout), str(req.stderr)
        run.progress_file = str(req.stdout.with_suffix(".progress"))
        script = req.script.replace(
            "#!/bin/bash\n", f"#!/bin/bash\nexport GPUFLOW_PROGRESS_FILE='{run.progress_file}'\n", 1
        )
        try:
            run.slurm_id = self.cli.submit(req.options, script)
        except SlurmCommandError as exc:
            self._refuse(run, f"slurm refused: {exc}")
            return
        self.submitted += 1
        self.dispatch_s = [*self.dispatch_s[-9999:], time.time() - run.decision["seen_s"]]
        run.submitted_s, run.decision = time.time(), {}
        self.book.dirty = True
        log.info(
            "submitted job_id=%s epoch=%d slurm_id=%d nodes=%s",
            run.job_id,
            run.epoch,
            run.slurm_id,
            ",".join(names),
        )

    def _refuse(self, run: Run, why: str) -> None:
        log.warning("refused job_id=%s epoch=%d: %s", run.job_id, run.epoch, why)
        self._emit(run, "FAILED", detail=why, cause="REFUSED")
        self.book.end(run)

    # -- tracking ---------------------------------------------------------------------------
    def _adopt(self) -> None:
        """After a restart: the book's runs matched with the Slurm jobs of this region; jobs
        the book does not know taken on; runs Slurm no longer knows end (NODE_LOST)."""
        by_tag = {parse_tag(j.name): j for j in self.jobs.values() if j.comment == self.comment}
        for key, job in by_tag.items():
            if key is None or (
                self.book.known(*key) and f"{key[0]}:{key[1]}" not in self.book.runs
            ):
                continue
            run = self.book.runs.get(f"{key[0]}:{key[1]}")
            if run is None:
                p = self.s.node_prefix
                run = Run(
                    key[0],
                    key[1],
                    [p + n for n in job.nodes],
                    {n: list(job.gpu_idx.get(n, ())) for n in job.nodes},
                    stdout=job.stdout,
                    stderr=job.stderr,
                )
                self.book.add(run)
                log.info("adopted slurm_id=%d job_id=%s", job.job_id, key[0])
            if not run.slurm_id:
                run.slurm_id, run.decision = job.job_id, {}
                run.submitted_s = time.time()
                self.book.dirty = True

    def _track(self, run: Run, now: float) -> None:
        job = self.jobs.get(run.slurm_id)
        if job is None:
            self._end(
                run,
                "FAILED",
                {
                    "detail": f"slurm job {run.slurm_id} is no longer known to the controller",
                    "cause": "NODE_LOST",
                },
            )
            return
        if job.state == "PENDING":
            self._pending(run, job, now)
        elif job.state in ENDED_STATES:
            if not run.started and run.stop != "refuse" and job.state != "CANCELLED":
                self._started(run, job)
            kind, extra = end_event(run, job)
            self._end(run, kind, extra)
            return
        elif not run.started and job.state in ("RUNNING", "COMPLETING"):
            self._started(run, job)
        if run.started and not run.stop:
            bad = [n for n in job.nodes if n in self.nodes and not self.nodes[n].healthy]
            if bad:
                node = self.nodes[bad[0]]
                self._stop(
                    run,
                    "evict",
                    f"node {self.s.node_prefix}{node.name} is {node.state}",
                    run.signal,
                    run.grace_s or self.s.grace_s,
                )
        if run.kill_at and not run.killed and now >= run.kill_at:
            self._cancel(run)
        self._ship(run, final=False)

    def _pending(self, run: Run, job: SlurmJob, now: float) -> None:
        if run.stop:
            return
        waited = now - run.submitted_s
        if any(job.reason.startswith(h) for h in HOPELESS) or waited > self.s.start_timeout_s:
            run.stop = "refuse"
            run.stop_detail = f"slurm did not start it: {job.reason} after {waited:.0f}s"
            self._cancel(run)

    def _started(self, run: Run, job: SlurmJob) -> None:
        run.started = True
        self.book.dirty = True
        self._emit(run, "STARTED", detail=f"slurm job {job.job_id} on {','.join(job.nodes)}")

    def _stop(
        self, run: Run, kind: str, detail: str, sig: str, grace: float, *, full: bool = False
    ) -> None:
        """Signal first (the checkpoint signal to the batch shell, or TERM to all for a
        cancel), `scancel` after `grace`; reported when Slurm says it ended."""
        run.stop, run.stop_detail = kind, detail
        self.book.dirty = True
        log.info(
            "stopping job_id=%s epoch=%d (%s) grace=%.1fs", run.job_id, run.epoch, detail, grace
        )
        if not run.slurm_id:
            self._end(run, "EVICTED" if kind == "evict" else "CANCELLED", {"detail": detail})
            return
        if not run.started or grace <= 0:
            self._cancel(run)
            return
        try:
            self.cli.signal(run.slurm_id, sig, batch=not full)
        except SlurmCommandError as exc:
            log.warning("signal %s to slurm job %d: %s", sig, run.slurm_id, exc)
        run.kill_at = time.time() + grace

    def _cancel(self, run: Run) -> None:
        run.killed = True
        self.book.dirty = True
        try:
            self.cli.cancel(run.slurm_id)
        except SlurmCommandError as exc:
            log.warning("scancel %d: %s", run.slurm_id, exc)

    def _end(self, run: Run, kind: str, extra: dict[str, Any]) -> None:
        if kind in ("FAILED", "TIMEOUT"):
            extra.setdefault("stderr_tail", tail(run.stderr, 4096))
        if kind == "EVICTED":
            extra["progress"] = self._progress(run)
        if kind == "FINISHED":
            extra["progress"] = 1.0
        self._ship(run, final=True)
        self._emit(run, kind, **extra)
        self.book.end(run)

    def _progress(self, run: Run) -> float:
        lines = [ln for ln in tail(run.progress_file, 256).splitlines() if ln.strip()]
        try:
            return min(1.0, max(0.0, float(lines[-1].split()[0].split("=")[-1]))) if lines else 0.0
        except ValueError:
            return 0.0

    def _ship(self, run: Run, *, final: bool) -> None:
        assert self.io is not None
        records = self.logs.poll(run, final=final)
        if records:
            self.io.logs(records)
            self.book.dirty = True

    def _emit(self, run: Run, kind: str, **extra: Any) -> None:
        assert self.io is not None
        self.io.event(
            {
                "event_id": f"{run.job_id}:{kind}:{run.epoch}",
                "ts": int(time.time() * 1000),
                "job_id": run.job_id,
                "region": self.region,
                "type": kind,
                "node_ids": list(run.nodes),
                "progress": float(extra.pop("progress", 0.0)),
                "epoch": run.epoch,
                **extra,
            }
        )

    # -- nodes ------------------------------------------------------------------------------
    def _publish_nodes(self) -> None:
        assert self.io is not None
        now = time.monotonic()
        live = list(self.book.runs.values())
        placed: dict[str, set[int]] = {}
        for run in live:
            for name, idx in run.placed.items():
                placed.setdefault(name, set()).update(idx)
        ours = {j.job_id for j in self.jobs.values() if j.comment == self.comment}
        ours |= {r.slurm_id for r in live}
        taken = foreign_gpus(self.nodes.values(), self.jobs.values(), ours, placed)
        inventory, telemetry = self.reports.due(self.nodes.values(), taken, placed, now)
        self.io.publish(NODE_INVENTORY, inventory)
        self.io.publish(NODE_TELEMETRY, telemetry)
