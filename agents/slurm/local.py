"""A real Slurm cluster on this host, for tests and benchmarks: one munged, one slurmctld and
one `slurmd -N NAME` per node, on free loopback ports, in a directory of its own.

Debian's Slurm 22.05 runs so as root without systemd: the daemons change directory (absolute
`slurm.conf`), GRES GPUs are character devices (`mknod ... c 1 3`, the same as /dev/null),
`SlurmdParameters=config_overrides` lets a node claim more CPUs than the host has, and
`MpiDefault=none`. Several clusters run side by side with their own names, ports, state and
spool directories. Every daemon is stopped by its pid.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agents.slurm.errors import SlurmError
from infra.broker import free_port

__all__ = ["LocalSlurm", "kill_step", "local_slurm", "slurm_installed", "steps_under"]

log = logging.getLogger(__name__)

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "scancel", "sinfo")


def slurm_installed() -> str:
    """'' when every Slurm program is on PATH (or in /usr/sbin), else what is missing."""
    missing = [d for d in DAEMONS if _which(d) is None]
    return ", ".join(missing)


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")


@dataclass
class LocalSlurm:
    """One cluster: `nodes` nodes named `{prefix}{i}` with `gpus` GRES GPUs of `gres_type`."""

    root: Path
    name: str = "gfa"
    prefix: str = "n"
    nodes: int = 4
    gpus: int = 8
    gres_type: str = "h100"
    cpus: int = 16
    memory_mib: int = 64000
    min_job_age_s: int = 300
    pids: dict[str, int] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def node_names(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(1, self.nodes + 1)]

    @property
    def env(self) -> dict[str, str]:
        """Environment for the Slurm commands to reach this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self, timeout_s: float = 60.0) -> LocalSlurm:
        self.root = self.root.resolve()
        for sub in ("state", "spool", "dev", "log", "out"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        try:
            self._write_files()
            self._start_munge()
            self._spawn("slurmctld", [_req("slurmctld"), "-D", "-f", str(self.conf)])
            for node in self.node_names:
                self._spawn(
                    f"slurmd-{node}", [_req("slurmd"), "-D", "-f", str(self.conf), "-N", node]
                )
            self._wait_idle(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _write_files(self) -> None:
        for i in range(self.gpus):
            dev = self.root / "dev" / f"gpu{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))
        key = self.root / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            key.chmod(0o400)
        host = socket.gethostname()
        r = self.root
        lines = [
            f"ClusterName={self.name}",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "AuthType=auth/munge",
            f"AuthInfo=socket={r / 'munge.sock'}",
            "CredType=cred/munge",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}/%n",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'log'}/slurmd-%n.pid",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log'}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "GresTypes=gpu",
            "SchedulerType=sched/backfill",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            f"MinJobAge={self.min_job_age_s}",
            "KillWait=5",
            "InactiveLimit=0",
            "SlurmdTimeout=30",
            "MessageTimeout=10",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
        ]
        for node in self.node_names:
            lines.append(
                f"NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 Port={free_port()} "
                f"CPUs={self.cpus} RealMemory={self.memory_mib} "
                f"Gres=gpu:{self.gres_type}:{self.gpus} State=UNKNOWN"
            )
        lines.append("PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        last = self.gpus - 1
        gres = f"Name=gpu Type={self.gres_type} File={r / 'dev'}/gpu[0-{last}]\n"
        if self.gpus == 1:
            gres = f"Name=gpu Type={self.gres_type} File={r / 'dev'}/gpu0\n"
        (r / "gres.conf").write_text(gres)

    def _start_munge(self) -> None:
        r = self.root
        args = [
            _req("munged"),
            "--foreground",
            "--force",
            f"--socket={r / 'munge.sock'}",
            f"--key-file={r / 'munge.key'}",
            f"--pid-file={r / 'munged.pid'}",
            f"--log-file={r / 'log' / 'munged.log'}",
            f"--seed-file={r / 'munge.seed'}",
        ]
        self._spawn("munged", args)
        deadline = time.monotonic() + 10
        while not (r / "munge.sock").exists():
            if time.monotonic() > deadline:
                raise SlurmError(f"munged did not start: {self.log_tail('munged.log')}")
            time.sleep(0.05)

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        out = open(self.root / "log" / f"{name}.stdout", "ab")  # noqa: SIM115 - the child keeps it
        with out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.root,
                start_new_session=True,
            )
        self.pids[name] = proc.pid
        self._procs = {**getattr(self, "_procs", {}), name: proc}

    def scontrol(self, *args: str) -> str:
        run = subprocess.run(
            [_req("scontrol"), *args], env=self.env, capture_output=True, text=True, timeout=30
        )
        if run.returncode != 0:
            raise SlurmError(f"scontrol {' '.join(args)}: {run.stderr.strip()}")
        return run.stdout

    def _wait_idle(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            with contextlib.suppress(SlurmError, subprocess.TimeoutExpired):
                last = self.scontrol("show", "node", "-o")
                states = [
                    ln.split("State=", 1)[1].split()[0]
                    for ln in last.splitlines()
                    if "State=" in ln
                ]
                if len(states) == self.nodes and all(s.startswith("IDLE") for s in states):
                    return
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise SlurmError(f"{name} exited {proc.returncode}: {self.logs()}")
            time.sleep(0.2)
        raise SlurmError(f"cluster {self.name} not idle in {timeout_s}s: {last!r} {self.logs()}")

    def log_tail(self, name: str, chars: int = 1500) -> str:
        path = self.root / "log" / name
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def logs(self) -> str:
        return " | ".join(
            f"{p.name}: {self.log_tail(p.name, 600)}"
            for p in sorted((self.root / "log").glob("*.log"))
        )

    def stop(self) -> None:
        """Cancel every job, stop every daemon by pid (slurmds and slurmctld first, TERM then
        KILL, munged last), then any job step left behind (a slurmstepd whose directory is
        this cluster's, with its job's process group)."""
        self._cancel_all()
        self._stop_daemons()
        for pid in steps_under(self.root):
            kill_step(pid)

    def _cancel_all(self, timeout_s: float = 15.0) -> None:
        if "slurmctld" not in self.pids:
            return
        env = self.env
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                [_req("scancel"), "--user=root"], env=env, capture_output=True, timeout=20
            )
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                left = subprocess.run(
                    [_req("squeue"), "-h", "-o", "%i"],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=20,
                ).stdout
                if not left.strip():
                    return
                time.sleep(0.3)

    def _stop_daemons(self) -> None:
        order = sorted(self.pids, key=lambda n: (n == "munged", n))
        procs = getattr(self, "_procs", {})
        for name in order:
            proc = procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(5)
        self.pids.clear()


def steps_under(root: Path) -> list[int]:
    """Pids of slurmstepd processes working in `root` (a cluster's directory)."""
    out = []
    prefix = str(Path(root).resolve())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if not (proc / "cmdline").read_bytes().startswith(b"slurmstepd"):
                continue
            cwd = os.readlink(proc / "cwd").removesuffix(" (deleted)")
        except OSError:
            continue
        if cwd == prefix or cwd.startswith(prefix + "/"):
            out.append(int(proc.name))
    return out


def kill_step(pid: int) -> None:
    """SIGKILL a left-behind slurmstepd's children's process groups, then the slurmstepd."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            with contextlib.suppress(OSError):
                os.killpg(int(fields[2]), signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _req(name: str) -> str:
    path = _which(name)
    if path is None:
        raise SlurmError(f"{name} not found: install slurmctld slurmd slurm-client munge")
    return path


@contextlib.contextmanager
def local_slurm(root: Path, **kwargs: object) -> Iterator[LocalSlurm]:
    cluster = LocalSlurm(root, **kwargs)  # type: ignore[arg-type]
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
