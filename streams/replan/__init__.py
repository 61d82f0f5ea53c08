"""The re-planner: migrations and defragmentation proposed over the running jobs."""
