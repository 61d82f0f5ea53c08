"""The tenancy policy: tenants, cohorts, quotas, priority classes, preemption and backfill knobs.

One frozen value, parsed from a plain mapping (the policy file's YAML, see docs/tenancy.md) by
`parse_policy`, which names the first bad field (`tenants.vision.quotas[0].nominal: must be >=
0, got -1`). No policy file means `TenancyPolicy()`: the built-in classes, priority preemption
and backfill on, and no quotas (every tenant unconstrained, ordered by fair share).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from scorer.protection import ProtectionPolicy
from scorer.tenancy.classes import DEFAULT_CLASSES, PriorityClass
from scorer.tenancy.errors import PolicyError

__all__ = [
    "ANY",
    "RECLAIM_MODES",
    "BackfillPolicy",
    "PreemptionPolicy",
    "QuotaRule",
    "TenancyPolicy",
    "TenantPolicy",
    "parse_policy",
]

ANY = "*"
RECLAIM_MODES = ("any", "lower-priority", "never")


@dataclass(frozen=True)
class QuotaRule:
    """Nominal GPUs of one tenant in one region and GPU class (`*`: every region / class)."""

    region: str = ANY
    gpu_class: str = ANY
    nominal: float = 0.0  # GPUs (shares count their fraction)
    borrowing_limit: float | None = None  # GPUs beyond nominal; None: as much as the cohort lends

    @property
    def specificity(self) -> int:
        return (self.region != ANY) * 2 + (self.gpu_class != ANY)


@dataclass(frozen=True)
class TenantPolicy:
    name: str
    cohort: str | None = None  # tenants of one cohort lend each other idle nominal quota
    weight: float = 1.0  # fair-share weight (DRF shares are divided by it)
    quotas: tuple[QuotaRule, ...] = ()
    non_preemptible_gpus: float | None = None  # per region; None: no cap beyond nominal

    def rule(self, region: str, gpu_class: str) -> QuotaRule | None:
        """The most specific rule for a region and GPU class."""
        matching = [
            q for q in self.quotas if q.region in (ANY, region) and q.gpu_class in (ANY, gpu_class)
        ]
        return max(matching, key=lambda q: q.specificity) if matching else None


@dataclass(frozen=True)
class PreemptionPolicy:
    enabled: bool = True
    reclaim: str = (
        "any"  # evicting borrowers for a tenant back under nominal: any | lower-priority | never
    )
    grace_period_s: float = 60.0  # a victim's executor has this long to checkpoint and stop
    checkpoint_stale_s: float = 300.0  # more unsaved work than this: checkpoint before stopping
    max_victims: int = 16
    searches_per_tick: int = 4  # waiting jobs per region that may look for victims per tick


@dataclass(frozen=True)
class BackfillPolicy:
    enabled: bool = True
    # a tenant's first job its own quota refuses holds that quota against its later jobs
    quota_reservation: bool = True


def _tenants() -> Mapping[str, TenantPolicy]:
    return MappingProxyType({})


def _models() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class TenancyPolicy:
    classes: tuple[PriorityClass, ...] = DEFAULT_CLASSES
    tenants: Mapping[str, TenantPolicy] = field(default_factory=_tenants)
    gpu_classes: Mapping[str, str] = field(default_factory=_models)  # GPU model -> class
    preemption: PreemptionPolicy = field(default_factory=PreemptionPolicy)
    backfill: BackfillPolicy = field(default_factory=BackfillPolicy)
    protection: ProtectionPolicy = field(default_factory=ProtectionPolicy)

    @property
    def quotas_enabled(self) -> bool:
        return bool(self.tenants)

    def tenant(self, name: str) -> TenantPolicy | None:
        return self.tenants.get(name)

    def gpu_class(self, model: str) -> str:
        """A model's quota class; a model in no class is a class of its own."""
        return self.gpu_classes.get(model, model)

    def weight(self, tenant: str) -> float:
        t = self.tenants.get(tenant)
        return t.weight if t is not None else 1.0

    def cohort_members(self, cohort: str) -> tuple[TenantPolicy, ...]:
        return tuple(t for t in self.tenants.values() if t.cohort == cohort)


# ---- parsing ------------------------------------------------------------------------------


def parse_policy(raw: Mapping[str, Any] | None) -> TenancyPolicy:
    """A policy from a plain mapping; PolicyError names the first bad field."""
    if raw is None:
        return TenancyPolicy()
    if not isinstance(raw, Mapping):
        raise PolicyError("policy", "must be a mapping of sections")
    known = {"priority_classes", "gpu_classes", "tenants", "preemption", "backfill", "protection"}
    _no_unknown(raw, known, "policy")
    classes = _classes(raw.get("priority_classes"))
    return TenancyPolicy(
        classes=classes,
        tenants=MappingProxyType(_tenant_map(raw.get("tenants"))),
        gpu_classes=MappingProxyType(_gpu_classes(raw.get("gpu_classes"))),
        preemption=_knobs(PreemptionPolicy, raw.get("preemption"), "preemption"),
        backfill=_knobs(BackfillPolicy, raw.get("backfill"), "backfill"),
        protection=_knobs(ProtectionPolicy, raw.get("protection"), "protection"),
    )


def _no_unknown(raw: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        raise PolicyError(
            f"{where}.{unknown[0]}", f"unknown field (known: {', '.join(sorted(known))})"
        )


def _mapping(raw: Any, where: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise PolicyError(where, f"must be a mapping, got {type(raw).__name__}")
    return raw


def _number(raw: Any, where: str, *, minimum: float = 0.0, integer: bool = False) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise PolicyError(where, f"must be a number, got {raw!r}")
    if integer and not float(raw).is_integer():
        raise PolicyError(where, f"must be a whole number, got {raw!r}")
    if raw < minimum:
        raise PolicyError(where, f"must be >= {minimum:g}, got {raw!r}")
    return float(raw)


def _bool(raw: Any, where: str) -> bool:
    if not isinstance(raw, bool):
        raise PolicyError(where, f"must be true or false, got {raw!r}")
    return raw


def _name(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise PolicyError(where, f"must be a non-empty name, got {raw!r}")
    return raw.strip()


def _classes(raw: Any) -> tuple[PriorityClass, ...]:
    if raw is None:
        return DEFAULT_CLASSES
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise PolicyError("priority_classes", "must be a non-empty list of classes")
    out: list[PriorityClass] = []
    for i, item in enumerate(raw):
        where = f"priority_classes[{i}]"
        item = _mapping(item, where)
        _no_unknown(item, {"name", "value", "preemptible", "description"}, where)
        cls = PriorityClass(
            name=_name(item.get("name"), f"{where}.name"),
            value=int(_number(item.get("value"), f"{where}.value", minimum=-1e9, integer=True)),
            preemptible=_bool(item.get("preemptible", True), f"{where}.preemptible"),
            description=str(item.get("description", "")),
        )
        if any(c.name == cls.name for c in out):
            raise PolicyError(f"{where}.name", f"class {cls.name!r} is listed twice")
        out.append(cls)
    return tuple(out)


def _gpu_classes(raw: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, models in _mapping(raw, "gpu_classes").items():
        where = f"gpu_classes.{name}"
        if not isinstance(models, Sequence) or isinstance(models, str):
            raise PolicyError(where, "must be a list of GPU models")
        for model in models:
            model = _name(model, where)
            if model in out:
                raise PolicyError(where, f"model {model!r} is already in class {out[model]!r}")
            out[model] = str(name)
    return out


def _tenant_map(raw: Any) -> dict[str, TenantPolicy]:
    return {str(name): _tenant(str(name), spec) for name, spec in _mapping(raw, "tenants").items()}


def _tenant(name: str, raw: Any) -> TenantPolicy:
    where = f"tenants.{name}"
    spec = _mapping(raw, where)
    _no_unknown(spec, {"cohort", "weight", "quotas", "non_preemptible_gpus"}, where)
    quotas = spec.get("quotas") or []
    if not isinstance(quotas, Sequence) or isinstance(quotas, str):
        raise PolicyError(f"{where}.quotas", "must be a list of quota rules")
    allowance = spec.get("non_preemptible_gpus")
    weight = _number(spec.get("weight", 1.0), f"{where}.weight")
    if weight <= 0:
        raise PolicyError(f"{where}.weight", f"must be > 0, got {weight:g}")
    return TenantPolicy(
        name=name,
        cohort=None if spec.get("cohort") is None else _name(spec["cohort"], f"{where}.cohort"),
        weight=weight,
        quotas=tuple(_quota(q, f"{where}.quotas[{i}]") for i, q in enumerate(quotas)),
        non_preemptible_gpus=None
        if allowance is None
        else _number(allowance, f"{where}.non_preemptible_gpus"),
    )


def _quota(raw: Any, where: str) -> QuotaRule:
    spec = _mapping(raw, where)
    _no_unknown(spec, {"region", "gpu_class", "nominal", "borrowing_limit"}, where)
    if "nominal" not in spec:
        raise PolicyError(f"{where}.nominal", "is required")
    limit = spec.get("borrowing_limit")
    return QuotaRule(
        region=_name(spec.get("region", ANY), f"{where}.region"),
        gpu_class=_name(spec.get("gpu_class", ANY), f"{where}.gpu_class"),
        nominal=_number(spec["nominal"], f"{where}.nominal"),
        borrowing_limit=None if limit is None else _number(limit, f"{where}.borrowing_limit"),
    )


def _knobs(cls: type[Any], raw: Any, where: str) -> Any:
    """A flat section of scalar knobs, typed by the dataclass's defaults."""
    spec = _mapping(raw, where)
    defaults = cls()
    names = {f.name for f in fields(cls)}
    _no_unknown(spec, names, where)
    values: dict[str, Any] = {}
    for key, value in spec.items():
        default = getattr(defaults, key)
        at = f"{where}.{key}"
        if isinstance(default, bool):
            values[key] = _bool(value, at)
        elif isinstance(default, int):
            values[key] = int(_number(value, at, integer=True))
        elif isinstance(default, float):
            values[key] = _number(value, at)
        else:
            values[key] = str(value)
    if where == "preemption" and values.get("reclaim", "any") not in RECLAIM_MODES:
        raise PolicyError("preemption.reclaim", f"must be one of {', '.join(RECLAIM_MODES)}")
    return cls(**values)
