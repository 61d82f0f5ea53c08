"""Errors of the forecasters.

GpuflowError                    root (scorer.errors)
└── ForecastError               a forecasting fault
    ├── SeriesError             a series cannot be used (bad CSV, no regular interval...)
    ├── SeriesTooShortError     a model needs more history than the series has
    └── ModelUnavailableError   a model's library is not installed
"""

from __future__ import annotations

from gpuflow_errors import GpuflowError

__all__ = [
    "ForecastError",
    "GpuflowError",
    "ModelUnavailableError",
    "SeriesError",
    "SeriesTooShortError",
]


class ForecastError(GpuflowError):
    """A forecasting fault."""


class SeriesError(ForecastError):
    """A series cannot be used: `where: why`."""


class SeriesTooShortError(ForecastError):
    """A model needs `need` points and the series has `got`."""

    def __init__(self, model: str, need: int, got: int, why: str = "") -> None:
        detail = f" ({why})" if why else ""
        super().__init__(f"{model}: series too short: needs >= {need} points{detail}, got {got}")
        self.model, self.need, self.got, self.why = model, need, got, why

    def __reduce__(self) -> tuple[type, tuple[str, int, int, str]]:
        # rebuilt from its fields when it crosses from the forecast pool to the processor
        return (type(self), (self.model, self.need, self.got, self.why))


class ModelUnavailableError(ForecastError):
    """A model's library is missing: `pip install 'gpuflow[extra]'`."""
