"""NVLink islands and PCIe topology from NVML: which GPUs share a fast link."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["nvlink_islands", "pcie_topology_label"]

_TOPOLOGY_NAMES = {0: "SELF", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _bus_id(nv: Any, h: Any) -> str:
    return _text(nv.nvmlDeviceGetPciInfo(h).busId).lower()


def _peers(nv: Any, h: Any, bus_index: dict[str, int]) -> tuple[set[int], bool]:
    """GPU indices this GPU links to directly, and whether it has a link to an NVSwitch."""
    peers: set[int] = set()
    switch = False
    for link in range(nv.NVML_NVLINK_MAX_LINKS):
        try:
            if nv.nvmlDeviceGetNvLinkState(h, link) != nv.NVML_FEATURE_ENABLED:
                continue
            remote = _text(nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId).lower()
        except nv.NVMLError:  # NotSupported / InvalidArgument past the last link
            continue
        if remote in bus_index:
            peers.add(bus_index[remote])
            continue
        try:
            kind = nv.nvmlDeviceGetNvLinkRemoteDeviceType(h, link)
        except (nv.NVMLError, AttributeError):
            kind = None
        switch = switch or kind == getattr(nv, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)
    return peers, switch


def nvlink_islands(nv: Any, handles: Sequence[Any]) -> tuple[tuple[int, ...], ...]:
    """Connected components of the NVLink graph (NVSwitch-attached GPUs form one island)."""
    try:
        bus_index = {_bus_id(nv, h): i for i, h in enumerate(handles)}
    except nv.NVMLError:
        return tuple((i,) for i in range(len(handles)))
    parent = list(range(len(handles)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    on_switch = []
    for i, h in enumerate(handles):
        peers, switch = _peers(nv, h, bus_index)
        for j in peers:
            parent[find(i)] = find(j)
        if switch:
            on_switch.append(i)
    for i in on_switch[1:]:
        parent[find(i)] = find(on_switch[0])
    groups: dict[int, list[int]] = {}
    for i in range(len(handles)):
        groups.setdefault(find(i), []).append(i)
    return tuple(tuple(g) for g in sorted(groups.values()))


def pcie_topology_label(nv: Any, handles: Sequence[Any]) -> str:
    """Pairwise PCIe distance as a compact label, e.g. "0-1:PIX,0-2:SYS"."""
    pairs = []
    for i in range(len(handles)):
        for j in range(i + 1, len(handles)):
            try:
                level = nv.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j])
            except nv.NVMLError:
                continue
            pairs.append(f"{i}-{j}:{_TOPOLOGY_NAMES.get(int(level), str(level))}")
    return ",".join(pairs)
