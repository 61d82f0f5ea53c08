"""Filter plugins: hard constraints, one per file, each able to list every reason it refuses."""

from __future__ import annotations

from scorer.filters.capacity import CapacityFilter
from scorer.filters.communication import CommunicationFilter
from scorer.filters.gpu_model import GpuModelFilter
from scorer.filters.health import HealthFilter
from scorer.filters.host_resources import HostResourcesFilter
from scorer.filters.memory import MemoryFilter
from scorer.filters.precision import PrecisionFilter
from scorer.filters.region import RegionFilter
from scorer.filters.runnable import RunnableFilter
from scorer.filters.software_stack import SoftwareStackFilter
from scorer.filters.zone import ZoneFilter

__all__ = [
    "CapacityFilter",
    "CommunicationFilter",
    "GpuModelFilter",
    "HealthFilter",
    "HostResourcesFilter",
    "MemoryFilter",
    "PrecisionFilter",
    "RegionFilter",
    "RunnableFilter",
    "SoftwareStackFilter",
    "ZoneFilter",
]
