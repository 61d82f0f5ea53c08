"""gpuflow infra package."""
