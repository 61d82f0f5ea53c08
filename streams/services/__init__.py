"""The streaming autoscaler of services and the replicas it asks the scheduler for."""
