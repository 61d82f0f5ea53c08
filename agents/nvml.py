"""NvmlReader: real NVIDIA GPUs through NVML (`nvidia-ml-py`, imported as `pynvml`).

Per GPU it reads utilisation, memory, memory-bandwidth utilisation, NVLink data counters,
temperature, power, SM clock and clocks-event (throttle) reasons, volatile uncorrected ECC
errors and the cumulative energy counter; XID events arrive through an NVML event set where the
driver supports one. A GPU that raises NVMLError_GpuIsLost is reported unhealthy with XID 79
from then on; any other NVML error on a mandatory reading marks it unhealthy for that read.
Optional readings (ECC, NVLink, energy) that the GPU does not support stay at their defaults.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from agents.errors import NvmlUnavailable
from agents.models import catalogue_name
from agents.nvml_topology import nvlink_islands, pcie_topology_label
from agents.reader import GpuInfo, GpuReading, NodeGpus

__all__ = ["CRITICAL_XIDS", "NvmlReader"]

log = logging.getLogger(__name__)

# XIDs after which a GPU should take no new work until reset (NVIDIA XID catalogue).
CRITICAL_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95})
_THROTTLED = 0x4 | 0x8 | 0x20 | 0x40 | 0x80  # power cap, hw/thermal slowdowns, power brake


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NvmlReader:
    """GpuReader over NVML. `nvml` is the pynvml module (a fake in unit tests)."""

    def __init__(
        self, nvml: ModuleType | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if nvml is None:
            import pynvml

            nvml = pynvml
        self.nv: Any = nvml
        self.clock = clock
        try:
            self.nv.nvmlInit()
            count = self.nv.nvmlDeviceGetCount()
            self.handles = [self.nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except self.nv.NVMLError as exc:
            raise NvmlUnavailable(f"NVML is not available on this machine ({exc})") from exc
        if not self.handles:
            raise NvmlUnavailable("NVML found no GPUs on this machine")
        self.lost: set[int] = set()
        self._xids: dict[int, list[int]] = {}
        self._sticky_unhealthy: set[int] = set()
        self._link_prev: dict[int, tuple[float, int, int]] = {}
        self._max_clock: dict[int, int] = {}
        self._events = self._register_xid_events()

    # -- inventory -------------------------------------------------------------------------
    def inventory(self) -> NodeGpus:
        nv = self.nv
        gpus = [self._gpu_info(i, h) for i, h in enumerate(self.handles)]
        driver = self._optional(lambda: _text(nv.nvmlSystemGetDriverVersion()))
        islands = nvlink_islands(nv, self.handles)
        linked = any(len(g) > 1 for g in islands)
        labels = {"pcie_topology": pcie_topology_label(nv, self.handles)}
        cuda = self._optional(lambda: int(nv.nvmlSystemGetCudaDriverVersion()))
        stack = f"cuda-{cuda // 1000}.{cuda % 1000 // 10}" if cuda else ""  # 12060 -> cuda-12.6
        return NodeGpus(tuple(gpus), driver, "nvlink" if linked else "pcie", islands, labels, stack)

    def _gpu_info(self, i: int, h: Any) -> GpuInfo:
        nv = self.nv
        name = _text(nv.nvmlDeviceGetName(h))
        mem = int(nv.nvmlDeviceGetMemoryInfo(h).total // 2**20)
        cc = self._optional(lambda: nv.nvmlDeviceGetCudaComputeCapability(h))
        mig = self._optional(lambda: nv.nvmlDeviceGetMigMode(h))
        return GpuInfo(
            index=i,
            product_name=name,
            model=catalogue_name(name, mem),
            memory_mib=mem,
            compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
            uuid=_text(self._optional(lambda: nv.nvmlDeviceGetUUID(h)) or ""),
            mig_enabled=bool(mig) and mig[0] == nv.NVML_DEVICE_MIG_ENABLE,
        )

    def _optional(self, read: Callable[[], Any]) -> Any:
        """A reading some GPUs or drivers do not support: None instead of an error."""
        try:
            return read()
        except self.nv.NVMLError:
            return None

    # -- readings --------------------------------------------------------------------------
    def read(self) -> list[GpuReading]:
        self._drain_xid_events()
        return [self._read_one(i, h) for i, h in enumerate(self.handles)]

    def _read_one(self, i: int, h: Any) -> GpuReading:
        if i in self.lost:
            return GpuReading(i, healthy=False, xid_events=tuple(self._xids.pop(i, ())))
        try:
            reading = self._mandatory(i, h)
        except self.nv.NVMLError_GpuIsLost:
            log.error("gpu lost index=%d", i)
            self.lost.add(i)
            self._xids.setdefault(i, []).append(79)
            return GpuReading(i, healthy=False, xid_events=tuple(self._xids.pop(i)))
        except self.nv.NVMLError as exc:
            log.warning("gpu read failed index=%d error=%s", i, exc)
            return GpuReading(i, healthy=False, xid_events=tuple(self._xids.pop(i, ())))
        return reading

    def _mandatory(self, i: int, h: Any) -> GpuReading:
        nv = self.nv
        util = nv.nvmlDeviceGetUtilizationRates(h)
        mem = nv.nvmlDeviceGetMemoryInfo(h)
        clock = int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
        reasons = int(self._clock_reasons(h) or 0)
        tx, rx = self._nvlink_rates(i, h)
        xids = tuple(self._xids.pop(i, ()))
        if CRITICAL_XIDS.intersection(xids):
            self._sticky_unhealthy.add(i)
        ecc = self._optional(lambda: nv.nvmlDeviceGetTotalEccErrors(
            h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC))  # fmt: skip
        energy_mj = self._optional(lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h))
        return GpuReading(
            index=i,
            healthy=i not in self._sticky_unhealthy,
            util_pct=float(util.gpu),
            mem_used_mib=int(mem.used // 2**20),
            mem_bw_util_pct=float(util.memory),
            nvlink_tx_mbps=tx,
            nvlink_rx_mbps=rx,
            temperature_c=float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
            power_w=nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
            sm_clock_mhz=clock,
            throttle_reasons=reasons,
            ecc_errors=int(ecc or 0),
            xid_events=xids,
            perf_factor=self._perf_factor(i, h, clock, reasons, float(util.gpu)),
            energy_j=None if energy_mj is None else energy_mj / 1000.0,
        )

    def _clock_reasons(self, h: Any) -> int | None:
        fn = getattr(self.nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        fn = fn or self.nv.nvmlDeviceGetCurrentClocksThrottleReasons  # drivers before 535
        return self._optional(lambda: fn(h))

    def _perf_factor(self, i: int, h: Any, clock: int, reasons: int, util: float) -> float:
        """Clock ratio while a busy GPU is held back by power or heat; 1.0 otherwise."""
        if not (reasons & _THROTTLED) or util <= 0:
            return 1.0
        if i not in self._max_clock:
            self._max_clock[i] = int(
                self._optional(lambda: self.nv.nvmlDeviceGetMaxClockInfo(h, self.nv.NVML_CLOCK_SM))
                or 0
            )
        top = self._max_clock[i]
        return min(1.0, clock / top) if top > 0 else 1.0

    def _nvlink_rates(self, i: int, h: Any) -> tuple[float, float]:
        """MB/s from NVLink data counters (KiB, cumulative) between two reads."""
        nv = self.nv
        fields = [
            nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
            nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
        ]
        values = self._optional(lambda: nv.nvmlDeviceGetFieldValues(h, fields))
        if values is None or any(v.nvmlReturn != nv.NVML_SUCCESS for v in values):
            return 0.0, 0.0
        now, tx, rx = self.clock(), int(values[0].value.ullVal), int(values[1].value.ullVal)
        prev = self._link_prev.get(i)
        self._link_prev[i] = (now, tx, rx)
        if prev is None or now <= prev[0]:
            return 0.0, 0.0
        dt = now - prev[0]
        return max(0, tx - prev[1]) * 1.024e-3 / dt, max(0, rx - prev[2]) * 1.024e-3 / dt

    # -- XID events ------------------------------------------------------------------------
    def _register_xid_events(self) -> Any:
        nv = self.nv
        try:
            events = nv.nvmlEventSetCreate()
        except nv.NVMLError:
            return None
        for i, h in enumerate(self.handles):
            try:
                nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, events)
            except nv.NVMLError as exc:  # NotSupported on some GPUs (e.g. GeForce)
                log.info("xid events unavailable index=%d error=%s", i, exc)
        return events

    def _drain_xid_events(self) -> None:
        if self._events is None:
            return
        nv = self.nv
        for _ in range(64):  # bounded: never block a tick on an event storm
            try:
                data = nv.nvmlEventSetWait_v2(self._events, 0)
            except nv.NVMLError:  # NVMLError_Timeout: nothing pending
                return
            index = self._device_index(data.device)
            if index is not None:
                log.warning("gpu xid index=%s xid=%s", index, data.eventData)
                self._xids.setdefault(int(index), []).append(int(data.eventData))

    def _device_index(self, device: Any) -> int | None:
        try:
            return int(self.nv.nvmlDeviceGetIndex(device))
        except self.nv.NVMLError:
            return None

    def close(self) -> None:
        if self._events is not None:
            self._optional(lambda: self.nv.nvmlEventSetFree(self._events))
        self._optional(self.nv.nvmlShutdown)
