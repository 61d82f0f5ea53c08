"""Capability catalogue: what each accelerator model can do, from vendor-published figures."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from scorer._catalog_data import ALIASES, COMPUTE_CAPABILITY, MODELS
from scorer.errors import CatalogError

__all__ = ["OPAQUE_BASE", "Catalog", "GpuModelSpec", "default_catalog", "load_catalog"]

# an unknown model taken as is gets the figures of the reference GPU (durations are measured
# there), so it runs at reference speed until a catalogue file describes it
OPAQUE_BASE = "V100-16"

_TFLOPS_FIELD = {
    "FP32": "fp32_tflops",
    "TF32": "tf32_tflops",
    "BF16": "bf16_tflops",
    "FP16": "fp16_tflops",
    "FP8": "fp8_tflops",
    "INT8": "int8_tops",
}


@dataclass(frozen=True)
class GpuModelSpec:
    """One accelerator model. Peak figures are dense; 0 means the precision is unsupported."""

    name: str
    vendor: str = "nvidia"
    architecture: str = ""
    fp32_tflops: float = 0.0
    tf32_tflops: float = 0.0
    bf16_tflops: float = 0.0
    fp16_tflops: float = 0.0
    fp8_tflops: float = 0.0
    int8_tops: float = 0.0
    memory_gb: float = 0.0
    memory_bandwidth_gbs: float = 0.0
    interconnect: str = "pcie"
    interconnect_gbs: float = 16.0
    mig: bool = False
    flash_attention: bool = False
    power_w: float = 300.0
    price_per_gpu_hour: float = 0.0
    compute_capability: float = 0.0  # CUDA SM version (9.0 = Hopper); 0 = not a CUDA part

    @property
    def fp8(self) -> bool:
        """Native FP8 arithmetic (Hopper, Ada, CDNA3)."""
        return self.fp8_tflops > 0

    @property
    def memory_mib(self) -> int:
        """Memory in MiB; vendors' HBM "GB" are GiB in practice (an 80 GB A100 shows 81920 MiB)."""
        return int(self.memory_gb * 1024)

    def peak_tflops(self, precision: str) -> float:
        """Dense peak at `precision`; 0.0 when unsupported or unknown."""
        name = _TFLOPS_FIELD.get(precision.upper())
        return float(getattr(self, name)) if name else 0.0

    def supports(self, precision: str) -> bool:
        return self.peak_tflops(precision) > 0


class Catalog:
    """Models by canonical name, with aliases (Gavel's `k80`, `v100`, ...)."""

    def __init__(self, models: Iterable[GpuModelSpec], aliases: Mapping[str, str] | None = None):
        self._models: dict[str, GpuModelSpec] = {m.name: m for m in models}
        self._aliases: dict[str, str] = dict(aliases or {})
        for alias, target in self._aliases.items():
            if target not in self._models:
                raise CatalogError(f"alias {alias!r} points at unknown model {target!r}")

    def canonical(self, name: str) -> str:
        """The catalogue's name for `name` (itself when unknown)."""
        if name in self._models:
            return name
        return self._aliases.get(name, self._aliases.get(name.lower(), name))

    def get(self, name: str) -> GpuModelSpec | None:
        return self._models.get(self.canonical(name))

    def __getitem__(self, name: str) -> GpuModelSpec:
        spec = self.get(name)
        if spec is None:
            raise CatalogError(f"unknown GPU model {name!r}")
        return spec

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Any:
        return iter(self._models.values())

    def __len__(self) -> int:
        return len(self._models)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._models)

    @property
    def aliases(self) -> Mapping[str, str]:
        return dict(self._aliases)

    def with_opaque(self, names: Iterable[str]) -> Catalog:
        """A catalogue that also knows `names`, each with the figures of `OPAQUE_BASE`."""
        base = self.get(OPAQUE_BASE) or GpuModelSpec(OPAQUE_BASE)
        new = [
            replace(base, name=n, vendor="unknown", architecture="opaque")
            for n in names
            if n not in self
        ]
        return self.merged(new, {}) if new else self

    def merged(self, models: Iterable[GpuModelSpec], aliases: Mapping[str, str]) -> Catalog:
        """A new catalogue with `models` added or replacing same-named ones."""
        merged = dict(self._models)
        merged.update({m.name: m for m in models})
        return Catalog(merged.values(), {**self._aliases, **aliases})


def _spec_from_row(row: tuple[object, ...]) -> GpuModelSpec:
    names = [f.name for f in fields(GpuModelSpec)][: len(row)]
    values: dict[str, object] = dict(zip(names, row, strict=True))
    values["compute_capability"] = COMPUTE_CAPABILITY.get(str(values["name"]), 0.0)
    return GpuModelSpec(**values)  # type: ignore[arg-type]


_DEFAULT: Catalog | None = None


def default_catalog() -> Catalog:
    """The built-in catalogue of 14 accelerator models (shared, immutable)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Catalog((_spec_from_row(r) for r in MODELS), ALIASES)
    return _DEFAULT


def _read_document(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        return json.loads(text)
    import yaml  # only needed when a YAML catalogue is loaded

    return yaml.safe_load(text)


def _specs_from_document(doc: Any, base: Catalog) -> list[GpuModelSpec]:
    models = doc.get("models", {})
    items = models.items() if isinstance(models, Mapping) else ((m.get("name"), m) for m in models)
    known = {f.name for f in fields(GpuModelSpec)}
    specs = []
    for name, attrs in items:
        attrs = {k: v for k, v in dict(attrs).items() if k != "name"}
        unknown = set(attrs) - known
        if not name or unknown:
            raise CatalogError(f"model {name!r}: missing name or unknown fields {sorted(unknown)}")
        current = base.get(str(name))
        specs.append(replace(current, **attrs) if current else GpuModelSpec(str(name), **attrs))
    return specs


def load_catalog(path: str | Path, base: Catalog | None = None) -> Catalog:
    """Catalogue from a YAML or JSON file that adds or overrides models of `base` (default).

    File shape: ``{"models": {"H100": {"price_per_gpu_hour": 2.5}, "B200": {...}},
    "aliases": {"b200": "B200"}}``; `models` may also be a list of mappings with `name`.
    """
    base = base or default_catalog()
    path = Path(path)
    try:
        doc = _read_document(path)
    except (OSError, ValueError) as exc:
        raise CatalogError(f"cannot read catalogue {path}: {exc}") from exc
    if not isinstance(doc, Mapping):
        raise CatalogError(f"catalogue {path} must be a mapping with 'models'")
    try:
        specs = _specs_from_document(doc, base)
    except (TypeError, AttributeError) as exc:
        raise CatalogError(f"catalogue {path} is malformed: {exc}") from exc
    return base.merged(specs, dict(doc.get("aliases", {})))
