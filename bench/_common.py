"""Helpers shared by the benchmarks: machine facts, percentiles, CPU and RSS per process,
result files."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
REPO = RESULTS.parents[1]
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _proc_field(path: str, key: str) -> str:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def machine() -> dict[str, Any]:
    """What the figures were measured on: CPU model, cores, memory, Python."""
    mem_kb = _proc_field("/proc/meminfo", "MemTotal").split()
    return {
        "cpus": os.cpu_count(),
        "cpu_model": _proc_field("/proc/cpuinfo", "model name") or platform.machine(),
        "memory_gb": round(int(mem_kb[0]) / 1024**2, 1) if mem_kb else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
    }


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages: other work competing for the same cores."""
    return [round(x, 2) for x in os.getloadavg()]


LOAD_AT_START = load_average()  # when the bench imported this module: before it measured


def commit(root: Path = REPO) -> str:
    """The commit the tree at `root` is on, plus " dirty" when tracked files differ from it."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            # the result files themselves are not the code measured
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{rev} dirty" if changed else rev


def this_command() -> str:
    """The command line that started this process, as typed (`python -m bench.NAME ...`)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    head = ["-m", spec.name] if spec is not None else sys.argv[:1]
    return " ".join([Path(sys.executable).name, *head, *sys.argv[1:]])


def provenance(command: str, load_before: list[float]) -> dict[str, Any]:
    """What every result file names: commit, machine, load before and after, the command."""
    return {
        "commit": commit(),
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "command": command,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def percentiles(values: Sequence[float]) -> dict[str, float]:
    if not len(values):
        return {"p50": float("nan"), "p99": float("nan")}
    arr = np.asarray(values, dtype=float)
    return {"p50": float(np.percentile(arr, 50)), "p99": float(np.percentile(arr, 99))}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, its reaped children excluded."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def rss_mb(pid: int) -> float:
    """Resident set size of a process in MB."""
    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return pages * _PAGE / 1e6


def rss_file_mb(pid: int) -> float:
    """The file-backed part of a process's RSS in MB (mapped code and data files: chDB's
    ~550 MB library is faulted in page by page as new code runs; the kernel can drop them)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) * 1024 / 1e6
    return 0.0


def child_pids(pid: int) -> list[int]:
    """Direct children of a process (the worker's history child, for instance)."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:  # the thread ended after the listing
            continue
    return out


def wait_worker_ready(
    host: str, port: int, worker_pid: int | None, timeout_s: float = 180
) -> float:
    """Seconds until the worker says it is ready (`/health/`) and its history child runs.

    A fixed warm-up is not enough on a loaded machine: the worker first reads the decision
    log and waits for the fleet's inventory.
    """
    import httpx

    started = time.monotonic()
    deadline = started + timeout_s
    while time.monotonic() < deadline:
        try:
            ready = httpx.get(f"http://{host}:{port}/health/", timeout=5).json().get("ready")
        except (httpx.HTTPError, ValueError):
            ready = False
        if ready and (worker_pid is None or child_pids(worker_pid)):
            return round(time.monotonic() - started, 1)
        time.sleep(0.5)
    raise TimeoutError(f"worker not ready within {timeout_s}s")


class ProcessClock:
    """CPU seconds each named process spent since this clock was made (or `reset()`)."""

    def __init__(self, pids: Mapping[str, int | None]) -> None:
        self.pids = {name: pid for name, pid in pids.items() if pid}
        self.reset()

    def reset(self) -> None:
        self._start = {name: self._read(pid) for name, pid in self.pids.items()}

    @staticmethod
    def _read(pid: int) -> float:
        try:
            return cpu_seconds(pid)
        except OSError:  # exited
            return float("nan")

    def cpu_s(self) -> dict[str, float]:
        return {
            name: round(self._read(pid) - self._start[name], 3) for name, pid in self.pids.items()
        }


def write_result(name: str, result: dict[str, Any], out: str | Path | None = None) -> Path:
    """Write `result` (plus command, machine, load and time) to `out` or results/<name>.json.

    `provenance` names the commit, the machine, the load average before and after and the
    command; `python -m bench` replaces its command with the one it ran.
    """
    command = this_command()
    result = {
        **result,
        "command": command,
        "machine": machine(),
        "load_average_at_end": load_average(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "provenance": provenance(command, LOAD_AT_START),
    }
    path = Path(out) if out else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path


def report_result(name: str, result: dict[str, Any], out: str | Path | None = None) -> Path:
    """`write_result`, then print each figure, one per line, and where the file went."""
    path = write_result(name, result, out=out)
    width = max((len(k) for k in result), default=0)
    for key, value in result.items():
        print(f"{key:>{width}}: {value}")
    print(f"wrote {path}")
    return path
