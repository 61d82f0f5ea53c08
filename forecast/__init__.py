"""gpuflow forecast package."""
