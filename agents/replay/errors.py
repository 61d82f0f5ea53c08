"""Errors of trace replay.

GpuflowError                 root (scorer.errors)
└── TraceError               a trace file is malformed; names file, line and column
    └── TwinError            the digital twin was asked to do the impossible (over capacity...)
"""

from __future__ import annotations

from gpuflow_errors import GpuflowError

__all__ = ["TraceError", "TwinError"]


class TraceError(GpuflowError):
    """A trace file is malformed: `file:line:column (name): why`."""

    def __init__(
        self, path: str, message: str, *, line: int | None = None, column: int | None = None
    ) -> None:
        where = path
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.column = path, line, column


class TwinError(GpuflowError):
    """The twin refused an impossible action (a fault in the caller, never in the trace)."""
