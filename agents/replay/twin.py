"""The digital twin: an event-driven executor on a virtual clock that carries out decisions.

Work is counted in reference-seconds: a job's `duration_s` is its run time alone on its
reference GPU model, consolidated on one server. On a placement it progresses at

    rate = speed(job, model, consolidated) x mean perf factor of its nodes

where speed comes from the throughput model (Gavel's measured table, else roofline). A gang
spread over nodes uses the measured consolidated=0 figure when the table has it, else pays
`spread_penalty` (multi-GPU jobs only; not inference without pipeline stages, whose replicas
exchange nothing across nodes). An eviction keeps the work up to the last checkpoint
(every `checkpoint_interval_s` of compute) and loses the rest, and so does a migration, unless
the decision asks for a checkpoint first (then nothing is lost). Each resumed segment pays
`restore_s` before it progresses. A CPU-only job (no GPUs) runs at its nominal pace. GPUs
(milli per GPU), host CPU and host memory are capacity and never exceeded: a placement beyond
the free GPUs is a fault (TwinError); one whose node lacks free host CPU or memory (the
scheduler checks those against node size only) holds its GPUs and starts when they free up.

With a network model (`TwinConfig.network`, agents/replay/network.py) a modelled training
job's rate carries its communication at the bandwidth it is granted instead of the spread
penalty; when the jobs sharing a link change, the twin re-rates the others mid-segment
(`rate_log` keeps the work done at each rate, so checkpoints and migrations stay exact).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from agents.replay.errors import TwinError
from agents.replay.network import TwinNetwork
from agents.replay.runs import JobRun, Slice, gpu_count, gpus_by_node
from agents.replay.trace import TraceJob, TraceNode, job_record
from scorer import JobSpec, ThroughputModel

__all__ = ["Twin", "TwinConfig"]


@dataclass(frozen=True)
class TwinConfig:
    checkpoint_interval_s: float = 1800.0  # when the job declares none
    restore_s: float = 60.0  # reload a checkpoint on resume or after a migration
    spread_penalty: float = 0.7  # multi-node gang speed factor when no consolidated=0 figure
    network: TwinNetwork | None = None  # links and quotas; None: spread_penalty only
    checkpoint_s: float = 30.0  # writing a checkpoint on demand (checkpoint-first evictions)


class Twin:
    """Executes placements on a virtual clock; the engine asks it what finishes next."""

    def __init__(
        self,
        nodes: Sequence[TraceNode],
        throughput: ThroughputModel,
        config: TwinConfig | None = None,
    ) -> None:
        self.config = config or TwinConfig()
        self.throughput = throughput
        self.catalog = throughput.catalog
        self.nodes: dict[str, TraceNode] = {n.node_id: n for n in nodes}
        self.free_milli = {n.node_id: np.full(n.gpu_count, 1000, np.int64) for n in nodes}
        self.free_cpu = {n.node_id: n.cpu_milli for n in nodes}
        self.free_mem = {n.node_id: n.memory_mib for n in nodes}
        self.perf = {n.node_id: 1.0 for n in nodes}
        self.total_milli = 1000 * sum(n.gpu_count for n in nodes)
        self.allocated_milli = 0
        self.runs: dict[str, JobRun] = {}
        self.now = 0.0
        self.timeline: list[tuple[float, float]] = [(0.0, 0.0)]  # (t, allocated share)
        self._finishes: list[tuple[float, int, str, int]] = []
        self._seq = 0

    # ---- inputs ------------------------------------------------------------------------
    def submit(self, job: TraceJob, at: float) -> JobRun:
        self._advance(at)
        run = self.runs[job.job_id] = JobRun(job, submit_s=at)
        return run

    def set_perf_factor(self, node_id: str, factor: float) -> None:
        """Measured slowdown of a node (1 = nominal); applies to segments started later."""
        self.perf[node_id] = float(factor)

    def start(self, job_id: str, slices: Sequence[Slice], at: float) -> float:
        """Run `job_id` on `slices` from `at`; returns its modelled finish time (inf while it
        waits, holding its GPUs, for host CPU or memory another job still uses)."""
        self._advance(at)
        run = self._run(job_id)
        if run.running or run.end_s is not None:
            raise TwinError(f"job {job_id} is already running or finished")
        self._take_gpus(run.job, slices)
        run.slices = tuple(slices)
        run.held_since = at
        run.gpu_model = self.nodes[slices[0].node_id].gpu_model
        run.rate = self.rate(run.job, slices)
        run.segment_start = run.accounted_s = at
        if not self._host_fits(run.job, slices):
            run.blocked = True
            run.host_waits += 1
            return math.inf
        self._apply_host(run.job, slices, -1)
        self._begin(run, at)
        self._renetwork(at)
        return run.finish_at

    def _begin(self, run: JobRun, at: float) -> None:
        run.blocked = False
        run.restore = self.config.restore_s if run.done > 0 else 0.0
        run.segment_start = at
        run.rate_log = []
        run.epoch += 1
        if run.first_start_s is None:
            run.first_start_s = at
        self._seq += 1
        heapq.heappush(self._finishes, (run.finish_at, self._seq, run.job.job_id, run.epoch))

    def reject(self, job_id: str, at: float) -> None:
        self._advance(at)
        self._run(job_id).rejected = True

    def evict(
        self,
        job_id: str,
        at: float,
        *,
        checkpoint_at: float | None = None,
        checkpoint_first: bool = False,
    ) -> float:
        """Stop a running job. Without a checkpoint, work since its last periodic checkpoint is
        lost; with `checkpoint_at` (a checkpoint written from then until `at`; `checkpoint_first`
        is one written at `at`), the work up to then is kept and the checkpointing time is
        overhead. Returns the work kept."""
        self._advance(at)
        run = self._running(job_id)
        if checkpoint_first and checkpoint_at is None:
            checkpoint_at = at
        if checkpoint_at is not None:  # the time spent writing it is overhead, not lost work
            kept, lost = self._computed(run, min(checkpoint_at, at)), 0.0
        else:
            kept = self._kept(run, at, checkpoint_first=False)
            lost = self._computed(run, at) - kept
        self._stop_keeping(run, at, kept, lost=lost)
        run.preemptions += 1
        return run.done

    def migrate(
        self, job_id: str, slices: Sequence[Slice], at: float, *, checkpoint_first: bool = False
    ) -> float:
        """Stop, move to `slices` and resume there from the last checkpoint (written now when
        `checkpoint_first`) after the restore cost. Returns the new modelled finish time."""
        self._advance(at)
        run = self._running(job_id)
        kept = self._kept(run, at, checkpoint_first)
        self._stop_keeping(run, at, kept, lost=self._computed(run, at) - kept)
        run.migrations += 1
        return self.start(job_id, slices, at)

    def _kept(self, run: JobRun, at: float, checkpoint_first: bool) -> float:
        """Seconds of this segment's compute a stop keeps: all of it after a fresh checkpoint,
        else up to the last periodic one (every `checkpoint_interval_s` of compute)."""
        computed = self._computed(run, at)
        if checkpoint_first:
            return computed
        interval = run.job.checkpoint_interval_s or self.config.checkpoint_interval_s
        return math.floor(computed / interval) * interval if interval > 0 else 0.0

    def _stop_keeping(self, run: JobRun, at: float, kept: float, *, lost: float) -> None:
        """Stop a segment keeping `kept` seconds of its compute; `lost` are thrown away."""
        run.lost_gpu_seconds += max(0.0, lost) * gpu_count(run.slices)
        self._stop(run, at, progress=self._work(run, run.segment_start + run.restore + kept))

    # ---- the clock ----------------------------------------------------------------------
    def next_finish(self) -> float:
        """Virtual time of the next finish, inf when nothing runs."""
        while self._finishes:
            at, _, job_id, epoch = self._finishes[0]
            run = self.runs[job_id]
            if run.running and run.epoch == epoch:
                return at
            heapq.heappop(self._finishes)  # stale: evicted or migrated since
        return math.inf

    def pop_finish(self) -> JobRun:
        """Complete the next job to finish and advance the clock to its end."""
        at = self.next_finish()
        if math.isinf(at):
            raise TwinError("nothing is running")
        _, _, job_id, _ = heapq.heappop(self._finishes)
        run = self.runs[job_id]
        self._advance(at)
        self._stop(run, at, progress=run.job.duration_s - run.done)
        run.done = run.job.duration_s
        run.end_s = at
        return run

    def progress(self, job_id: str, at: float | None = None) -> float:
        """Work done (reference-seconds) at `at` (now by default)."""
        run = self._run(job_id)
        if not run.running:
            return run.done
        t = self.now if at is None else at
        return run.done + self._work(run, t)

    @staticmethod
    def _computed(run: JobRun, at: float) -> float:
        """Seconds of compute in the current segment (none while blocked or restoring)."""
        return 0.0 if run.blocked else max(0.0, at - run.segment_start - run.restore)

    @classmethod
    def _work(cls, run: JobRun, at: float) -> float:
        """Work done in the current segment by `at`, across its rate changes."""
        if run.blocked or not run.rate_log:
            return cls._computed(run, at) * run.rate
        for since, work, rate in reversed(run.rate_log):
            if at >= since:
                return work + (at - since) * rate
        return cls._computed(run, at) * run.rate_log[0][2]

    def _renetwork(self, at: float) -> None:
        """The jobs on the links changed: re-rate those whose share moved."""
        network = self.config.network
        if network is None:
            return
        running = {
            r.job.job_id: (
                JobSpec.from_record(job_record(r.job, 0)),
                r.gpu_model or "",
                gpus_by_node(r),
            )
            for r in self.running_jobs()
            if not r.blocked
        }
        for job_id in network.update(running):
            run = self.runs[job_id]
            if run.running and not run.blocked:
                self._rerate(run, self.rate(run.job, run.slices), at)

    def _rerate(self, run: JobRun, rate: float, at: float) -> None:
        start = run.segment_start + run.restore
        since = max(at, start)
        if not run.rate_log:
            run.rate_log.append((start, 0.0, run.rate))
        entry = (since, self._work(run, since), rate)
        if run.rate_log[-1][0] >= since:
            run.rate_log[-1] = entry
        else:
            run.rate_log.append(entry)
        run.rate = rate
        run.epoch += 1
        self._seq += 1
        heapq.heappush(self._finishes, (run.finish_at, self._seq, run.job.job_id, run.epoch))

    @property
    def alloc_rate(self) -> float:
        return self.allocated_milli / self.total_milli if self.total_milli else 0.0

    def running_jobs(self) -> Iterable[JobRun]:
        return (r for r in self.runs.values() if r.running)

    # ---- speed ----------------------------------------------------------------------------
    def rate(self, job: TraceJob, slices: Sequence[Slice]) -> float:
        """Reference-seconds of work per second on `slices` (see the module docstring)."""
        perf = float(np.mean([self.perf[s.node_id] for s in slices]))
        if job.num_gpus == 0:
            return perf  # a CPU-only job runs at its nominal pace wherever it fits
        spec = JobSpec.from_record(job_record(job, 0))
        model = self.nodes[slices[0].node_id].gpu_model
        spread = len({s.node_id for s in slices}) > 1
        speed = self.throughput.relative_speed(spec, model, consolidated=True)
        network = self.config.network
        if network is not None and network.models(spec, model):
            speed *= network.factor(job.job_id)  # communication at its granted bandwidth
        elif spread:
            speed *= self.spread_factor(job, model)
        if speed * perf <= 0:
            raise TwinError(f"job {job.job_id} cannot run on {model} (speed 0)")
        return speed * perf

    def spread_factor(self, job: TraceJob, model: str) -> float:
        """Speed spread over servers / consolidated: measured (Gavel's consolidated=0 over =1
        at the largest measured scale), else 1 for inference without pipeline stages (its
        replicas exchange nothing, and the placer keeps each tensor-parallel group on one
        node), else `spread_penalty` for multi-GPU jobs."""
        measured = self.throughput.measured
        for scale in (8, 4, 2):
            if scale > job.num_gpus:
                continue
            apart = measured.get((job.job_type, model, scale, False))
            together = measured.get((job.job_type, model, scale, True))
            if apart is not None and together:
                return apart / together
        if job.kind.upper() == "INFERENCE" and job.pipeline_parallel <= 1:
            return 1.0
        return self.config.spread_penalty if job.num_gpus > 1 else 1.0

    # ---- mechanics ------------------------------------------------------------------------
    def _run(self, job_id: str) -> JobRun:
        try:
            return self.runs[job_id]
        except KeyError:
            raise TwinError(f"unknown job {job_id}") from None

    def _running(self, job_id: str) -> JobRun:
        run = self._run(job_id)
        if not run.running:
            raise TwinError(f"job {job_id} is not running")
        return run

    def _take_gpus(self, job: TraceJob, slices: Sequence[Slice]) -> None:
        """Check every GPU first, then take them: all or nothing."""
        need: dict[tuple[str, int], int] = {}
        for s in slices:
            if s.node_id not in self.nodes:
                raise TwinError(f"job {job.job_id}: unknown node {s.node_id}")
            for g in s.gpu_indices:
                need[(s.node_id, g)] = need.get((s.node_id, g), 0) + s.gpu_milli
        for (node_id, g), milli in need.items():
            free = self.free_milli[node_id]
            if not 0 <= g < free.shape[0] or free[g] < milli:
                raise TwinError(f"job {job.job_id}: {node_id}[{g}] lacks {milli} milli-GPU")
        self._apply_gpus(slices, -1)

    def _host_fits(self, job: TraceJob, slices: Sequence[Slice]) -> bool:
        """Host CPU and memory on every node of the job (undeclared capacity always fits)."""
        for node_id in {s.node_id for s in slices}:
            node = self.nodes[node_id]
            if node.cpu_milli and self.free_cpu[node_id] < job.cpu_milli:
                return False
            if node.memory_mib and self.free_mem[node_id] < job.memory_mib:
                return False
        return True

    def _apply_gpus(self, slices: Sequence[Slice], sign: int) -> None:
        for s in slices:
            for g in s.gpu_indices:
                self.free_milli[s.node_id][g] += sign * s.gpu_milli
                self.allocated_milli -= sign * s.gpu_milli
        self.timeline.append((self.now, self.alloc_rate))

    def _apply_host(self, job: TraceJob, slices: Sequence[Slice], sign: int) -> None:
        for node_id in {s.node_id for s in slices}:
            if self.nodes[node_id].cpu_milli:
                self.free_cpu[node_id] += sign * job.cpu_milli
            if self.nodes[node_id].memory_mib:
                self.free_mem[node_id] += sign * job.memory_mib

    def _unblock(self, at: float) -> None:
        """Start jobs waiting for host resources, in the order they were placed."""
        waiting = sorted(
            (r for r in self.runs.values() if r.blocked), key=lambda r: r.segment_start
        )
        for run in waiting:
            if self._host_fits(run.job, run.slices):
                self._apply_host(run.job, run.slices, -1)
                self._begin(run, at)

    def settle(self, at: float) -> None:
        """Count the GPU time, cost and energy of running jobs up to `at` (idempotent)."""
        for run in self.running_jobs():
            self._account(run, at)

    def _stop(self, run: JobRun, at: float, *, progress: float) -> None:
        self._account(run, at)
        run.segments.append((run.held_since, at, gpu_count(run.slices)))
        run.done = min(run.job.duration_s, run.done + progress)
        self._apply_gpus(run.slices, +1)
        if not run.blocked:
            self._apply_host(run.job, run.slices, +1)
        run.slices, run.blocked = (), False
        self._unblock(at)
        self._renetwork(at)

    def _account(self, run: JobRun, until: float) -> None:
        held_s = max(0.0, until - run.accounted_s)
        run.accounted_s = max(run.accounted_s, until)
        for s in run.slices:
            node = self.nodes[s.node_id]
            gpu_s = held_s * len(s.gpu_indices) * s.gpu_milli / 1000
            run.gpu_seconds += gpu_s
            run.cost += gpu_s / 3600 * node.price_per_gpu_hour
            spec = self.catalog.get(node.gpu_model)
            run.energy_kwh += gpu_s / 3600 * (spec.power_w if spec else 300.0) / 1000
            run.model_seconds[node.gpu_model] = run.model_seconds.get(node.gpu_model, 0) + gpu_s

    def advance_to(self, at: float) -> None:
        """Move the clock to `at` with nothing happening (a timer fired)."""
        self._advance(at)

    def _advance(self, at: float) -> None:
        if at < self.now - 1e-9:
            raise TwinError(f"the clock cannot go back: {at} < {self.now}")
        self.now = max(self.now, at)
