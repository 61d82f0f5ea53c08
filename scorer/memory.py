"""GPU memory a job needs per GPU, part by part, and what would make it fit.

Per GPU, in bytes (P parameters, t tensor and p pipeline degree, d data-parallel degree):

- weights: P / (t·p) x bytes per weight (2 for 16-bit training, 4 for FP32/TF32; for
  inference the precision's own width; QLoRA's 4-bit base 0.55 with its quantisation constants)
- gradients: trainable / (t·p) x bytes per weight (LoRA trains ~0.5 % of P; frozen weights none)
- optimizer: trainable / (t·p) x bytes per trainable parameter: Adam 12 in mixed precision
  (fp32 master + two moments) or 8 in FP32; 8-bit Adam 6 / 2; SGD with momentum 8 / 4;
  offloaded: 0 (master and moments live in host memory)
- sharding over d: ZeRO-1 divides the optimizer by d, ZeRO-2 also the gradients, ZeRO-3/FSDP
  also the weights, and then holds two layers gathered at a time (current and prefetched)
- activations (training, transformer): 34·s·b·h bytes per layer and TP shard (memory-efficient
  attention, sequence parallel; Korthikanti et al. 2022) for all L layers in flight (1F1B
  keeps p micro-batches of L/p layers on the first stage); with checkpointing 2·s·b·h per layer
  plus one layer recomputed; doubled in FP32
- KV cache (inference): 2 · L · kv_heads · head_dim · context · batch x bytes / (t·p)
- framework overhead: 1.5 GiB (CUDA context, NCCL/cuBLAS workspaces, allocator slack)

Defaults a user need not declare: sharding FSDP for training over more than one data-parallel
rank, none otherwise; checkpointing on for training of models of 1B parameters or more;
micro-batch 1; sequence 2,048 tokens for training, context 4,096 for inference, batch 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scorer.types import SHARDINGS, JobSpec
from scorer.units import gib

__all__ = [
    "FRAMEWORK_OVERHEAD_BYTES",
    "SHARDINGS",
    "MemoryNeed",
    "ModelShape",
    "fits_with",
    "memory_advice",
    "memory_need",
    "memory_need_mib",
    "memory_refusal",
    "model_shape",
]

BYTES_PER_PARAM = {"FP32": 4, "TF32": 4, "BF16": 2, "FP16": 2, "FP8": 1, "INT8": 1}
QLORA_WEIGHT_BYTES = 0.55  # NF4 (0.5 B) + double-quantised constants + 16-bit norms
LORA_TRAINABLE_SHARE = 0.005  # rank 16 on every linear layer adds ~0.5 % of the parameters
# bytes per trainable parameter: (mixed precision, pure FP32)
OPTIMIZER_BYTES = {"ADAM": (12, 8), "ADAM_8BIT": (6, 2), "SGD": (8, 4)}
ACTIVATION_BYTES_PER_TOKEN_HIDDEN = 34  # per layer, 16-bit, flash attention (Korthikanti 2022)
CHECKPOINT_BYTES_PER_TOKEN_HIDDEN = 2  # a checkpointed layer keeps only its 16-bit input
FRAMEWORK_OVERHEAD_BYTES = 1536 * 2**20
CHECKPOINT_AUTO_PARAMS_B = 1.0
DEFAULT_SEQ_TRAINING, DEFAULT_CONTEXT_INFERENCE = 2048, 4096
_HEAD_DIM = 128
_MAX_GPUS = 1024


@dataclass(frozen=True)
class ModelShape:
    """Transformer shape: layers, hidden size, attention heads and key/value heads."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int

    @property
    def head_dim(self) -> int:
        return self.hidden // max(1, self.heads)


# published configurations of common families (params in billions -> shape)
_KNOWN_SHAPES: dict[tuple[str, float], ModelShape] = {
    ("llama", 7): ModelShape(32, 4096, 32, 32),
    ("llama", 8): ModelShape(32, 4096, 32, 8),
    ("llama", 13): ModelShape(40, 5120, 40, 40),
    ("llama", 70): ModelShape(80, 8192, 64, 8),
    ("mistral", 7): ModelShape(32, 4096, 32, 8),
    ("bert", 0.34): ModelShape(24, 1024, 16, 16),
}


def model_shape(family: str, params_b: float) -> ModelShape:
    """A known family's shape (within 15 % of its size), else one derived from P ≈ 12·L·h²
    with h = 128·L and full multi-head attention (the cautious guess for the KV cache)."""
    family = family.lower()
    for (fam, size), shape in _KNOWN_SHAPES.items():
        if fam == family and abs(params_b - size) <= 0.15 * size:
            return shape
    layers = max(1, round((params_b * 1e9 / (12 * _HEAD_DIM**2)) ** (1 / 3)))
    hidden = _HEAD_DIM * layers
    return ModelShape(layers, hidden, layers, layers)


@dataclass(frozen=True)
class MemoryNeed:
    """Bytes per GPU, part by part."""

    weights: float = 0.0
    gradients: float = 0.0
    optimizer: float = 0.0
    activations: float = 0.0
    kv_cache: float = 0.0
    overhead: float = 0.0

    @property
    def total(self) -> float:
        return (
            self.weights
            + self.gradients
            + self.optimizer
            + self.activations
            + self.kv_cache
            + self.overhead
        )

    @property
    def mib(self) -> int:
        return math.ceil(self.total / 2**20)

    def parts(self) -> dict[str, float]:
        """Non-zero parts, in bytes."""
        names = ("weights", "gradients", "optimizer", "activations", "kv_cache", "overhead")
        return {n: float(getattr(self, n)) for n in names if getattr(self, n) > 0}


def data_parallel_degree(job: JobSpec) -> int:
    """Declared data-parallel degree, else the gang divided by one model replica."""
    if job.data_parallel > 1:
        return job.data_parallel
    return max(1, job.gpu_count // job.model_parallel)


def effective_sharding(job: JobSpec) -> str:
    """The declared sharding, else FSDP for training over more than one data-parallel rank."""
    if job.sharding:
        return "FSDP" if job.sharding == "ZERO3" else job.sharding
    if job.kind == "TRAINING" and data_parallel_degree(job) > 1:
        return "FSDP"
    return "NONE"


def checkpointing(job: JobSpec) -> bool:
    if job.activation_checkpointing is not None:
        return bool(job.activation_checkpointing)
    return job.params_b >= CHECKPOINT_AUTO_PARAMS_B


def memory_need(job: JobSpec) -> MemoryNeed:
    """Per-GPU memory of `job` by part (zero when nothing is known about its model)."""
    if job.params_b <= 0:
        return MemoryNeed()
    if job.kind == "TRAINING":
        return _training(job)
    return _inference(job)


def memory_need_mib(job: JobSpec) -> int:
    """Per-GPU need in MiB: the declared `min_gpu_memory_mib`, else the model's estimate."""
    if job.min_gpu_memory_mib > 0:
        return job.min_gpu_memory_mib
    return memory_need(job).mib if job.params_b > 0 else 0


def _training(job: JobSpec) -> MemoryNeed:
    shape = model_shape(job.model_family, job.params_b)
    mixed = job.precision not in ("FP32", "TF32")
    width = 2 if mixed else 4
    shard = job.params_b * 1e9 / job.model_parallel  # parameters on one TP x PP shard
    trainable = shard if job.finetune == "FULL" else shard * LORA_TRAINABLE_SHARE
    base = QLORA_WEIGHT_BYTES if job.finetune == "QLORA" else width
    weights = shard * base + (0 if job.finetune == "FULL" else trainable * width)
    grads = trainable * width
    per_param = 0 if job.optimizer_offload else OPTIMIZER_BYTES[job.optimizer][0 if mixed else 1]
    optimizer = trainable * per_param
    d, sharding, gather = data_parallel_degree(job), effective_sharding(job), 0.0
    if sharding in ("ZERO1", "ZERO2", "FSDP"):
        optimizer /= d
    if sharding in ("ZERO2", "FSDP"):
        grads /= d
    if sharding == "FSDP":
        weights /= d
        gather = 2 * shard * base / (shape.layers / max(1, job.pipeline_parallel))
    return MemoryNeed(
        weights=weights + gather,
        gradients=grads,
        optimizer=optimizer,
        activations=_activations(job, shape, width),
        overhead=FRAMEWORK_OVERHEAD_BYTES,
    )


def _activations(job: JobSpec, shape: ModelShape, width: int) -> float:
    tokens = (job.seq_len or DEFAULT_SEQ_TRAINING) * max(1, job.micro_batch)
    layer = ACTIVATION_BYTES_PER_TOKEN_HIDDEN * tokens * shape.hidden
    if checkpointing(job):
        total = CHECKPOINT_BYTES_PER_TOKEN_HIDDEN * tokens * shape.hidden * shape.layers + layer
    else:
        total = layer * shape.layers
    return total * (width / 2) / max(1, job.tensor_parallel)


def _inference(job: JobSpec) -> MemoryNeed:
    shape = model_shape(job.model_family, job.params_b)
    width = BYTES_PER_PARAM.get(job.precision, 4)
    kv_width = {"FP8": 1, "FP32": 4, "TF32": 4}.get(job.precision, 2)  # INT8 is weight-only
    tokens = (job.seq_len or DEFAULT_CONTEXT_INFERENCE) * max(1, job.micro_batch)
    kv = 2 * shape.layers * shape.kv_heads * shape.head_dim * tokens * kv_width
    return MemoryNeed(
        weights=job.params_b * 1e9 * width / job.model_parallel,
        kv_cache=kv / job.model_parallel,
        overhead=FRAMEWORK_OVERHEAD_BYTES,
    )


# ---- what would fit ------------------------------------------------------------------------


def fits_with(job: JobSpec, have_mib: float) -> bool:
    return memory_need_mib(job) <= have_mib


def _more_gpus(job: JobSpec, have_mib: float) -> str | None:
    """Smallest doubling of the data-parallel degree (sharded) at which the job fits."""
    if job.kind != "TRAINING" or job.min_gpu_memory_mib > 0:
        return None
    sharding = job.sharding if job.sharding in ("", "ZERO3", "FSDP") else "FSDP"
    d = data_parallel_degree(job)
    if sharding != job.sharding and d > 1 and fits_with(replace(job, sharding="FSDP"), have_mib):
        return "with FSDP"
    while job.model_parallel * d * 2 <= _MAX_GPUS:
        d *= 2
        gpus = job.model_parallel * d
        wider = replace(job, gpu_count=gpus, data_parallel=d, sharding=sharding)
        if fits_with(wider, have_mib):
            return f"on {gpus} GPUs" + (" with FSDP" if sharding != job.sharding else "")
    return None


def _wider_tp(job: JobSpec, have_mib: float) -> str | None:
    """Inference: the smallest tensor-parallel degree (one node, at most 8) that fits."""
    if job.kind == "TRAINING" or job.min_gpu_memory_mib > 0:
        return None
    for tp in (2, 4, 8):
        if tp > job.tensor_parallel:
            wider = replace(job, tensor_parallel=tp, gpu_count=tp * job.pipeline_parallel)
            if fits_with(wider, have_mib):
                return f"with tensor_parallel {tp} ({wider.gpu_count} GPUs)"
    return None


def _variants(job: JobSpec) -> list[tuple[str, JobSpec]]:
    out: list[tuple[str, JobSpec]] = []
    if job.kind == "TRAINING":
        if not job.optimizer_offload and job.finetune == "FULL":
            out.append(("with optimizer offload", replace(job, optimizer_offload=True)))
        if job.optimizer == "ADAM" and job.finetune == "FULL":
            out.append(("with 8-bit Adam", replace(job, optimizer="ADAM_8BIT")))
        if job.finetune == "FULL":
            out.append(("with LoRA", replace(job, finetune="LORA")))
        if job.finetune != "QLORA":
            out.append(("with QLoRA", replace(job, finetune="QLORA")))
        if not checkpointing(job):
            out.append(
                ("with activation checkpointing", replace(job, activation_checkpointing=True))
            )
    elif BYTES_PER_PARAM.get(job.precision, 4) > 1:
        out.append(("in FP8 or INT8", replace(job, precision="INT8")))
    return out


def memory_advice(job: JobSpec, have_mib: float, limit: int = 3) -> list[str]:
    """Up to `limit` changes that make the job fit GPUs of `have_mib`, most faithful first:
    more GPUs (sharded), then offload, 8-bit Adam, LoRA, QLoRA, checkpointing, lower precision."""
    if job.min_gpu_memory_mib > 0 or job.params_b <= 0:
        return []
    found: list[str] = []
    if job.gpu_milli >= 1000:  # a GPU share cannot grow into a gang
        found = [a for a in (_more_gpus(job, have_mib), _wider_tp(job, have_mib)) if a]
    for label, variant in _variants(job):
        if fits_with(variant, have_mib):
            if label == "with QLoRA" and "with LoRA" in found:
                continue  # LoRA fits already; QLoRA adds nothing to say
            found.append(label)
    return found[:limit]


_REFUSALS: dict[tuple[object, ...], str] = {}


def _memory_key(job: JobSpec) -> tuple[object, ...]:
    """The fields the estimate and the advice depend on (not the job's id)."""
    return (
        job.kind, job.params_b, job.precision, job.model_family, job.gpu_count, job.gpu_milli,
        job.data_parallel, job.tensor_parallel, job.pipeline_parallel, job.min_gpu_memory_mib,
        job.sharding, job.finetune, job.optimizer, job.optimizer_offload, job.micro_batch,
        job.seq_len, job.activation_checkpointing,
    )  # fmt: skip


def memory_refusal(job: JobSpec, have_mib: float, model: str = "the GPU") -> str:
    """'needs 138 GiB per GPU, H100 has 79.6 GiB; fits on 16 GPUs, with optimizer offload,
    or with LoRA' (one line). Cached: a queued job is explained again on every retry."""
    key = (_memory_key(job), float(have_mib), model)
    line = _REFUSALS.get(key)
    if line is None:
        if len(_REFUSALS) >= 4096:
            _REFUSALS.clear()
        line = _REFUSALS[key] = _refusal(job, have_mib, model)
    return line


def _refusal(job: JobSpec, have_mib: float, model: str) -> str:
    need = memory_need_mib(job)
    head = f"needs {gib(need)} per GPU, {model} has {gib(have_mib)}"
    advice = memory_advice(job, have_mib)
    if not advice:
        return head
    listed = advice[0] if len(advice) == 1 else ", ".join(advice[:-1]) + f", or {advice[-1]}"
    return f"{head}; fits {listed}"
