"""The bandwidth processor: link telemetry and job phases in, bandwidth quotas out."""
