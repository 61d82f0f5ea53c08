"""Errors of the infrastructure layer.

GpuflowError
└── InfraError                 a fault talking to the outside world
    ├── ConfigError            a setting is missing, mistyped or out of range
    ├── BrokerError            the embedded broker would not start or answer
    └── StoreError             ClickHouse refused or failed
"""

from __future__ import annotations

from gpuflow_errors import GpuflowError

__all__ = ["BrokerError", "ConfigError", "GpuflowError", "InfraError", "StoreError"]


class InfraError(GpuflowError):
    """A fault talking to the outside world."""


class ConfigError(InfraError):
    """A setting is missing, mistyped or out of range."""


class BrokerError(InfraError):
    """The embedded broker would not start or answer."""


class StoreError(InfraError):
    """ClickHouse refused or failed."""
