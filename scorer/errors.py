"""Errors of the decision core, under the root of every gpuflow error (`gpuflow_errors`).

    GpuflowError                 root (gpuflow_errors): every error gpuflow raises on purpose
    └── ScorerError              a fault inside the decision core
        ├── UnknownPluginError   a registry has no plugin of that name
        ├── CatalogError         a GPU catalogue or throughput table cannot be used
        ├── ReservationError     a reservation would over-allocate a GPU or milli-share
        ├── UnknownNodeError     an update names a node the state does not hold (also KeyError)
        └── InvalidSpecError     a job or node spec is inconsistent (also ValueError)

"Does not fit" is never an error: filters return a Status with every reason.
"""

from __future__ import annotations

from gpuflow_errors import GpuflowError

__all__ = [
    "CatalogError",
    "InvalidSpecError",
    "ReservationError",
    "ScorerError",
    "UnknownNodeError",
    "UnknownPluginError",
]


class ScorerError(GpuflowError):
    """A fault inside the decision core."""


class UnknownPluginError(ScorerError):
    """A registry was asked for a plugin name it does not hold."""


class CatalogError(ScorerError):
    """A GPU catalogue or throughput table is malformed."""


class ReservationError(ScorerError):
    """A reservation would over-allocate a GPU or release one twice."""


class UnknownNodeError(ScorerError, KeyError):
    """A health, speed or lookup call names a node the cluster state does not hold."""


class InvalidSpecError(ScorerError, ValueError):
    """A job or node spec contradicts itself (e.g. a GPU share with gpu_count > 1)."""
