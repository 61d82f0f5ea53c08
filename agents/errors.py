"""Errors of the edge processes (node agents, simulated fleet).

GpuflowError                     root (scorer.errors)
└── AgentError                   a fault in a node agent or the simulated fleet
    ├── NvmlUnavailable          no NVIDIA driver / NVML library on this machine
    ├── FleetSpecError           a fleet YAML is malformed; names the offending field
    └── PublishError             events could not be handed to the broker
"""

from __future__ import annotations

from gpuflow_errors import GpuflowError

__all__ = ["AgentError", "FleetSpecError", "NvmlUnavailable", "PublishError"]


class AgentError(GpuflowError):
    """A fault in a node agent or the simulated fleet."""


class NvmlUnavailable(AgentError):
    """NVML cannot be initialised: no NVIDIA driver or GPU on this machine."""


class FleetSpecError(AgentError):
    """A fleet description is malformed; `field` is the dotted YAML path at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class PublishError(AgentError):
    """Events could not be handed to the Kafka producer."""
