"""Priority classes: what a job's priority means, and whether it may be preempted by default.

A job names a class (`priority_class`); without one, its `priority` integer places it in the
highest class whose value it reaches. The effective priority is the class value when a class is
named, else the job's own integer. A job may ask for protection (`preemptible: false`) that its
class does not give by default: whether it gets it is the tenant's allowance (see `quota`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scorer.types import JobSpec

__all__ = ["DEFAULT_CLASSES", "JobPriority", "PriorityClass", "class_for", "resolve_priority"]


@dataclass(frozen=True)
class PriorityClass:
    """A named priority with a default preemptibility (like a Kubernetes PriorityClass)."""

    name: str
    value: int
    preemptible: bool = True
    description: str = ""


DEFAULT_CLASSES: tuple[PriorityClass, ...] = (
    PriorityClass("online-inference", 1000, False, "serving traffic: never preempted"),
    PriorityClass("urgent-training", 100, True, "deadline training: preempts batch"),
    PriorityClass("batch", 0, True, "the default: training and batch work"),
    PriorityClass("best-effort", -100, True, "runs on idle capacity, preempted first"),
)


@dataclass(frozen=True)
class JobPriority:
    """A job's resolved priority: class, value, and whether it may be preempted."""

    class_name: str
    value: int
    preemptible: bool
    protection_requested: bool = False  # asked for non-preemptible beyond its class default


def class_for(value: int, classes: Sequence[PriorityClass]) -> PriorityClass:
    """The highest class whose value `value` reaches (the lowest class below all of them)."""
    ordered = sorted(classes, key=lambda c: c.value)
    reached = [c for c in ordered if c.value <= value]
    return reached[-1] if reached else ordered[0]


def resolve_priority(job: JobSpec, classes: Sequence[PriorityClass]) -> JobPriority | str:
    """The job's priority, or a one-line problem when it names an unknown class."""
    by_name = {c.name: c for c in classes}
    if job.priority_class:
        cls = by_name.get(job.priority_class)
        if cls is None:
            known = ", ".join(sorted(by_name))
            return f"priority_class: unknown class {job.priority_class!r} (known: {known})"
        value = cls.value
    else:
        cls = class_for(job.priority, classes)
        value = job.priority
    return JobPriority(
        class_name=cls.name,
        value=value,
        preemptible=cls.preemptible and job.preemptible,
        protection_requested=cls.preemptible and not job.preemptible,
    )
