"""A gpuflow placement as an `sbatch` request: options, batch script, output files.

The job runs on exactly the placed nodes (`--nodelist`, `--nodes`), one task per node, with
its GPUs per node as GRES of the node's type (`--gres=gpu:TYPE:N`; `--gpus=TYPE:TOTAL` when
the nodes get different counts), `--time` from `time_limit_s`, `--signal=B:SIG@GRACE` (the
checkpoint signal to the batch shell that long before the limit), `--no-requeue` (gpuflow
places a job again, Slurm must not), tagged `gpuflow:JOB:EPOCH` (name) and
`gpuflow:REGION` (comment). The script exports the job's environment and runs its command
(`exec`; on several nodes `exec srun` runs it once per node and passes signals on); a job
without a command sleeps its expected duration (`slurm.placeholder_s` when unknown) and ends
at once on its checkpoint signal.

The checkpoint contract is the node executor's (docs/jobs.md): GPUFLOW_JOB_ID, GPUFLOW_EPOCH,
GPUFLOW_CHECKPOINT_DIR (`slurm.checkpoint_dir`/JOB, made by the script, kept across epochs),
GPUFLOW_RESUME=1 when that directory holds anything when the job starts, and (set by the
bridge) GPUFLOW_PROGRESS_FILE. The job's own `env` cannot override them.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from infra.config_sections import SlurmConfig

__all__ = ["TAG", "SbatchRequest", "build_request", "parse_tag", "signal_name", "tag"]

TAG = "gpuflow:"


def tag(job_id: str, epoch: int) -> str:
    return f"{TAG}{job_id}:{epoch}"


def parse_tag(name: str) -> tuple[str, int] | None:
    """'gpuflow:JOB:EPOCH' -> (JOB, EPOCH); anything else -> None."""
    if not name.startswith(TAG):
        return None
    job_id, _, epoch = name[len(TAG) :].rpartition(":")
    return (job_id, int(epoch)) if job_id and epoch.isdigit() else None


def signal_name(sig: str) -> str:
    """'SIGUSR1' / 'USR1' / '' -> 'USR1' (Slurm's spelling; '' is the default SIGUSR1)."""
    return (sig or "SIGUSR1").upper().removeprefix("SIG")


@dataclass(frozen=True)
class SbatchRequest:
    options: tuple[str, ...]
    script: str
    stdout: Path
    stderr: Path


def _gpus_option(counts: Sequence[int], gres_type: str) -> str:
    typed = f"{gres_type}:" if gres_type else ""
    if len(set(counts)) == 1:
        return f"--gres=gpu:{typed}{counts[0]}" if counts[0] else ""
    return f"--gpus={typed}{sum(counts)}"


def _time(seconds: int) -> str:
    return f"{seconds // 60}:{seconds % 60:02d}"  # minutes:seconds


def build_request(
    decision: Mapping[str, Any],
    spec: Mapping[str, Any] | None,
    nodes: Sequence[str],
    counts: Sequence[int],
    gres_type: str,
    settings: SlurmConfig,
    out_dir: Path,
    region: str,
) -> SbatchRequest:
    """The sbatch request for a PLACED decision on Slurm `nodes` with `counts` GPUs each."""
    spec = spec or {}
    job_id, epoch = str(decision["job_id"]), int(decision.get("epoch") or 0)
    base = out_dir / f"{job_id}.{epoch}"
    stdout, stderr = base.with_name(base.name + ".out"), base.with_name(base.name + ".err")
    name = tag(job_id, epoch)
    opts = [
        f"--job-name={name}",
        f"--comment={TAG}{region}",
        f"--nodes={len(nodes)}",
        f"--nodelist={','.join(nodes)}",
        "--ntasks-per-node=1",
        "--no-requeue",
        "--export=ALL",
        f"--output={stdout}",
        f"--error={stderr}",
    ]
    gpus = _gpus_option(counts, gres_type)
    if gpus:
        opts.append(gpus)
    partitions = settings.names("partitions")
    if partitions:
        opts.append(f"--partition={partitions[0]}")
    cpu_milli, mem = int(spec.get("cpu_milli") or 0), int(spec.get("memory_mib") or 0)
    if cpu_milli:
        opts.append(f"--cpus-per-task={max(1, math.ceil(cpu_milli / 1000 / len(nodes)))}")
    if mem:
        opts.append(f"--mem={max(1, math.ceil(mem / len(nodes)))}")
    sig = signal_name(str(spec.get("checkpoint_signal") or ""))
    limit = int(spec.get("time_limit_s") or 0)
    if limit:
        grace = float(spec.get("checkpoint_grace_s") or 0.0) or settings.grace_s
        opts += [f"--time={_time(limit)}", f"--signal=B:{sig}@{max(1, min(int(grace), 65535))}"]
    for flag, value in (
        ("--uid", settings.uid),
        ("--account", settings.account),
        ("--qos", settings.qos),
    ):
        if value:
            opts.append(f"{flag}={value}")
    ckpt = checkpoint_root(settings, out_dir) / quote(job_id, safe="")
    script = _script(decision, spec, len(nodes), sig, settings, ckpt)
    return SbatchRequest(tuple(opts), script, stdout, stderr)


def checkpoint_root(settings: SlurmConfig, out_dir: Path) -> Path:
    """Where the jobs' checkpoint directories are: `slurm.checkpoint_dir`, else beside the
    output directory (both must be on a filesystem every node of the cluster mounts)."""
    return (
        Path(settings.checkpoint_dir) if settings.checkpoint_dir else out_dir.parent / "checkpoints"
    )


def _script(
    decision: Mapping[str, Any],
    spec: Mapping[str, Any],
    n_nodes: int,
    sig: str,
    settings: SlurmConfig,
    checkpoint_dir: Path,
) -> str:
    job_id, epoch = str(decision["job_id"]), int(decision.get("epoch") or 0)
    env = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
    env |= {  # last: a job's env cannot move its checkpoints or say it is another epoch
        "GPUFLOW_JOB_ID": job_id,
        "GPUFLOW_EPOCH": str(epoch),
        "GPUFLOW_SLURM": "1",
        "GPUFLOW_CHECKPOINT_DIR": str(checkpoint_dir),
    }
    env.pop("GPUFLOW_RESUME", None)
    lines = [
        "#!/bin/bash",
        'export PATH="${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}"',
    ]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items()) if k.isidentifier()]
    lines += [
        "unset GPUFLOW_RESUME",
        'mkdir -p -- "$GPUFLOW_CHECKPOINT_DIR" || exit 126',
        'if [ -n "$(ls -A -- "$GPUFLOW_CHECKPOINT_DIR")" ]; then export GPUFLOW_RESUME=1; fi',
    ]
    workdir = str(spec.get("workdir") or "")
    if workdir:
        lines.append(f"cd -- {shlex.quote(workdir)} || exit 126")
    command = [str(x) for x in spec.get("command") or ()]
    if not command:
        seconds = float(decision.get("expected_duration_s") or 0.0) or settings.placeholder_s
        lines += [f"trap 'kill $! 2>/dev/null; exit 0' {sig}", f"sleep {seconds:.3f} &", "wait $!"]
    elif n_nodes > 1:
        lines.append(
            "exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 --export=ALL -- "
            + shlex.join(command)
        )
    else:
        lines.append("exec " + shlex.join(command))
    return "\n".join(lines) + "\n"
