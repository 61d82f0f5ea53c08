"""NvmlReader against a fake pynvml with the real names and shapes: inventory, readings,
unsupported metrics, NVML errors, XID events, and a GPU falling off the bus mid-run."""

from __future__ import annotations

import pynvml
import pytest

from agents.errors import NvmlUnavailable
from agents.models import catalogue_name
from agents.nvml import NvmlReader


def test_fake_uses_real_pynvml_names(nv) -> None:
    fake = nv.Nvml(nv.pairs(2))
    assert [n for n in fake.function_names if not hasattr(pynvml, n)] == []
    assert issubclass(pynvml.NVMLError_GpuIsLost, pynvml.NVMLError)
    assert all(hasattr(pynvml, f"NVMLError_{name}") for name in fake.codes)


def test_inventory_maps_names_islands_and_capabilities(nv) -> None:
    inv = NvmlReader(nv.Nvml(nv.pairs(4))).inventory()
    assert [g.model for g in inv.gpus] == ["H100"] * 4
    assert inv.gpus[0].memory_mib == 81559 and inv.gpus[0].compute_capability == "9.0"
    assert inv.nvlink_islands == ((0, 1), (2, 3))
    assert inv.interconnect == "nvlink" and inv.driver_version == "560.35.03"
    assert inv.labels["pcie_topology"].startswith("0-1:PIX,0-2:SYS")


def test_nvswitch_links_make_one_island(nv) -> None:
    gpus = [nv.Gpu(links=["00000000:FF:00.0"] * 2,
                   link_kind=pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH) for _ in range(4)]  # fmt: skip
    assert NvmlReader(nv.Nvml(gpus)).inventory().nvlink_islands == ((0, 1, 2, 3),)


def test_pcie_only_gpus_are_singleton_islands_and_mig_is_reported(nv) -> None:
    gpus = [nv.Gpu(name="NVIDIA A100-PCIE-40GB", total_mib=40960, mig=1) for _ in range(2)]
    inv = NvmlReader(nv.Nvml(gpus)).inventory()
    assert inv.nvlink_islands == ((0,), (1,)) and inv.interconnect == "pcie"
    assert inv.gpus[0].model == "A100-40" and inv.gpus[0].mig_enabled


@pytest.mark.parametrize(
    ("product", "mib", "model"),
    [
        ("NVIDIA H100 80GB HBM3", 81559, "H100"),
        ("NVIDIA H200", 143771, "H200"),
        ("NVIDIA A100-SXM4-80GB", 81920, "A100-80"),
        ("NVIDIA A100 PCIe", 81920, "A100-80"),  # memory disambiguates
        ("NVIDIA A100-SXM4-40GB", 40960, "A100-40"),
        ("Tesla V100-SXM2-32GB", 32510, "V100-32"),
        ("Tesla V100-PCIE-16GB", 16160, "V100-16"),
        ("Tesla T4", 15360, "T4"),
        ("NVIDIA A10G", 23028, "A10G"),
        ("NVIDIA L4", 23034, "L4"),
        ("NVIDIA L40S", 46068, "L40S"),
        ("Tesla P100-PCIE-16GB", 16280, "P100"),
        ("Tesla K80", 11441, "K80"),
        ("NVIDIA GH200 480GB", 97871, "GH200-480GB"),
    ],
)
def test_catalogue_names(product: str, mib: int, model: str) -> None:
    assert catalogue_name(product, mib) == model


def test_readings_convert_units_and_throttle(nv) -> None:
    gpus = nv.pairs(2)
    gpus[1].reasons = 0x20 | 0x40  # sw + hw thermal slowdown
    gpus[1].clock, gpus[1].temp, gpus[1].util = 1584, 91, 100
    now = [0.0]
    fake = nv.Nvml(gpus)
    reader = NvmlReader(fake, clock=lambda: now[0])
    first = reader.read()
    assert first[0].power_w == 400.0 and first[0].mem_used_mib == 1000
    assert first[0].util_pct == 50 and first[0].mem_bw_util_pct == 30
    assert first[0].perf_factor == 1.0
    assert first[1].perf_factor == pytest.approx(1584 / 1980)
    assert first[1].throttle_reasons == 0x60 and first[1].temperature_c == 91
    gpus[0].nvlink_kib = (2_000_000, 1_000_000)  # KiB since the last read
    gpus[0].energy_mj = 5_000_000
    now[0] = 2.0
    second = reader.read()
    assert second[0].nvlink_tx_mbps == pytest.approx(2_000_000 * 1.024e-3 / 2)
    assert second[0].nvlink_rx_mbps == pytest.approx(1_000_000 * 1.024e-3 / 2)
    assert second[0].energy_j == 5000.0


def test_unsupported_ecc_reads_zero_and_a_transient_error_marks_one_read(nv) -> None:
    gpus = nv.pairs(2)
    gpus[0].ecc = None
    gpus[1].fail_once = True
    reader = NvmlReader(nv.Nvml(gpus))
    r = reader.read()
    assert r[0].healthy and r[0].ecc_errors == 0
    assert not r[1].healthy
    assert reader.read()[1].healthy  # transient: the next read is fine


def test_gpu_lost_mid_run_is_unhealthy_with_xid_79_and_others_keep_reporting(nv) -> None:
    gpus = nv.pairs(4)
    reader = NvmlReader(nv.Nvml(gpus))
    assert all(r.healthy for r in reader.read())
    gpus[2].lost = True
    r = reader.read()
    assert [x.healthy for x in r] == [True, True, False, True]
    assert r[2].xid_events == (79,) and r[3].util_pct == 50
    again = reader.read()
    assert not again[2].healthy and again[2].xid_events == ()  # XID reported once
    assert 2 in reader.lost


def test_xid_events_from_the_event_set(nv) -> None:
    fake = nv.Nvml(nv.pairs(2))
    reader = NvmlReader(fake)
    fake.events.append((1, 13))  # graphics engine exception: not critical
    r = reader.read()
    assert r[1].xid_events == (13,) and r[1].healthy
    fake.events.append((0, 48))  # double-bit ECC: unhealthy until reset
    r = reader.read()
    assert r[0].xid_events == (48,) and not r[0].healthy
    assert not reader.read()[0].healthy


def test_no_nvml_library_raises_nvml_unavailable(nv) -> None:
    with pytest.raises(NvmlUnavailable, match="NVML is not available"):
        NvmlReader(nv.Nvml([], init_error=12))
    with pytest.raises(NvmlUnavailable, match="no GPUs"):
        NvmlReader(nv.Nvml([]))


def test_real_pynvml_opens_or_says_why_not() -> None:
    """Without a driver: a clear NvmlUnavailable. With one (a GPU machine): a reader that
    sees at least one GPU."""
    try:
        reader = NvmlReader()
    except NvmlUnavailable as exc:
        assert "NVML" in str(exc)
        return
    try:
        assert len(reader.handles) >= 1 and reader.inventory().gpus
    finally:
        reader.close()
