"""What every floor of the worker may use: the outbox of messages to send,
the clock, a topic follower, the Prometheus registry."""
