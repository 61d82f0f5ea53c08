"""The history sink (Kafka -> ClickHouse),
its health and metrics, the `/sql/` page, and the child process that runs them."""
