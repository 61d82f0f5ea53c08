"""The network model: inter-region links, communication demand, bandwidth sharing, quotas.

    LinkGraph / Link / Path      the backbone and path choice (metric: V / width + RTT)
    comm_demand / CommDemand     per-step traffic of a training job from its parallelism
    waterfill / equal_split      weighted max-min fair rates with minimums (and the baseline)
    BandwidthAllocator / Flow    running jobs' flows shared by policy (elastic or equal)
    QuotaLedger / Hysteresis     low-churn quota decisions that never over-commit a link
    NetworkView / plan_fit       what placement knows: expected bandwidth, efficiency, cost

Pure: numpy and domain types only, like the rest of `scorer`.
"""

from __future__ import annotations

from scorer.network.allocator import (
    MODES,
    PHASES,
    Allocation,
    AllocationPolicy,
    BandwidthAllocator,
    Flow,
)
from scorer.network.demand import CommAssumptions, CommDemand, Layout, StepTime, comm_demand
from scorer.network.errors import NetworkError, UnknownLinkError
from scorer.network.fit import PlanFit, demand_on, job_flows, layout_of, plan_fit, ring_hops
from scorer.network.links import Link, LinkGraph, LinkPolicy, Path, link_id
from scorer.network.placement import region_plans
from scorer.network.quotas import Hysteresis, Issued, QuotaChange, QuotaLedger
from scorer.network.view import NetworkView, Route, Settings
from scorer.network.waterfill import equal_split, link_loads, waterfill

__all__ = [
    "MODES",
    "PHASES",
    "Allocation",
    "AllocationPolicy",
    "BandwidthAllocator",
    "CommAssumptions",
    "CommDemand",
    "Flow",
    "Hysteresis",
    "Issued",
    "Layout",
    "Link",
    "LinkGraph",
    "LinkPolicy",
    "NetworkError",
    "NetworkView",
    "Path",
    "PlanFit",
    "QuotaChange",
    "QuotaLedger",
    "Route",
    "Settings",
    "StepTime",
    "UnknownLinkError",
    "comm_demand",
    "demand_on",
    "equal_split",
    "job_flows",
    "layout_of",
    "link_id",
    "link_loads",
    "plan_fit",
    "region_plans",
    "ring_hops",
    "waterfill",
]
