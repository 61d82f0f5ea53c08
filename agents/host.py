"""Host near-line readings from /proc (Linux), without psutil: disk and network throughput."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HostRates", "HostStats", "host_capacity"]

_SECTOR = 512
# Whole disks only (partitions would double count): sda, vda, xvda, nvme0n1, md0.
_DISK = re.compile(r"^(?:[shv]d[a-z]+|xvd[a-z]+|nvme\d+n\d+|md\d+)$")


@dataclass(frozen=True)
class HostRates:
    disk_read_mbps: float
    disk_write_mbps: float
    net_rx_mbps: float
    net_tx_mbps: float


def _disk_bytes(text: str) -> tuple[int, int]:
    read = write = 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 10 and _DISK.match(parts[2]):
            read += int(parts[5]) * _SECTOR
            write += int(parts[9]) * _SECTOR
    return read, write


def _net_bytes(text: str) -> tuple[int, int]:
    rx = tx = 0
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        fields = rest.split()
        if name.strip() == "lo" or len(fields) < 9:
            continue
        rx += int(fields[0])
        tx += int(fields[8])
    return rx, tx


class HostStats:
    """Throughput since the previous call; `proc` is /proc (a temp dir in tests)."""

    def __init__(self, proc: Path = Path("/proc"), clock: Callable[[], float] = time.monotonic):
        self.proc = proc
        self.clock = clock
        self._prev: tuple[float, int, int, int, int] | None = None

    def _counters(self) -> tuple[int, int, int, int]:
        try:
            dr, dw = _disk_bytes((self.proc / "diskstats").read_text())
        except OSError:
            dr = dw = 0
        try:
            nr, nt = _net_bytes((self.proc / "net" / "dev").read_text())
        except OSError:
            nr = nt = 0
        return dr, dw, nr, nt

    def rates(self) -> HostRates | None:
        """MB/s over the interval since the last call; None on the first call."""
        now = self.clock()
        cur = self._counters()
        prev, self._prev = self._prev, (now, *cur)
        if prev is None or now <= prev[0]:
            return None
        dt = now - prev[0]
        mb = [max(0, c - p) / 1e6 / dt for c, p in zip(cur, prev[1:], strict=True)]
        return HostRates(*(round(x, 2) for x in mb))


def host_capacity(proc: Path = Path("/proc")) -> tuple[int, int]:
    """(allocatable CPU millicores, host memory MiB) of this machine."""
    cpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mem_mib = 0
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_mib = int(line.split()[1]) // 1024
                break
    except OSError:
        pass
    return (cpu or 1) * 1000, mem_mib
