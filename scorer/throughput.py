"""How fast a job runs on a GPU model (memory needs: `scorer.memory`).

Measured table first (Gavel format: job_type x gpu_type x scale_factor x consolidated ->
steps/s); where a model is missing from the table, the measured figure of another model is
scaled by the roofline ratio; where the job type is unknown, the roofline alone decides:

- TRAINING / BATCH are compute-bound: rate = peak TFLOPS at the job's precision x MFU (training
  costs ~6·params·tokens FLOPs, a forward pass ~2·params·tokens; the constant cancels in ratios).
- INFERENCE decode is bound by memory bandwidth: rate = HBM GB/s x MBU / bytes per token.
- NOTEBOOK: geometric mean of the two.

Speeds are relative to a reference GPU model (the job's `reference_gpu_model`, else V100-16, the
GPU Gavel's durations are drawn on).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from scorer.catalog import Catalog, GpuModelSpec, default_catalog
from scorer.errors import CatalogError
from scorer.types import JobSpec

# Gavel's measured table, shipped as package data (source and licence: scorer/data/README.md)
GAVEL_CSV = Path(__file__).resolve().parent / "data" / "gavel_isolated_throughputs.csv"

__all__ = [
    "DEFAULT_REFERENCE",
    "GAVEL_CSV",
    "ThroughputModel",
    "gavel_throughputs",
    "load_gavel_csv",
]

DEFAULT_REFERENCE = "V100-16"
_FALLBACK = {"FP8": "FP16", "INT8": "FP16", "BF16": "FP16", "TF32": "FP32", "FP16": "FP32"}

MeasuredKey = tuple[str, str, int, bool]  # job_type, canonical model, scale_factor, consolidated


def _effective_peak(spec: GpuModelSpec, precision: str) -> float:
    """Peak at `precision`, else at the nearest precision the chip has (for the reference)."""
    p: str | None = precision
    while p is not None:
        peak = spec.peak_tflops(p)
        if peak > 0:
            return peak
        p = _FALLBACK.get(p)
    return 0.0


@dataclass(frozen=True)
class _Rates:
    compute: float
    memory: float


class ThroughputModel:
    """Relative speed of (job, GPU model) pairs: measured when known, roofline otherwise."""

    def __init__(
        self,
        catalog: Catalog | None = None,
        measured: Mapping[MeasuredKey, float] | None = None,
        *,
        reference: str = DEFAULT_REFERENCE,
        mfu: float = 0.4,
        mbu: float = 0.6,
    ) -> None:
        self.catalog = catalog or default_catalog()
        self.measured: dict[MeasuredKey, float] = dict(measured or {})
        self.reference = self.catalog.canonical(reference)
        self.mfu, self.mbu = mfu, mbu
        self._job_types = {k[0] for k in self.measured}
        self._models_by_type: dict[str, set[str]] = {}
        for jt, model, _, _ in self.measured:
            self._models_by_type.setdefault(jt, set()).add(model)
        self._cache: dict[tuple[object, ...], float] = {}

    @classmethod
    def load_gavel_csv(cls, path: str | Path, catalog: Catalog | None = None) -> ThroughputModel:
        return load_gavel_csv(path, catalog)

    def with_catalog(self, catalog: Catalog) -> ThroughputModel:
        """The same measurements and assumptions over another catalogue."""
        return ThroughputModel(
            catalog, self.measured, reference=self.reference, mfu=self.mfu, mbu=self.mbu
        )

    def knows(self, job_type: str) -> bool:
        return job_type in self._job_types

    def steps_per_s(
        self, job_type: str, model: str, gpus: int = 1, consolidated: bool = True
    ) -> float | None:
        """Measured steps/s, scaled linearly from the largest measured scale <= `gpus`.

        A scale measured only with the other consolidation stands in for the missing one.
        """
        model = self.catalog.canonical(model)
        for scale in (s for s in (8, 4, 2, 1) if s <= gpus):
            value = self.measured.get((job_type, model, scale, consolidated))
            if value is None:
                value = self.measured.get((job_type, model, scale, not consolidated))
            if value is not None:
                return value * gpus / scale
        return None

    def _rates(self, spec: GpuModelSpec, precision: str, strict: bool) -> _Rates:
        peak = spec.peak_tflops(precision) if strict else _effective_peak(spec, precision)
        return _Rates(peak * self.mfu, spec.memory_bandwidth_gbs * self.mbu)

    def _roofline(self, job: JobSpec, model: str, reference: str) -> float:
        spec, ref = self.catalog.get(model), self.catalog.get(reference)
        if spec is None or ref is None:
            return 0.0
        mine = self._rates(spec, job.precision, True)
        theirs = self._rates(ref, job.precision, False)
        compute = mine.compute / theirs.compute if theirs.compute else 0.0
        memory = mine.memory / theirs.memory if theirs.memory and mine.compute else 0.0
        if job.kind == "INFERENCE":
            return memory
        if job.kind == "NOTEBOOK":
            return math.sqrt(compute * memory)
        return compute

    def _measured_or_scaled(self, job: JobSpec, model: str, consolidated: bool) -> float | None:
        value = self.steps_per_s(job.job_type, model, job.gpu_count, consolidated)
        if value is not None:
            return value
        anchor = self._anchor(job)
        if anchor is None:
            return None
        known = self.steps_per_s(job.job_type, anchor, job.gpu_count, consolidated)
        # scale the measured model closest in capability by the roofline ratio
        return known * self._roofline(job, model, anchor) if known else None

    def _anchor(self, job: JobSpec) -> str | None:
        """The measured model with the highest peak at the job's precision."""
        models = [m for m in self._models_by_type.get(job.job_type, ()) if m in self.catalog]
        if not models:
            return None
        return max(models, key=lambda m: (self.catalog[m].peak_tflops(job.precision), m))

    def relative_speed(self, job: JobSpec, model: str, consolidated: bool = True) -> float:
        """Job throughput on `model` over throughput on the reference GPU; 0 = cannot run.

        The reference always runs consolidated (one node), so a spread gang's speed carries the
        cost of crossing nodes instead of dividing it away.
        """
        model = self.catalog.canonical(model)
        reference = self.catalog.canonical(job.reference_gpu_model or self.reference)
        key = (job.job_type, job.kind, job.precision, job.gpu_count, reference, consolidated, model)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        speed = self._roofline(job, model, reference)
        if job.job_type and self.knows(job.job_type):
            mine = self._measured_or_scaled(job, model, consolidated)
            ref = self._measured_or_scaled(job, reference, True)
            if mine is not None and ref:
                speed = mine / ref
            elif mine == 0:
                speed = 0.0
        self._cache[key] = speed
        return speed

    def expected_duration_s(self, job: JobSpec, model: str, speed: float) -> float | None:
        """Run time on `model` at relative `speed` (already including perf factors)."""
        if speed <= 0:
            return None
        if job.expected_duration_s is not None:
            return job.expected_duration_s / speed
        if job.total_steps is not None and self.knows(job.job_type):
            reference = job.reference_gpu_model or self.reference
            ref = self._measured_or_scaled(job, reference, True)
            if ref:
                return job.total_steps / (ref * speed)
        return None


def _parse_row(row: Mapping[str, str], catalog: Catalog) -> tuple[MeasuredKey, float]:
    key = (
        row["job_type"],
        catalog.canonical(row["gpu_type"]),
        int(row["scale_factor"]),
        row["consolidated"].strip() in ("1", "true", "True"),
    )
    return key, float(row["steps_per_sec"])


def load_gavel_csv(path: str | Path, catalog: Catalog | None = None) -> ThroughputModel:
    """ThroughputModel from Gavel's isolated throughputs (format: scorer/data/README.md)."""
    catalog = catalog or default_catalog()
    try:
        with Path(path).open(newline="", encoding="utf-8") as fh:
            table = dict(_parse_row(row, catalog) for row in csv.DictReader(fh))
    except (OSError, KeyError, ValueError) as exc:
        raise CatalogError(f"cannot read Gavel throughputs {path}: {exc}") from exc
    if not table:
        raise CatalogError(f"Gavel throughputs {path} has no rows")
    return ThroughputModel(catalog, table)


def gavel_throughputs(catalog: Catalog | None = None) -> ThroughputModel:
    """Gavel's measured table as shipped with gpuflow (`GAVEL_CSV`)."""
    return load_gavel_csv(GAVEL_CSV, catalog)
