"""A seeded generator of realistic job submissions, and a publisher that paces them.

The mix follows what multi-tenant GPU platforms see: many single-GPU jobs, some 2/4/8-GPU
gangs and a few large ones; inference services and notebooks asking for GPU shares; a fifth of
jobs pinned to regions for data residency; a tenth at high priority. Jobs declare what a memory
estimate needs (fine-tuning method, micro-batch, sequence or context length, serving batch) and
the software stack they were built for: most for a CUDA release, some for ROCm or CANN, a third
portable (framework wheels for every vendor), legacy batch work for an old CUDA.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from agents.models import physics
from agents.spec import FleetSpec
from infra.config import Config
from infra.kafka import producer
from infra.topics import JOBS_SUBMITTED
from schemas import make_codec
from scorer import default_catalog
from scorer.stacks import node_stack, parse_stack, satisfies

__all__ = ["DEMO_MEAN_DURATION_S", "STACK_MIX", "generate_jobs", "run_jobgen"]

DEMO_MEAN_DURATION_S = 1800.0  # on the reference V100: ~4 min on an H100, ~2 h on a K80

# family, params (B), precision, tensor parallel, fine-tuning, gang sizes to draw from
_TRAINING = (
    ("resnet", 0.025, "FP16", 1, "FULL", (1, 1, 2, 4, 8)),
    ("bert", 0.34, "BF16", 1, "FULL", (1, 1, 2, 4, 8)),
    ("llama", 7.0, "BF16", 1, "FULL", (4, 8, 8, 16)),
    ("llama", 7.0, "BF16", 1, "LORA", (1, 1, 2)),
    ("llama", 13.0, "BF16", 2, "FULL", (8, 16)),
    ("llama", 13.0, "BF16", 1, "QLORA", (1,)),
    ("llama", 70.0, "BF16", 8, "LORA", (8, 16)),
)
# family, params (B), precision, tensor parallel, concurrent sequences, context
_INFERENCE = (
    ("llama", 7.0, "FP16", 1, (1, 2, 4, 8), 4096),
    ("llama", 13.0, "INT8", 1, (1, 2, 4), 4096),
    ("mistral", 7.0, "FP8", 1, (4, 8, 16), 8192),
    ("llama", 70.0, "FP16", 4, (8, 16), 4096),
    ("llama", 70.0, "FP8", 2, (8, 16), 4096),
)
# what jobs are built for, and how often (legacy batch work draws from _LEGACY instead)
STACK_MIX: tuple[tuple[str, float], ...] = (
    ("cuda-12.1", 0.32),
    ("cuda-11.8", 0.12),
    ("cuda-11.0", 0.05),
    ("cuda", 0.04),
    ("rocm-6.0", 0.07),
    ("cann-8.0", 0.07),
    ("portable", 0.33),
)
# batch work is often old code: CUDA 10.2 wheels run on up to sm_75 (V100, T4, P100, K80)
_LEGACY = (("cuda-10.2", 0.4), ("cuda-11.0", 0.2), ("portable", 0.4))


def _choice(rng: np.random.Generator, options: Sequence[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def _weighted(rng: np.random.Generator, mix: Sequence[tuple[str, float]]) -> str:
    names, weights = zip(*mix, strict=True)
    return str(rng.choice(names, p=np.asarray(weights) / sum(weights)))


def _stack(rng: np.random.Generator, precision: str) -> str:
    """A build stack that can do `precision`: FP8 needs CUDA 11.8+, ROCm or a portable build."""
    if precision == "FP8":
        return _weighted(rng, [(s, w) for s, w in STACK_MIX if s not in ("cann-8.0", "cuda-11.0")])
    return _weighted(rng, STACK_MIX)


class _Homes:
    """Regions of a fleet where a (stack, precision) build can run: a team keeps its data
    where its hardware is, so a ROCm job's data lives in a region with AMD GPUs."""

    def __init__(self, fleet: FleetSpec) -> None:
        self.fleet = fleet
        self._cache: dict[tuple[str, str], list[str]] = {}

    def __call__(self, stack: str, precision: str) -> list[str]:
        key = (stack, precision)
        if key not in self._cache:
            self._cache[key] = [
                r.name for r in self.fleet.regions if self._runs(r, stack, precision)
            ]
        return self._cache[key]

    @staticmethod
    def _runs(region: Any, stack: str, precision: str) -> bool:
        wanted, catalog = parse_stack(stack), default_catalog()
        for pool in region.pools:
            spec = catalog.get(pool.gpu_model)
            if spec is None or not spec.supports(precision):
                continue
            have = node_stack(pool.software_stack, physics(pool.gpu_model).vendor)
            if wanted is None or satisfies(have.family, have.code, wanted, spec.compute_capability):
                return True
        return False


def _training(rng: np.random.Generator) -> dict[str, Any]:
    family, params, precision, tp, finetune, gangs = _choice(rng, _TRAINING)
    count = max(tp, int(_choice(rng, gangs)))
    return {
        "kind": "TRAINING",
        "model_family": family,
        "params_b": params,
        "precision": precision,
        "tensor_parallel": tp,
        "gpu_count": count,
        "data_parallel": max(1, count // tp),
        "finetune": finetune,
        "micro_batch": int(_choice(rng, (1, 2, 4))),
        "seq_len": int(_choice(rng, (512, 2048, 4096))) if params >= 1 else 512,
        "checkpoint_interval_s": 600,
        "software_stack": _stack(rng, precision),
    }


def _inference(rng: np.random.Generator) -> dict[str, Any]:
    family, params, precision, tp, batches, context = _choice(rng, _INFERENCE)
    share = tp == 1 and params <= 7 and rng.random() < 0.5
    # a share is sized to hold the model: 7B in FP16 needs half of an 80 GB GPU
    milli = int(_choice(rng, (250, 500))) if precision == "FP8" else 500
    return {
        "kind": "INFERENCE",
        "model_family": family,
        "params_b": params,
        "precision": precision,
        "tensor_parallel": tp,
        "gpu_count": tp,
        "gpu_milli": milli if share else 1000,
        "micro_batch": 1 if share else int(_choice(rng, batches)),
        "seq_len": context,
        "preemptible": False,
        "software_stack": _stack(rng, precision),
    }


def _other(rng: np.random.Generator) -> dict[str, Any]:
    if rng.random() < 0.4:
        return {
            "kind": "NOTEBOOK",
            "gpu_milli": int(_choice(rng, (100, 250, 500))),
            "precision": "FP16",
            "software_stack": _stack(rng, "FP16"),
        }
    return {
        "kind": "BATCH",
        "gpu_count": int(_choice(rng, (1, 1, 2))),
        "precision": "FP32",
        "software_stack": _weighted(rng, _LEGACY),
    }


def generate_jobs(
    n: int,
    *,
    seed: int = 0,
    regions: Sequence[str] = (),
    mean_duration_s: float = 60.0,
    prefix: str = "job",
    fleet: FleetSpec | None = None,
) -> list[dict[str, Any]]:
    """`n` JobSubmitted records (without event_id/ts), deterministic for a seed.

    With a `fleet`, a job's data region (and its residency pin) is one where its build and
    precision can run at all; otherwise any of `regions`.
    """
    rng = np.random.default_rng(seed)
    homes = _Homes(fleet) if fleet is not None else None
    regions = list(regions) or ([r.name for r in fleet.regions] if fleet else [])
    jobs = []
    for i in range(n):
        roll = rng.random()
        job = _training(rng) if roll < 0.45 else _inference(rng) if roll < 0.75 else _other(rng)
        job["job_id"] = f"{prefix}-{seed}-{i:06d}"
        job["tenant"] = _choice(rng, ("vision", "nlp", "ads", "research", "platform"))
        job["priority"] = 100 if rng.random() < 0.1 else 0
        job["cost_speed_preference"] = float(np.round(rng.random(), 2))
        job["expected_duration_s"] = float(np.round(rng.lognormal(np.log(mean_duration_s), 0.6), 1))
        if regions:
            home = homes(job["software_stack"], job["precision"]) if homes else []
            job["data_region"] = _choice(rng, [r for r in home if r in regions] or regions)
            if rng.random() < 0.2:
                job["allowed_regions"] = [job["data_region"]]
        jobs.append(job)
    return jobs


def run_jobgen(
    config: Config,
    jobs: Sequence[dict[str, Any]],
    *,
    rate_per_s: float,
    stop: threading.Event,
) -> int:
    """Publish `jobs` at `rate_per_s` until done or `stop`; returns how many were sent."""
    codec = make_codec(config.kafka.schema_registry_url or None)
    p = producer(config.kafka)
    sent = 0
    started = time.monotonic()
    try:
        for job in jobs:
            if stop.is_set():
                break
            due = started + sent / rate_per_s
            if (wait := due - time.monotonic()) > 0 and stop.wait(wait):
                break
            record = {**job, "event_id": str(uuid.uuid4()), "ts": int(time.time() * 1000)}
            value = codec.encode("JobSubmitted", record, topic=JOBS_SUBMITTED)
            p.produce(JOBS_SUBMITTED, key=job["job_id"].encode(), value=value)
            p.poll(0)
            sent += 1
    finally:
        p.flush(10)
    return sent
