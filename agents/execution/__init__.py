"""The node executor (issue 31): placed jobs become real processes on the node's GPUs.

Nomad's task-runner model, small: `NodeExecutor` consumes the decisions for its node and owns
one `TaskRunner` per (job, epoch); a runner drives its task through a small state machine with
a `Driver` (the raw-process driver; no container runtime here), ships its output with a
`LogShipper`, and keeps what a restarted executor needs in the on-disk `Journal`. Restart
policy (retries) is the scheduler's, not the runner's.
"""

from __future__ import annotations

from agents.execution.envvars import visible_devices_env
from agents.execution.executor import ExecutorSettings, NodeExecutor

__all__ = ["ExecutorSettings", "NodeExecutor", "visible_devices_env"]
