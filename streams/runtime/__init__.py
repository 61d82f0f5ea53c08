"""One worker's process-local state, free of Faust: the runtime, its fleet, ownership of regions,
consumer state, counters, and the activity that `/activity/` shows."""
