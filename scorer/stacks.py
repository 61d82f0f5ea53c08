"""Software stacks: what a node runs (CUDA 12.4, ROCm 6.2, CANN 8.0) and what a job was built for.

A stack is written `family-version` (`cuda-12.4`, `rocm-6.2`, `cann-8.0`) or just `family`.
A job built for a stack runs on a node of the same family whose version is at least the job's
(a newer CUDA driver runs older builds); ROCm and CANN builds also need the same major version,
as their user space follows the kernel driver. A CUDA build also runs only on GPUs whose
architecture its toolkit could target (`CUDA_MAX_SM`: CUDA 10.2 stops at 7.5, Turing; 11.0 at
8.0, A100; 11.8 at 9.0, Hopper), as framework wheels without PTX for newer parts do ("A100 with
CUDA capability sm_80 is not compatible with the current PyTorch installation"). A node that
declares no stack runs its GPU vendor's family at an unknown version, which satisfies any
version. A `portable` job runs on every stack and pays a porting penalty per stack
(`scores/porting.py`: none on CUDA, where most code is written first).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from scorer.errors import InvalidSpecError

__all__ = [
    "CUDA_MAX_SM",
    "PORTABLE",
    "STRICT_MAJOR",
    "VENDOR_STACK",
    "Stack",
    "node_stack",
    "parse_stack",
    "satisfies",
]

PORTABLE = "portable"
VENDOR_STACK = {"nvidia": "cuda", "amd": "rocm", "huawei": "cann", "intel": "oneapi"}
STRICT_MAJOR = frozenset(("rocm", "cann"))
# CUDA toolkit version -> newest compute capability it can build for
CUDA_MAX_SM: tuple[tuple[tuple[int, ...], float], ...] = (
    ((10, 0), 7.5),
    ((11, 0), 8.0),
    ((11, 1), 8.6),
    ((11, 8), 9.0),
    ((12, 8), 12.0),
)
_PATTERN = re.compile(r"^([a-z][a-z0-9]*)(?:-(\d+(?:\.\d+){0,2}))?$")


@dataclass(frozen=True)
class Stack:
    """A stack family and its version (empty = any / unknown)."""

    family: str
    version: tuple[int, ...] = ()

    def __str__(self) -> str:
        return self.family + ("-" + ".".join(map(str, self.version)) if self.version else "")

    @property
    def max_sm(self) -> float:
        """Newest GPU architecture a build for this stack runs on (0 = no limit)."""
        if self.family != "cuda" or not self.version:
            return 0.0
        known = [sm for version, sm in CUDA_MAX_SM if version <= self.version]
        return known[-1] if known else CUDA_MAX_SM[0][1]

    @property
    def code(self) -> int:
        """The version as one sortable integer (major x 1e6 + minor x 1e3 + patch; 0 = any)."""
        parts = (*self.version, 0, 0, 0)[:3]
        return parts[0] * 1_000_000 + parts[1] * 1_000 + parts[2] if self.version else 0


@functools.lru_cache(maxsize=1024)  # a handful of stacks, asked for per node and per job
def parse_stack(text: str) -> Stack | None:
    """`cuda-12.4` -> Stack('cuda', (12, 4)); `portable` (or empty) -> None."""
    text = (text or "").strip().lower()
    if text in ("", PORTABLE):
        return None
    match = _PATTERN.match(text)
    if match is None:
        raise InvalidSpecError(
            f"software_stack: expected portable or family[-version] (cuda-12.4), got {text!r}"
        )
    version = tuple(int(p) for p in match.group(2).split(".")) if match.group(2) else ()
    return Stack(match.group(1), version)


def node_stack(declared: str, vendor: str) -> Stack:
    """A node's stack: as declared, else its GPU vendor's family at an unknown version."""
    stack = parse_stack(declared)
    return stack if stack is not None else Stack(VENDOR_STACK.get(vendor, vendor))


def satisfies(node_family: str, node_code: int, job: Stack, sm: float = 0.0) -> bool:
    """A node of `node_family` at version `node_code` (0 = unknown) with GPUs of compute
    capability `sm` (0 = unknown) runs a build for `job`."""
    if node_family != job.family or (job.max_sm and sm > job.max_sm):
        return False
    if not job.version or node_code == 0:
        return True
    if job.family in STRICT_MAJOR and node_code // 1_000_000 != job.version[0]:
        return False
    return node_code >= job.code
