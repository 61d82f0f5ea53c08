"""The Faust worker: the app and its agents, timers, transport and graceful shutdown."""
