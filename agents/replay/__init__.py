"""Trace replay, the pure parts: trace format and adapters, the generator, the digital twin.

The engines that drive the worker's scheduling logic live in `gpuflow.replay` (top floor).
"""

from __future__ import annotations

from agents.replay.adapters import load_gavel_trace, load_philly_trace
from agents.replay.errors import TraceError, TwinError
from agents.replay.generate import gavel_cluster, gavel_jobs, write_jobs, write_nodes
from agents.replay.runs import JobRun, Slice, slices_from
from agents.replay.trace import Trace, TraceJob, TraceNode, job_record, node_record
from agents.replay.trace_reader import load_jobs, load_nodes, load_throughputs, load_trace
from agents.replay.twin import Twin, TwinConfig

__all__ = [
    "JobRun",
    "Slice",
    "Trace",
    "TraceError",
    "TraceJob",
    "TraceNode",
    "Twin",
    "TwinConfig",
    "TwinError",
    "gavel_cluster",
    "gavel_jobs",
    "job_record",
    "load_gavel_trace",
    "load_jobs",
    "load_nodes",
    "load_philly_trace",
    "load_throughputs",
    "load_trace",
    "node_record",
    "slices_from",
    "write_jobs",
    "write_nodes",
]
