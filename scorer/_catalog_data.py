"""Vendor-published figures of the accelerators gpuflow knows out of the box.

Peak TFLOPS are dense (no structured sparsity), per GPU as the cloud exposes it (a K80 board
is two GK210 GPUs: figures are per GK210, as AWS p2 and Gavel count them). 0 = the precision
has no native arithmetic on that chip. Prices are approximate on-demand list prices per GPU-hour
(2024, a major cloud, US region); operators override them with `load_catalog` or node inventory.
Sources: NVIDIA datasheets (K80, P100 SXM2, V100 SXM2, T4, A10/A10G, L4, L40S, A100 SXM4,
H100 SXM5, H200 SXM), Huawei Ascend 910B public specs, AMD Instinct MI300X datasheet.
"""

from __future__ import annotations

__all__ = ["ALIASES", "COMPUTE_CAPABILITY", "MODELS"]

# name, vendor, arch, fp32, tf32, bf16, fp16, fp8, int8, mem_gb, bw_gbs,
# interconnect, link_gbs, mig, flash_attention, power_w, price_per_gpu_hour
# fmt: off
MODELS: tuple[tuple[object, ...], ...] = (
    ("K80", "nvidia", "kepler", 4.37, 0, 0, 0, 0, 0, 12, 240, "pcie", 16, False, False, 150, 0.90),
    ("P100", "nvidia", "pascal", 10.6, 0, 0, 21.2, 0, 0, 16, 732, "nvlink", 160, False, False,
     300, 1.46),
    ("V100-16", "nvidia", "volta", 15.7, 0, 0, 125, 0, 62, 16, 900, "nvlink", 300, False, False,
     300, 2.48),
    ("V100-32", "nvidia", "volta", 15.7, 0, 0, 125, 0, 62, 32, 900, "nvlink", 300, False, False,
     300, 2.95),
    ("T4", "nvidia", "turing", 8.1, 0, 0, 65, 0, 130, 16, 320, "pcie", 16, False, False, 70, 0.35),
    ("A10G", "nvidia", "ampere", 35, 35, 70, 70, 0, 140, 24, 600, "pcie", 32, False, True,
     300, 1.01),
    ("L4", "nvidia", "ada", 30.3, 60, 121, 121, 242, 242, 24, 300, "pcie", 32, False, True,
     72, 0.71),
    ("L40S", "nvidia", "ada", 91.6, 183, 362, 362, 733, 733, 48, 864, "pcie", 32, False, True,
     350, 1.86),
    ("A100-40", "nvidia", "ampere", 19.5, 156, 312, 312, 0, 624, 40, 1555, "nvlink", 600, True,
     True, 400, 3.67),
    ("A100-80", "nvidia", "ampere", 19.5, 156, 312, 312, 0, 624, 80, 2039, "nvlink", 600, True,
     True, 400, 5.07),
    ("H100", "nvidia", "hopper", 67, 494.5, 989.5, 989.5, 1979, 1979, 80, 3350, "nvlink", 900,
     True, True, 700, 11.06),
    ("H200", "nvidia", "hopper", 67, 494.5, 989.5, 989.5, 1979, 1979, 141, 4800, "nvlink", 900,
     True, True, 700, 13.19),
    ("Ascend910B", "huawei", "davinci", 94, 0, 320, 320, 0, 640, 64, 1600, "hccs", 392, False,
     True, 400, 2.20),
    ("MI300X", "amd", "cdna3", 163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9, 192, 5300,
     "infinity_fabric", 896, False, True, 750, 6.00),
)
# fmt: on

# CUDA compute capability of the NVIDIA parts (which SM architectures a CUDA build must target)
COMPUTE_CAPABILITY: dict[str, float] = {
    "K80": 3.7, "P100": 6.0, "V100-16": 7.0, "V100-32": 7.0, "T4": 7.5, "A10G": 8.6, "L4": 8.9,
    "L40S": 8.9, "A100-40": 8.0, "A100-80": 8.0, "H100": 9.0, "H200": 9.0,
}  # fmt: skip

# Gavel's lowercase names and common spellings; the 16 GB V100 is Gavel's v100.
ALIASES: dict[str, str] = {
    "k80": "K80",
    "p100": "P100",
    "v100": "V100-16",
    "V100": "V100-16",
    "v100m16": "V100-16",  # the Alibaba GPU traces' (openb) spelling
    "v100m32": "V100-32",
    "t4": "T4",
    "a10g": "A10G",
    "l4": "L4",
    "l40s": "L40S",
    "A100": "A100-40",
    "a100": "A100-40",
    "H100-SXM": "H100",
    "h100": "H100",
    "h200": "H200",
    "910B": "Ascend910B",
    "mi300x": "MI300X",
}
