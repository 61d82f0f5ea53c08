"""An embedded Kafka-protocol broker in Python whose cost does not grow with what it holds.

Tansu 0.6 `memory://` lists every stored batch of a partition on each fetch that returns data
and keeps every batch forever, so the embedded stack slowed and grew for as long as it ran
(docs/performance/broker.md). This broker keeps each partition's batches in offset order (a fetch is
a bisect), honours `retention.ms` / `retention.bytes` and compacts `cleanup.policy=compact`
topics, on one node with no replication and no transactions. Run it with
`python -m infra.logbroker --port N`; `infra.broker.EmbeddedBroker` starts it when
`broker.engine` is `logbroker`.
"""
