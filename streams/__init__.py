"""gpuflow streams package."""
