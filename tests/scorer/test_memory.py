"""The memory model: per-GPU needs part by part, sharding, fine-tuning, KV cache, and advice.

Shapes used below (scorer/memory.py's table): Llama 7B 32 layers x 4096 hidden, 32 KV heads;
13B 40 x 5120, 40 KV heads; 70B 80 x 8192, 8 KV heads (GQA), head dim 128. GiB = 2**30 B.
"""

from __future__ import annotations

from typing import Any

import pytest

from scorer import JobSpec, memory_advice, memory_need, memory_need_mib, memory_refusal
from scorer.errors import InvalidSpecError
from scorer.memory import FRAMEWORK_OVERHEAD_BYTES, effective_sharding, model_shape

OVERHEAD = FRAMEWORK_OVERHEAD_BYTES  # 1.5 GiB = 1,610,612,736 B
H100 = 81_559  # MiB, as NVML reports an 80 GB H100


def train(params: float, **kw: Any) -> JobSpec:
    return JobSpec(
        "j", kind="TRAINING", model_family="llama", params_b=params, precision="BF16", **kw
    )


def serve(params: float, **kw: Any) -> JobSpec:
    return JobSpec("j", kind="INFERENCE", model_family="llama", params_b=params, **kw)


# activations with checkpointing (s = 2048, b = 1): 2·s·h·L + one layer 34·s·h
ACT_7B = 2 * 2048 * 4096 * 32 + 34 * 2048 * 4096  # 536,870,912 + 285,212,672 B
ACT_13B = 2 * 2048 * 5120 * 40 + 34 * 2048 * 5120
ACT_70B = 2 * 2048 * 8192 * 80 + 34 * 2048 * 8192  # 2.68e9 + 0.57e9 B

CASES = [
    # name, job, (weights, gradients, optimizer, activations, kv) in bytes
    # 7B on one GPU, Adam, mixed precision: 2 + 2 + 12 = 16 B/param = 112e9 B
    ("7B full 1 GPU", train(7), (14e9, 14e9, 84e9, ACT_7B, 0)),
    # 8 GPUs: FSDP by default, every state / 8, plus two gathered layers 2 x 7e9/32 x 2 B
    (
        "7B full 8 GPUs",
        train(7, gpu_count=8),
        (14e9 / 8 + 2 * 7e9 / 32 * 2, 14e9 / 8, 84e9 / 8, ACT_7B, 0),
    ),
    # LoRA: frozen 16-bit base + 0.5 % adapters (35e6) with grads and Adam (2 + 12 B)
    ("7B LoRA 1 GPU", train(7, finetune="LORA"), (14e9 + 35e6 * 2, 35e6 * 2, 35e6 * 12, ACT_7B, 0)),
    # 13B, 8 GPUs, FSDP: 13e9 x 16 / 8 = 26e9 B = 24.2 GiB of states (the "about 24")
    (
        "13B full 8 GPUs",
        train(13, gpu_count=8),
        (26e9 / 8 + 2 * 13e9 / 40 * 2, 26e9 / 8, 156e9 / 8, ACT_13B, 0),
    ),
    # declared data parallel without sharding keeps a full replica: 13e9 x 16 = 208e9 B
    ("13B DDP 8 GPUs", train(13, gpu_count=8, sharding="none"), (26e9, 26e9, 156e9, ACT_13B, 0)),
    # ZeRO-1 shards the optimizer only; ZeRO-2 the gradients too
    ("13B ZeRO-1", train(13, gpu_count=8, sharding="zero-1"), (26e9, 26e9, 156e9 / 8, ACT_13B, 0)),
    (
        "13B ZeRO-2",
        train(13, gpu_count=8, sharding="ZERO2"),
        (26e9, 26e9 / 8, 156e9 / 8, ACT_13B, 0),
    ),
    # 70B FSDP over 8: 140e9 / 8 + 2 layers 2 x 70e9/80 x 2 B; 1.12e12 / 8 of states
    ("70B full 8 GPUs", train(70, gpu_count=8), (17.5e9 + 3.5e9, 17.5e9, 105e9, ACT_70B, 0)),
    # offloaded optimizer: nothing of Adam stays on the GPU
    ("70B offload", train(70, gpu_count=8, optimizer_offload=True), (21e9, 17.5e9, 0, ACT_70B, 0)),
    # 8-bit Adam: 4 (fp32 master) + 2 x 1 B = 6 B per parameter
    ("7B 8-bit Adam", train(7, optimizer="adam-8bit"), (14e9, 14e9, 42e9, ACT_7B, 0)),
    # QLoRA: 4-bit base at 0.55 B/param + adapters 0.35e9 x (2 + 2 + 12)
    ("70B QLoRA 1 GPU", train(70, finetune="QLORA"), (38.5e9 + 0.7e9, 0.7e9, 4.2e9, ACT_70B, 0)),
    # no checkpointing: 34·s·h for every layer = 34 x 2048 x 4096 x 32 = 9.13e9 B
    (
        "7B no ckpt",
        train(7, activation_checkpointing=False),
        (14e9, 14e9, 84e9, 34 * 2048 * 4096 * 32, 0),
    ),
    # micro-batch 4 x 4096 tokens and TP 2: activations x 8, / 2; weights / 2
    (
        "7B b4 s4096 TP2",
        train(7, micro_batch=4, seq_len=4096, tensor_parallel=2, gpu_count=2),
        (7e9, 7e9, 42e9, ACT_7B * 8 / 2, 0),
    ),
    # serving 7B FP16: weights 14e9; KV 2 x 32 layers x 32 heads x 128 x 4096 tokens x 2 B
    ("serve 7B", serve(7, precision="FP16"), (14e9, 0, 0, 0, 2 * 32 * 32 * 128 * 4096 * 2)),
    # 70B FP16 over TP 4, 16 sequences of 4096: KV 2 x 80 x 8 x 128 x 65,536 x 2 B / 4
    (
        "serve 70B TP4 b16",
        serve(70, precision="FP16", tensor_parallel=4, gpu_count=4, micro_batch=16),
        (35e9, 0, 0, 0, 2 * 80 * 8 * 128 * 65536 * 2 / 4),
    ),
    # FP8 halves the weights and the KV cache
    (
        "serve 70B FP8 TP2",
        serve(70, precision="FP8", tensor_parallel=2, gpu_count=2, micro_batch=16),
        (35e9, 0, 0, 0, 2 * 80 * 8 * 128 * 65536 / 2),
    ),
]


@pytest.mark.parametrize(("name", "job", "parts"), CASES, ids=[c[0] for c in CASES])
def test_memory_parts(name: str, job: JobSpec, parts: tuple[float, ...]) -> None:
    need = memory_need(job)
    got = (need.weights, need.gradients, need.optimizer, need.activations, need.kv_cache)
    assert got == pytest.approx(parts, rel=1e-9)
    assert need.overhead == OVERHEAD
    assert need.mib == pytest.approx((sum(parts) + OVERHEAD) / 2**20, abs=1)  # ceil


def test_explicit_minimum_wins_and_unknown_models_need_nothing() -> None:
    assert memory_need_mib(train(70, min_gpu_memory_mib=1234)) == 1234
    assert memory_need_mib(JobSpec("j")) == 0


def test_sharding_defaults() -> None:
    assert effective_sharding(train(7)) == "NONE"  # one GPU: nothing to shard over
    assert effective_sharding(train(7, gpu_count=8)) == "FSDP"
    # 8 GPUs as one TP x PP replica: data-parallel degree 1, no sharding
    assert effective_sharding(train(7, gpu_count=8, tensor_parallel=8)) == "NONE"
    assert effective_sharding(serve(7, gpu_count=8)) == "NONE"
    assert effective_sharding(train(7, gpu_count=8, sharding="zero3")) == "FSDP"


def test_shapes() -> None:
    assert model_shape("llama", 70) == model_shape("Llama", 65)  # within 15 %
    # unknown family: L = round((6e9 / (12 x 128²))^(1/3)) = round(30.9) = 31, h = 128 x 31
    shape = model_shape("gpt", 6)
    assert (shape.layers, shape.hidden, shape.kv_heads) == (31, 3968, 31)


@pytest.mark.parametrize(
    ("job", "have", "advice"),
    [
        # 70B full over 8 H100s needs 138 GiB: 16 GPUs give 73 GiB; offload 40 GiB; LoRA 25 GiB
        (train(70, gpu_count=8), H100, ["on 16 GPUs", "with optimizer offload", "with LoRA"]),
        # a DDP job (196 GiB) fits once sharded (28 GiB), or with the optimizer offloaded:
        # 26e9 + 26e9 B of weights and gradients + activations + overhead = 51 GiB
        (
            train(13, gpu_count=8, sharding="NONE"),
            H100,
            ["with FSDP", "with optimizer offload", "with LoRA"],
        ),
        # 7B DDP on 2 x 40 GiB: FSDP over 2 leaves 55 GiB; over 4, 112e9 / 4 + 0.875e9 gathered
        # + activations + overhead = 31.3e9 B = 29.2 GiB; offload: 28e9 B + the rest = 28.3 GiB
        (
            train(7, gpu_count=2, sharding="NONE"),
            40_960,
            ["on 4 GPUs with FSDP", "with optimizer offload", "with LoRA"],
        ),
        # 70B FP16 serving on one GPU: 130 GiB of weights -> TP 2 (68 GiB) or 1 byte (69 GiB)
        (serve(70, precision="FP16"), H100, ["with tensor_parallel 2 (2 GPUs)", "in FP8 or INT8"]),
        # a 16 GiB GPU: a 7B LoRA needs 15.8 GiB, so only QLoRA (and sharding) fits
        (train(7, finetune="LORA"), 16_160, ["on 2 GPUs", "with QLoRA"]),
    ],
)
def test_advice_names_what_would_fit(job: JobSpec, have: int, advice: list[str]) -> None:
    assert memory_advice(job, have) == advice


def test_refusal_is_one_short_line_in_gib() -> None:
    line = memory_refusal(train(70, gpu_count=8), H100, "H100")
    assert line == (
        "needs 138 GiB per GPU, H100 has 79.6 GiB; fits on 16 GPUs, with optimizer offload, "
        "or with LoRA"
    )


def test_bad_choices_name_the_field() -> None:
    with pytest.raises(InvalidSpecError, match="sharding"):
        train(7, sharding="ZERO4")
    with pytest.raises(InvalidSpecError, match="finetune"):
        train(7, finetune="DORA")
    assert train(7, optimizer="adamw").optimizer == "ADAM"
