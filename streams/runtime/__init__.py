"""One worker's process-local state, free of Faust: the runtime,
its fleet, ownership of regions, consumer state and counters."""
