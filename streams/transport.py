"""Faust's Kafka transport with a short consumer fetch wait.

Faust hard-codes aiokafka's `fetch_max_wait_ms=1500`. A broker that holds a fetch for its whole
wait when no new data arrives (the embedded Tansu does) then adds up to 1.5 s per hop. We keep
Faust's driver and only shorten that wait, to `GPUFLOW_KAFKA_FETCH_WAIT_MS` (default 10 ms).
"""

from __future__ import annotations

from typing import Any

import faust
from faust.transport.drivers import aiokafka as driver

__all__ = ["GpuflowApp"]


class _ConsumerThread(driver.AIOKafkaConsumerThread):
    fetch_max_wait_ms = 10

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = self.fetch_max_wait_ms  # read when its Fetcher starts
        return consumer


class _Consumer(driver.Consumer):
    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class _Transport(driver.Transport):
    Consumer = _Consumer


class GpuflowApp(faust.App):
    """faust.App whose consumers wait at most `fetch_wait_ms` for new data."""

    def __init__(self, *args: Any, fetch_wait_ms: int = 10, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fetch_wait_ms = fetch_wait_ms

    def _new_transport(self) -> Any:
        _ConsumerThread.fetch_max_wait_ms = self.fetch_wait_ms
        return _Transport(self.conf.broker_consumer, self, loop=self.loop)
