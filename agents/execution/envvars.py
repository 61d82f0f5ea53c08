"""The environment a job runs with: its placed GPUs made visible the way its vendor reads it,
and the checkpoint contract's variables."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

__all__ = ["VISIBILITY", "job_env", "visible_devices_env"]

# vendor -> the variables that list the devices a process may see
VISIBILITY: dict[str, tuple[str, ...]] = {
    "nvidia": ("CUDA_VISIBLE_DEVICES",),
    "amd": ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"),
    "huawei": ("ASCEND_RT_VISIBLE_DEVICES",),
}


def visible_devices_env(
    vendor: str, indices: Sequence[int], gpu_milli: int = 1000
) -> dict[str, str]:
    """Exactly `indices` visible; a share of one GPU (`gpu_milli` < 1000) as that GPU plus the
    limit the vendor offers: NVIDIA MPS's active-thread percentage (enforced only where an MPS
    control daemon runs); AMD and Ascend offer none a process can be given, so nothing enforces
    the share there beyond the scheduler's accounting (docs/agents.md)."""
    names = VISIBILITY.get(vendor.lower(), VISIBILITY["nvidia"])
    listed = ",".join(str(int(i)) for i in indices)
    env = {name: listed for name in names}
    if 0 < gpu_milli < 1000 and vendor.lower() == "nvidia":
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(max(1, math.ceil(gpu_milli / 10)))
    return env


def job_env(
    base: Mapping[str, str],
    job: Mapping[str, str],
    *,
    devices: Mapping[str, str],
    job_id: str,
    epoch: int,
    checkpoint_dir: str,
    progress_file: str,
    resume: bool,
) -> dict[str, str]:
    """The executor's environment, then the job's own `env`, then what gpuflow sets (last, so a
    job cannot make more GPUs visible than it was placed on)."""
    env = {**base, **job, **devices}
    env.update(
        GPUFLOW_JOB_ID=job_id,
        GPUFLOW_EPOCH=str(epoch),
        GPUFLOW_CHECKPOINT_DIR=checkpoint_dir,
        GPUFLOW_PROGRESS_FILE=progress_file,
    )
    if resume:
        env["GPUFLOW_RESUME"] = "1"
    else:
        env.pop("GPUFLOW_RESUME", None)
    return env
