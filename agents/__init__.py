"""Edge processes: the NVML node agent, its simulated twin, and the simulated fleet publisher.

Public surface (the executor and job generator live in their own modules):

    load_fleet, demo_fleet, generate_nodes, SimulatedFleet, Fault   simulated fleet
    run_fleet, PublishStats                                          fleet -> Kafka
    TierPolicy, TierScheduler                                        telemetry cadence
    NodeAgent, run_agent, GpuReader, NvmlReader, SimulatedReader     the node agent
"""

from __future__ import annotations

from agents.errors import AgentError, FleetSpecError, NvmlUnavailable, PublishError
from agents.faults import Fault
from agents.fleet import SimulatedFleet
from agents.generate import generate_nodes
from agents.node import NodeAgent, NodeIdentity, run_agent
from agents.nvml import NvmlReader
from agents.publisher import EventPublisher, PublishStats, run_fleet
from agents.reader import GpuReader, GpuReading, NodeGpus, SimulatedReader
from agents.spec import FleetSpec, demo_fleet, load_fleet
from agents.tiers import TierPolicy, TierScheduler

__all__ = [
    "AgentError",
    "EventPublisher",
    "Fault",
    "FleetSpec",
    "FleetSpecError",
    "GpuReader",
    "GpuReading",
    "NodeAgent",
    "NodeGpus",
    "NodeIdentity",
    "NvmlReader",
    "NvmlUnavailable",
    "PublishError",
    "PublishStats",
    "SimulatedFleet",
    "SimulatedReader",
    "TierPolicy",
    "TierScheduler",
    "demo_fleet",
    "generate_nodes",
    "load_fleet",
    "run_agent",
    "run_fleet",
]
