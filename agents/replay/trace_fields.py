"""What both trace readers (ours and the Alibaba lists of `openb`) parse alike: GPU model
names through the catalogue, a job's GPU share, and the columns kept as read."""

from __future__ import annotations

from agents.replay.csvio import Row, positive, to_int
from agents.replay.trace import PASSTHROUGH
from scorer import Catalog, default_catalog
from scorer.catalog import OPAQUE_BASE

__all__ = ["ModelResolver", "gpu_milli_of", "passthrough"]


class ModelResolver:
    """GPU model names through the catalogue; an unknown one is taken as an opaque model (the
    figures of `scorer.catalog.OPAQUE_BASE`) with one warning naming it."""

    def __init__(self, catalog: Catalog | None = None) -> None:
        self.catalog = catalog or default_catalog()
        self._opaque: dict[str, str] = {}  # name -> where it was first seen

    def __call__(self, row: Row, column: str, raw: str) -> str:
        spec = self.catalog.get(raw)
        if spec is not None:
            return spec.name
        if not raw:
            raise row.error(column, "is required and empty")
        self._opaque.setdefault(raw, f"{row.path}:{row.line}")
        self.catalog = self.catalog.with_opaque([raw])
        return raw

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(
            f"{where}: GPU model {name!r} is not in the catalogue; taken as an opaque model "
            f"with the figures of {OPAQUE_BASE} (describe it with --catalog FILE)"
            for name, where in self._opaque.items()
        )


def _milli(raw: str) -> int:
    value = to_int(raw)
    if not 1 <= value <= 1000:
        raise ValueError("expected a GPU share in 1..1000 milli")
    return value


def gpu_milli_of(row: Row, num_gpus: int, column: str = "num_gpus") -> int:
    """The per-GPU share; a CPU-only job writes 0 or nothing there (as the public traces do)."""
    if num_gpus == 0:  # 1000 too: this reader's default, written by earlier versions
        if row.parse("gpu_milli", positive(to_int, strict=False), 0) not in (0, 1000):
            raise row.error("gpu_milli", f"a CPU-only job ({column} 0) takes no GPU share")
        return 1000
    milli = row.parse("gpu_milli", _milli, 1000)
    if milli < 1000 and num_gpus != 1:
        raise row.error("gpu_milli", f"a GPU share needs {column} 1, got {num_gpus}")
    return milli


def passthrough(row: Row) -> tuple[tuple[str, str], ...]:
    return tuple((c, row.get(c)) for c in PASSTHROUGH if c in row.columns)
