"""The root of every gpuflow error, on the bottom floor: any package may import it, and it
imports nothing of the project (so the decision core, the codec, infra, the agents and the
worker all share one root without depending on each other).

    GpuflowError                 root: every error gpuflow raises on purpose
    ├── ScorerError              scorer.errors: a fault inside the decision core
    ├── CodecError, KeySpecError schemas.errors: bytes or keys that cannot be (de)coded
    ├── InfraError               infra.errors: a fault talking to the outside world
    ├── ForecastError            forecast.errors
    ├── AgentError               agents.errors
    └── TraceError, TwinError    agents.replay.errors

Each package keeps its own `errors.py` with its specific children; this module holds the root
only. A caller that catches "anything gpuflow raised on purpose" catches `GpuflowError`.
"""

from __future__ import annotations

__all__ = ["GpuflowError"]


class GpuflowError(Exception):
    """Root of every error gpuflow raises on purpose."""
