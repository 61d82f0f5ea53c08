"""Errors of the tenancy policy (a child of the decision core's error tree).

ScorerError
└── PolicyError          a tenancy policy field is missing, mistyped or inconsistent
"""

from __future__ import annotations

from scorer.errors import ScorerError

__all__ = ["PolicyError"]


class PolicyError(ScorerError, ValueError):
    """A tenancy policy field is wrong; `field` is its dotted path (`tenants.vision.weight`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
