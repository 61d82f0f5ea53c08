"""Errors of the service layer.

GpuflowError
└── ScorerError
    └── InvalidSpecError
        └── ServiceSpecError     a service file's field is missing, mistyped or out of range
"""

from __future__ import annotations

from scorer.errors import InvalidSpecError

__all__ = ["ServiceSpecError"]


class ServiceSpecError(InvalidSpecError):
    """A service spec field is missing, mistyped or out of range (the message names it)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
