"""Communication demand of a training job, from its parallelism and its model.

Per optimizer step (one replica = tensor x pipeline GPUs; `grad_accum_steps` micro-batches):

- compute: 6 x params x tokens FLOPs per micro-batch (tokens = micro_batch x seq_len),
  over the replica's GPUs at peak x MFU; the step is `grad_accum_steps` micro-batches.
- data parallel: one all-reduce of the gradients G = params x gradient bytes (2 for 16-bit and
  FP8 training, 4 for FP32/TF32) per step. Hierarchical ring: inside a site, then across
  sites; a site (node or region) sends  2 x G x (S - 1) / S  bytes for S sites. The last
  micro-batch's backward pass (2/3 of its compute) hides that much of it (DDP buckets overlap).
- tensor parallel: 4 all-reduces of the activations per layer per micro-batch (2 forward,
  2 backward), each moving 2 x (t - 1) / t of mb x seq x hidden x activation bytes per GPU; kept
  inside a node, over its NVLink/PCIe. Fully exposed (on the critical path).
- pipeline parallel: each micro-batch's activations (mb x seq x hidden x bytes) cross each stage
  boundary forward and their gradients backward; only boundaries between nodes cost network
  time, counted without overlap (an upper bound). Latency-sensitive: a stage waits on it.

Hidden size and depth come from the parameter count with a GPT-like shape (params ~ 12 x
layers x hidden^2, layers = hidden / 128): 7B -> hidden 4224, 32 layers. Only TRAINING jobs
with a known `params_b` have a modelled demand; others (inference, batch, unknown models)
return None: their traffic is not modelled and placement stays as without this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scorer.types import JobSpec

__all__ = ["CommAssumptions", "CommDemand", "Layout", "StepTime", "comm_demand"]

_GRAD_BYTES = {"FP32": 4, "TF32": 4, "BF16": 2, "FP16": 2, "FP8": 2, "INT8": 2}


@dataclass(frozen=True)
class CommAssumptions:
    """Constants of the model (documented in docs/network.md)."""

    mfu: float = 0.4  # model FLOPs utilisation, as the throughput model's roofline
    micro_batch: int = 1  # when the job does not say
    seq_len: int = 2048
    overlap_share: float = 2.0 / 3.0  # of one micro-batch's compute that hides the all-reduce
    fabric_gbps: float = 200.0  # per node, inside a region (NIC / InfiniBand / RoCE)
    fabric_latency_ms: float = 0.01


@dataclass(frozen=True)
class Layout:
    """Where a job's GPUs are: per region, its GPUs and nodes; and GPUs per node."""

    regions: tuple[tuple[str, int, int], ...]  # (region, gpus, nodes), largest first
    gpus_per_node: int = 8

    @property
    def sites(self) -> int:
        return len(self.regions)

    @property
    def nodes(self) -> int:
        return sum(n for _, _, n in self.regions)

    @property
    def max_nodes_in_region(self) -> int:
        return max((n for _, _, n in self.regions), default=1)


@dataclass(frozen=True)
class StepTime:
    """One optimizer step, split into its parts (seconds)."""

    compute: float
    data_parallel: float = 0.0  # exposed (after overlap)
    tensor_parallel: float = 0.0
    pipeline: float = 0.0

    @property
    def total(self) -> float:
        return self.compute + self.data_parallel + self.tensor_parallel + self.pipeline

    @property
    def efficiency(self) -> float:
        """Compute share of the step: 1 = the network costs nothing."""
        return self.compute / self.total if self.total > 0 else 1.0


@dataclass(frozen=True)
class CommDemand:
    """What one job moves per step, and how long its compute takes."""

    micro_batch_s: float
    grad_accum_steps: int
    grad_bytes: float  # G: gradients of one full replica
    tp_bytes_per_gpu: float  # per micro-batch, inside a node
    pp_boundary_bytes: float  # per micro-batch, per boundary, one direction
    tensor_parallel: int
    pipeline_parallel: int
    priority: int = 0

    @property
    def compute_s(self) -> float:
        return self.micro_batch_s * self.grad_accum_steps

    @property
    def replica_gpus(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def latency_sensitive(self) -> bool:
        return self.pipeline_parallel > 1

    def ring_bytes(self, sites: int) -> float:
        """Bytes each site sends per step in a ring all-reduce over `sites` sites."""
        return 2.0 * self.grad_bytes * (sites - 1) / sites if sites > 1 else 0.0

    def need_gbps(self, sites: int) -> float:
        """Average rate that moves a step's cross-site volume within one step's compute."""
        return self.ring_bytes(sites) * 8e-9 / self.compute_s if self.compute_s > 0 else 0.0

    def weight(self) -> float:
        """Share weight from priority: x2 per +100 (priority 0 -> 1, 100 -> 2, -100 -> 0.5)."""
        return float(2.0 ** (max(-1000, min(1000, self.priority)) / 100.0))

    def step_time(
        self,
        layout: Layout,
        *,
        wan_gbps: float = math.inf,
        wan_rtt_ms: float = 0.0,
        intra_node_gbs: float = math.inf,
        assumptions: CommAssumptions | None = None,
    ) -> StepTime:
        """Step time of this job laid out as `layout`, with `wan_gbps` per cross-region hop
        (the slowest hop of its ring), `wan_rtt_ms` the slowest hop's RTT, and the nodes'
        intra-node bandwidth in GB/s."""
        a = assumptions or CommAssumptions()
        fabric = a.fabric_gbps
        dp = 0.0
        n = layout.max_nodes_in_region
        if n > 1:  # inside each region, over the fabric
            dp += self.ring_bytes(n) * 8e-9 / fabric + 2 * (n - 1) * a.fabric_latency_ms / 1e3
        if layout.sites > 1:  # across regions: one ring hop per region, RTT per round trip
            r = layout.sites
            dp += self.ring_bytes(r) * 8e-9 / max(wan_gbps, 1e-9) + (r - 1) * wan_rtt_ms / 1e3
        dp = max(0.0, dp - a.overlap_share * self.micro_batch_s)
        tp = 0.0
        if self.tensor_parallel > 1 and math.isfinite(intra_node_gbs):
            tp = self.grad_accum_steps * self.tp_bytes_per_gpu / (intra_node_gbs * 1e9)
        pp = 0.0
        boundaries = self._node_boundaries(layout.gpus_per_node)
        if boundaries and layout.nodes > 1:
            per = self.pp_boundary_bytes * 8e-9 / fabric + a.fabric_latency_ms / 1e3
            pp = boundaries * 2 * self.grad_accum_steps * per
        return StepTime(self.compute_s, dp, tp, pp)

    def _node_boundaries(self, gpus_per_node: int) -> int:
        """Pipeline stage boundaries that fall between nodes in one replica."""
        if self.pipeline_parallel <= 1:
            return 0
        nodes = math.ceil(self.replica_gpus / max(1, gpus_per_node))
        return min(self.pipeline_parallel - 1, max(0, nodes - 1))


def _shape(params: float) -> tuple[int, int]:
    """(hidden, layers) of a GPT-like model with `params` parameters."""
    hidden = (params * 128.0 / 12.0) ** (1.0 / 3.0)
    hidden = max(128, round(hidden / 128.0) * 128)
    layers = max(1, round(params / (12.0 * hidden * hidden)))
    return hidden, layers


def comm_demand(
    job: JobSpec, peak_tflops: float, assumptions: CommAssumptions | None = None
) -> CommDemand | None:
    """The job's communication demand on a GPU with `peak_tflops` at its precision; None when
    it is not modelled (not TRAINING, unknown size, or a GPU without that precision)."""
    if job.kind != "TRAINING" or job.params_b <= 0 or peak_tflops <= 0 or job.gpu_count < 2:
        return None
    a = assumptions or CommAssumptions()
    params = job.params_b * 1e9
    mb = job.micro_batch or a.micro_batch
    seq = job.seq_len or a.seq_len
    tp, pp = max(1, job.tensor_parallel), max(1, job.pipeline_parallel)
    tokens = mb * seq
    rate = tp * pp * peak_tflops * 1e12 * a.mfu
    hidden, layers = _shape(params)
    act_bytes = 4 if job.precision in ("FP32", "TF32") else 2
    act = mb * seq * hidden * act_bytes
    return CommDemand(
        micro_batch_s=6.0 * params * tokens / rate,
        grad_accum_steps=max(1, job.grad_accum_steps),
        grad_bytes=params * _GRAD_BYTES.get(job.precision, 4),
        tp_bytes_per_gpu=4 * layers * act * 2.0 * (tp - 1) / tp,
        pp_boundary_bytes=float(act),
        tensor_parallel=tp,
        pipeline_parallel=pp,
        priority=job.priority,
    )
