"""Edge processes: the NVML node agent, its simulated twin, and the simulated fleet publisher.

Public surface (the executor and job generator live in their own modules):

    load_fleet, demo_fleet, generate_nodes, SimulatedFleet, Fault   simulated fleet
    run_fleet, PublishStats                                          fleet -> Kafka
    TierPolicy, TierScheduler                                        telemetry cadence
    NodeAgent, run_agent, GpuReader, NvmlReader, SimulatedReader     the node agent
"""

from __future__ import annotations

from agents.errors import AgentError, FleetSpecError, GpuReadError, NvmlUnavailable, PublishError
from agents.faults import Fault
from agents.fleet import SimulatedFleet
from agents.generate import generate_nodes
from agents.publisher import PublishStats, run_fleet
from agents.spec import FleetSpec, demo_fleet, load_fleet
from agents.tiers import TierPolicy, TierScheduler

__all__ = [
    "AgentError",
    "Fault",
    "FleetSpec",
    "FleetSpecError",
    "GpuReadError",
    "NvmlUnavailable",
    "PublishError",
    "PublishStats",
    "SimulatedFleet",
    "TierPolicy",
    "TierScheduler",
    "demo_fleet",
    "generate_nodes",
    "load_fleet",
    "run_fleet",
]
