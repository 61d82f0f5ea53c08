"""A fake `pynvml` module with the real function names, constants and return shapes."""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

MIB = 2**20

# Constants come from the real module, so the fake cannot drift from NVML's numbering.
_CONSTANTS = (
    "NVML_SUCCESS", "NVML_CLOCK_SM", "NVML_TEMPERATURE_GPU", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED",
    "NVML_VOLATILE_ECC", "NVML_NVLINK_MAX_LINKS", "NVML_FEATURE_ENABLED", "NVML_FEATURE_DISABLED",
    "NVML_DEVICE_MIG_ENABLE", "NVML_DEVICE_MIG_DISABLE", "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX",
    "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", "nvmlEventTypeXidCriticalError",
    "NVML_NVLINK_DEVICE_TYPE_GPU", "NVML_NVLINK_DEVICE_TYPE_SWITCH", "NVML_TOPOLOGY_INTERNAL",
    "NVML_TOPOLOGY_SINGLE", "NVML_TOPOLOGY_NODE", "NVML_TOPOLOGY_SYSTEM",
    "NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_TIMEOUT",
    "NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_UNKNOWN",
)  # fmt: skip


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    total_mib: int = 81559
    used_mib: int = 1000
    util: int = 50
    mem_util: int = 30
    temp: int = 60
    power_mw: int = 400_000
    clock: int = 1980
    max_clock: int = 1980
    reasons: int = 0
    ecc: int | None = 0  # None: ECC not supported
    bus_id: str = ""
    links: list[str] = field(default_factory=list)  # remote bus ids per active link
    link_kind: int = 0  # remote device type for links that are not GPUs
    lost: bool = False
    fail_once: bool = False  # next read raises NVMLError_Unknown
    energy_mj: int = 0
    nvlink_kib: tuple[int, int] = (0, 0)
    mig: int = 0


class FakeNvml(types.ModuleType):
    """Holds `gpus`; tests mutate them between reads (a GPU falls off the bus, heats up...)."""

    def __init__(self, gpus: list[FakeGpu], *, init_error: int | None = None) -> None:
        super().__init__("pynvml")
        for name in _CONSTANTS:
            setattr(self, name, getattr(pynvml, name))
        self.gpus = gpus
        for i, g in enumerate(gpus):
            g.bus_id = g.bus_id or f"00000000:{0x10 + i:02X}:00.0"
        self.init_error = init_error
        self.events: list[tuple[int, int]] = []  # (gpu index, xid) pending
        self._errors()
        self._functions()

    def _errors(self) -> None:
        class NVMLError(Exception):
            def __init__(self, value: int) -> None:
                super().__init__(f"NVML error {value}")
                self.value = value

        self.NVMLError = NVMLError
        self.codes: dict[str, int] = {}
        for name, code in (("GpuIsLost", 15), ("NotSupported", 3), ("Timeout", 10),
                           ("LibraryNotFound", 12), ("Unknown", 999)):  # fmt: skip
            # Like pynvml: NVMLError_<Name> subclasses NVMLError, raised with the error code.
            setattr(self, f"NVMLError_{name}", type(f"NVMLError_{name}", (NVMLError,), {}))
            self.codes[name] = code

    def _gpu(self, h: Any) -> FakeGpu:
        g = self.gpus[h.index]
        if g.lost:
            raise self.NVMLError_GpuIsLost(15)
        if g.fail_once:
            g.fail_once = False
            raise self.NVMLError_Unknown(999)
        return g

    def _functions(self) -> None:
        fns: dict[str, Callable[..., Any]] = {
            "nvmlInit": self._init,
            "nvmlShutdown": lambda: None,
            "nvmlDeviceGetCount": lambda: len(self.gpus),
            "nvmlDeviceGetHandleByIndex": lambda i: SimpleNamespace(index=i),
            "nvmlDeviceGetIndex": lambda h: h.index,
            "nvmlSystemGetDriverVersion": lambda: "560.35.03",
            "nvmlSystemGetCudaDriverVersion": lambda: 12060,
            "nvmlDeviceGetName": lambda h: self._gpu(h).name,
            "nvmlDeviceGetUUID": lambda h: f"GPU-fake-{h.index}",
            "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId=self._gpu(h).bus_id.encode()),
            "nvmlDeviceGetCudaComputeCapability": lambda h: (9, 0),
            "nvmlDeviceGetMigMode": lambda h: [self._gpu(h).mig, self._gpu(h).mig],
            "nvmlDeviceGetMemoryInfo": self._memory,
            "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(
                gpu=self._gpu(h).util, memory=self._gpu(h).mem_util),
            "nvmlDeviceGetTemperature": lambda h, sensor: self._gpu(h).temp,
            "nvmlDeviceGetPowerUsage": lambda h: self._gpu(h).power_mw,
            "nvmlDeviceGetClockInfo": lambda h, kind: self._gpu(h).clock,
            "nvmlDeviceGetMaxClockInfo": lambda h, kind: self._gpu(h).max_clock,
            "nvmlDeviceGetCurrentClocksEventReasons": lambda h: self._gpu(h).reasons,
            "nvmlDeviceGetTotalEccErrors": self._ecc,
            "nvmlDeviceGetTotalEnergyConsumption": lambda h: self._gpu(h).energy_mj,
            "nvmlDeviceGetFieldValues": self._fields,
            "nvmlDeviceGetNvLinkState": self._link_state,
            "nvmlDeviceGetNvLinkRemotePciInfo": self._link_remote,
            "nvmlDeviceGetNvLinkRemoteDeviceType": lambda h, link: self._gpu(h).link_kind,
            "nvmlDeviceGetTopologyCommonAncestor": self._topology,
            "nvmlEventSetCreate": lambda: SimpleNamespace(kind="eventset"),
            "nvmlDeviceRegisterEvents": lambda h, types_, events: None,
            "nvmlEventSetWait_v2": self._wait,
            "nvmlEventSetFree": lambda events: None,
        }  # fmt: skip
        for name, fn in fns.items():
            setattr(self, name, fn)
        self.function_names = tuple(fns)

    def _init(self) -> None:
        if self.init_error is not None:
            raise self.NVMLError_LibraryNotFound(self.init_error)

    def _memory(self, h: Any) -> Any:
        g = self._gpu(h)
        return SimpleNamespace(total=g.total_mib * MIB, used=g.used_mib * MIB,
                               free=(g.total_mib - g.used_mib) * MIB)  # fmt: skip

    def _ecc(self, h: Any, error_type: int, counter_type: int) -> int:
        g = self._gpu(h)
        if g.ecc is None:
            raise self.NVMLError_NotSupported(3)
        return g.ecc

    def _fields(self, h: Any, ids: list[int]) -> list[Any]:
        g = self._gpu(h)
        vals = {self.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: g.nvlink_kib[0],
                self.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: g.nvlink_kib[1]}  # fmt: skip
        return [SimpleNamespace(fieldId=i, nvmlReturn=0, value=SimpleNamespace(ullVal=vals[i]))
                for i in ids]  # fmt: skip

    def _link_state(self, h: Any, link: int) -> int:
        g = self._gpu(h)
        if link >= self.NVML_NVLINK_MAX_LINKS:
            raise self.NVMLError(2)
        return self.NVML_FEATURE_ENABLED if link < len(g.links) else self.NVML_FEATURE_DISABLED

    def _link_remote(self, h: Any, link: int) -> Any:
        return SimpleNamespace(busId=self._gpu(h).links[link].encode())

    def _topology(self, a: Any, b: Any) -> int:
        return self.NVML_TOPOLOGY_SINGLE if a.index // 2 == b.index // 2 else 50

    def _wait(self, events: Any, timeout_ms: int) -> Any:
        if not self.events:
            raise self.NVMLError_Timeout(10)
        index, xid = self.events.pop(0)
        kind = self.nvmlEventTypeXidCriticalError
        return SimpleNamespace(device=SimpleNamespace(index=index), eventType=kind, eventData=xid)


def nvlink_pairs(n: int) -> list[FakeGpu]:
    """n GPUs where 0-1, 2-3, ... are NVLink pairs (two links each)."""
    gpus = [FakeGpu() for _ in range(n)]
    for i, g in enumerate(gpus):
        g.bus_id = f"00000000:{0x10 + i:02X}:00.0"
    for i, g in enumerate(gpus):
        peer = gpus[i ^ 1].bus_id
        g.links = [peer, peer]
    return gpus


@pytest.fixture
def nv() -> SimpleNamespace:
    """The fake NVML kit: `nv.Nvml(gpus)`, `nv.Gpu(**fields)`, `nv.pairs(n)`."""
    return SimpleNamespace(Nvml=FakeNvml, Gpu=FakeGpu, pairs=nvlink_pairs)
