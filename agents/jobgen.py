"""A seeded generator of realistic job submissions, and a publisher that paces them.

The mix follows what multi-tenant GPU platforms see: many single-GPU jobs, some 2/4/8-GPU
gangs and a few large ones; inference services and notebooks asking for GPU shares; a fifth of
jobs pinned to regions for data residency; a tenth at high priority.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from infra.config import Config
from infra.kafka import producer
from infra.topics import JOBS_SUBMITTED
from schemas import make_codec

__all__ = ["generate_jobs", "run_jobgen"]

# (family, params in billions, precision, tensor parallel) per kind
_TRAINING = (
    ("resnet", 0.025, "FP16", 1),
    ("bert", 0.34, "BF16", 1),
    ("llama", 7.0, "BF16", 1),
    ("llama", 13.0, "BF16", 2),
    ("llama", 70.0, "BF16", 8),
)
_INFERENCE = (
    ("llama", 7.0, "FP16", 1),
    ("llama", 13.0, "INT8", 1),
    ("mistral", 7.0, "FP8", 1),
    ("llama", 70.0, "FP16", 4),
)
_GANGS = ((1, 0.55), (2, 0.12), (4, 0.15), (8, 0.15), (16, 0.03))


def _choice(rng: np.random.Generator, options: Sequence[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def _training(rng: np.random.Generator) -> dict[str, Any]:
    family, params, precision, tp = _choice(rng, _TRAINING)
    sizes, weights = zip(*_GANGS, strict=True)
    count = max(tp, int(rng.choice(sizes, p=weights)))
    return {
        "kind": "TRAINING",
        "model_family": family,
        "params_b": params,
        "precision": precision,
        "tensor_parallel": tp,
        "gpu_count": count,
        "data_parallel": max(1, count // tp),
        "checkpoint_interval_s": 600,
    }


def _inference(rng: np.random.Generator) -> dict[str, Any]:
    family, params, precision, tp = _choice(rng, _INFERENCE)
    share = tp == 1 and params <= 7 and rng.random() < 0.5
    return {
        "kind": "INFERENCE",
        "model_family": family,
        "params_b": params,
        "precision": precision,
        "tensor_parallel": tp,
        "gpu_count": tp,
        "gpu_milli": int(_choice(rng, (250, 500))) if share else 1000,
        "preemptible": False,
    }


def _other(rng: np.random.Generator) -> dict[str, Any]:
    if rng.random() < 0.4:
        return {
            "kind": "NOTEBOOK",
            "gpu_milli": int(_choice(rng, (100, 250, 500))),
            "precision": "FP16",
        }
    return {"kind": "BATCH", "gpu_count": int(_choice(rng, (1, 1, 2))), "precision": "FP32"}


def generate_jobs(
    n: int,
    *,
    seed: int = 0,
    regions: Sequence[str] = (),
    mean_duration_s: float = 60.0,
    prefix: str = "job",
) -> list[dict[str, Any]]:
    """`n` JobSubmitted records (without event_id/ts), deterministic for a seed."""
    rng = np.random.default_rng(seed)
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
            job["data_region"] = _choice(rng, regions)
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
