"""Errors of the event codec.

GpuflowError
└── CodecError                 bytes and records do not meet
    ├── UnknownSchemaError     no schema of that name or fingerprint is known
    ├── EncodeError            a record does not match its schema
    └── DecodeError            bytes are not a known, well-formed event
└── KeySpecError               a tenant signing key is malformed (schemas.signing)
"""

from __future__ import annotations

from gpuflow_errors import GpuflowError

__all__ = [
    "CodecError",
    "DecodeError",
    "EncodeError",
    "GpuflowError",
    "KeySpecError",
    "UnknownSchemaError",
]


class CodecError(GpuflowError):
    """Bytes and records do not meet."""


class UnknownSchemaError(CodecError):
    """No schema of that name or fingerprint is known."""


class EncodeError(CodecError):
    """A record does not match its schema."""


class DecodeError(CodecError):
    """Bytes are not a known, well-formed event."""


class KeySpecError(GpuflowError):
    """A tenant signing key is malformed or listed twice."""
