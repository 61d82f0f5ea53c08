"""Event schemas (one `.avsc` per event, namespace gpuflow.v1) and the Avro codec."""

from __future__ import annotations

from schemas.codec import MAGIC, Codec, ConfluentCodec, SingleObjectCodec, make_codec
from schemas.errors import CodecError, DecodeError, EncodeError, UnknownSchemaError
from schemas.registry import EVENT_NAMES, NAMESPACE, EventSchema, SchemaSet, default_schemas
from schemas.timestamps import timestamp_ms

__all__ = [
    "EVENT_NAMES",
    "MAGIC",
    "NAMESPACE",
    "Codec",
    "CodecError",
    "ConfluentCodec",
    "DecodeError",
    "EncodeError",
    "EventSchema",
    "SchemaSet",
    "SingleObjectCodec",
    "UnknownSchemaError",
    "default_schemas",
    "make_codec",
    "timestamp_ms",
]
