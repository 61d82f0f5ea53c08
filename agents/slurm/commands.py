"""The Slurm commands the bridge runs, and parsers for their one-line-per-record output.

Slurm 22.05 has no `squeue --json` everywhere, so the bridge reads `scontrol -d show node -o`
and `scontrol -d show job -o` (one record per line, `Key=Value` pairs; `-d` adds each job's
GRES indices per node, `IDX:0-3`) and submits with `sbatch --parsable` (the script on stdin).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from agents.slurm.errors import SlurmCommandError, SlurmError
from infra.config_sections import SlurmConfig

__all__ = [
    "SlurmCli",
    "SlurmJob",
    "SlurmNode",
    "expand_hostlist",
    "parse_gres",
    "parse_idx",
    "parse_records",
]

log = logging.getLogger(__name__)

_SAFE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "SHELL")
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def parse_records(text: str) -> list[dict[str, str]]:
    """`scontrol ... -o` output: one dict per line. Values may hold spaces (OS=Linux 6.1 ...):
    a value runs to the next ` Key=`."""
    out = []
    for line in text.splitlines():
        if "=" not in line:
            continue
        keys = list(_KEY.finditer(line))
        rec: dict[str, str] = {}
        for i, m in enumerate(keys):
            end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
            rec.setdefault(m.group(1), line[m.end() : end].strip())
        out.append(rec)
    return out


def expand_hostlist(text: str) -> list[str]:
    """'n[1-3,5],gpu7' -> ['n1', 'n2', 'n3', 'n5', 'gpu7'] (zero padding kept)."""
    if not text or text in ("(null)", "None"):
        return []
    out: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text):
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if not m:
            out.append(part)
            continue
        head, ranges, tail = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            width = len(lo)
            for i in range(int(lo), int(hi or lo) + 1):
                out.append(f"{head}{i:0{width}d}{tail}")
    return out


def parse_idx(text: str) -> list[int]:
    """'0-2,5' -> [0, 1, 2, 5]; 'N/A' -> []."""
    out: list[int] = []
    for r in text.split(","):
        lo, _, hi = r.strip().partition("-")
        if lo.isdigit():
            out.extend(range(int(lo), int(hi if hi.isdigit() else lo) + 1))
    return out


@dataclass(frozen=True)
class Gres:
    kind: str  # "gpu"
    type: str  # "h100", "" when untyped
    count: int
    idx: tuple[int, ...] = ()


def parse_gres(text: str) -> list[Gres]:
    """'gpu:h100:8(S:0-1),gpu:a100:2(IDX:0-1)' -> Gres records (only counted items)."""
    out = []
    for item in re.split(r",(?![^(]*\))", text or ""):
        item = item.strip()
        if not item or item in ("(null)", "N/A"):
            continue
        body, _, extra = item.partition("(")
        parts = body.split(":")
        if len(parts) < 2 or not parts[-1].isdigit():
            continue
        idx = parse_idx(extra.split("IDX:", 1)[1].rstrip(")")) if "IDX:" in extra else []
        gtype = parts[1] if len(parts) == 3 else ""
        out.append(Gres(parts[0], gtype, int(parts[-1]), tuple(idx)))
    return out


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str  # "IDLE", "MIXED+DRAIN", ...
    cpus: int
    memory_mib: int
    gpu_type: str
    gpus: int
    gpus_used: int
    partitions: tuple[str, ...]
    features: tuple[str, ...]
    reason: str = ""

    @property
    def healthy(self) -> bool:
        """DRAIN (and DRAINING), DOWN, FAIL, NOT_RESPONDING ('*') and friends: unhealthy."""
        bad = (
            "DRAIN",
            "DOWN",
            "FAIL",
            "NO_RESPOND",
            "NOT_RESPONDING",
            "POWER",
            "INVAL",
            "MAINT",
            "REBOOT",
            "UNKNOWN",
            "FUTURE",
        )
        return not any(b in self.state.upper() for b in bad) and not self.state.endswith("*")


@dataclass(frozen=True)
class SlurmJob:
    job_id: int
    name: str
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, NODE_FAIL, ...
    reason: str
    exit_code: int
    exit_signal: int
    nodes: tuple[str, ...]
    comment: str
    stdout: str
    stderr: str
    gpu_idx: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # node -> indices
    gpus_per_node: int = 0


def _job(rec: Mapping[str, str]) -> SlurmJob:
    code, _, sig = rec.get("ExitCode", "0:0").partition(":")
    idx: dict[str, tuple[int, ...]] = {}
    gpus = 0
    for g in parse_gres(rec.get("TresPerNode", "").replace("gres:", "")):
        gpus += g.count if g.kind == "gpu" else 0
    for nodes, gres in re.findall(
        r"Nodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=(\S*)", rec.get("_line", "")
    ):
        held = [i for g in parse_gres(gres) if g.kind == "gpu" for i in g.idx]
        for node in expand_hostlist(nodes):
            idx[node] = tuple(held)
    return SlurmJob(
        job_id=int(rec["JobId"]),
        name=rec.get("JobName", ""),
        state=rec.get("JobState", "").split()[0],
        reason=rec.get("Reason", ""),
        exit_code=int(code or 0),
        exit_signal=int(sig or 0),
        nodes=tuple(expand_hostlist(rec.get("NodeList", ""))),
        comment=rec.get("Comment", ""),
        stdout=rec.get("StdOut", ""),
        stderr=rec.get("StdErr", ""),
        gpu_idx=idx,
        gpus_per_node=gpus,
    )


def _node(rec: Mapping[str, str]) -> SlurmNode:
    gpus = [g for g in parse_gres(rec.get("Gres", "")) if g.kind == "gpu"]
    used = [g for g in parse_gres(rec.get("GresUsed", "")) if g.kind == "gpu"]
    features = rec.get("AvailableFeatures", "")
    return SlurmNode(
        name=rec["NodeName"],
        state=rec.get("State", "UNKNOWN"),
        cpus=int(rec.get("CPUTot", "0") or 0),
        memory_mib=int(rec.get("RealMemory", "0") or 0),
        gpu_type=gpus[0].type if gpus else "",
        gpus=sum(g.count for g in gpus),
        gpus_used=sum(g.count for g in used),
        partitions=tuple(p for p in rec.get("Partitions", "").split(",") if p),
        features=tuple(f for f in features.split(",") if f and f != "(null)"),
        reason=rec.get("Reason", ""),
    )


class SlurmCli:
    """Runs the Slurm commands as the config says (bin_dir, command_prefix, SLURM_CONF)."""

    def __init__(self, settings: SlurmConfig, *, timeout_s: float = 30.0) -> None:
        if settings.rest_url:
            raise SlurmError(
                "slurm.rest_url: slurmrestd is not supported yet; unset it and "
                "give the commands (slurm.bin_dir / slurm.command_prefix)"
            )
        self.settings = settings
        self.timeout_s = timeout_s
        self.prefix = shlex.split(settings.command_prefix)
        self.env = {**os.environ}
        if settings.slurm_conf:
            self.env["SLURM_CONF"] = settings.slurm_conf

    def argv(self, program: str, args: Sequence[str]) -> list[str]:
        path = os.path.join(self.settings.bin_dir, program) if self.settings.bin_dir else program
        return [*self.prefix, path, *args]

    def run(
        self, program: str, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> str:
        argv = self.argv(program, args)
        try:
            done = subprocess.run(
                argv,
                input=stdin,
                capture_output=True,
                text=True,
                env=self.env if env is None else env,
                timeout=self.timeout_s,
            )
        except FileNotFoundError:
            raise SlurmError(f"{argv[0]} not found (slurm.bin_dir / PATH)") from None
        except subprocess.TimeoutExpired:
            raise SlurmCommandError(f"{program}: no answer in {self.timeout_s}s") from None
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()
            raise SlurmCommandError(f"{program}: {why[-1] if why else done.returncode}")
        return done.stdout

    def nodes(self) -> list[SlurmNode]:
        wanted = set(self.settings.names("partitions"))
        out = [_node(r) for r in parse_records(self.run("scontrol", "-d", "show", "node", "-o"))]
        return [n for n in out if not wanted or wanted & set(n.partitions)]

    def jobs(self) -> list[SlurmJob]:
        """Every job the controller still knows (finished ones while MinJobAge keeps them)."""
        text = self.run("scontrol", "-d", "show", "job", "-o")
        if "No jobs in the system" in text:
            return []
        return list(self._jobs(text))

    @staticmethod
    def _jobs(text: str) -> Iterator[SlurmJob]:
        for line in text.splitlines():
            recs = parse_records(line)
            if recs and "JobId" in recs[0]:
                yield _job({**recs[0], "_line": line})

    def submit(self, options: Sequence[str], script: str) -> int:
        """sbatch with a clean environment (Slurm exports sbatch's own to the job: the
        bridge's settings and credentials must not reach it; `--export=NONE` would make
        slurmd load a login environment, seconds per job)."""
        env = {k: v for k, v in self.env.items() if k in _SAFE_ENV or k.startswith("SLURM_")}
        out = self.run("sbatch", "--parsable", *options, stdin=script, env=env).strip()
        try:
            return int(out.split(";")[0].splitlines()[-1])
        except (ValueError, IndexError):
            raise SlurmCommandError(f"sbatch: unexpected answer {out!r}") from None

    def signal(self, job_id: int, sig: str, *, batch: bool = True) -> None:
        """`scancel --signal=SIG --batch` (the batch shell) or `--full` (shell and steps)."""
        self.run(
            "scancel",
            f"--signal={sig.removeprefix('SIG')}",
            "--batch" if batch else "--full",
            str(job_id),
        )

    def cancel(self, job_id: int) -> None:
        self.run("scancel", str(job_id))
