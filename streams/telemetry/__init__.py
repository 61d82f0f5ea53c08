"""Node telemetry as the worker reads it: the batched reader, validated reports,
and the activity view built on them."""
