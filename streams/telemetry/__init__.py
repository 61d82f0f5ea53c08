"""Node telemetry as the worker reads it: the batched reader and the validated reports."""
