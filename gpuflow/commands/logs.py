"""`gpuflow logs JOB`: a job's output as its executors published it on gpuflow.jobs.logs."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import typer
from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from gpuflow.commands.common import fail, running_config
from infra.kafka import consumer, end_offsets
from infra.topics import JOBS_LOGS
from schemas import DecodeError, make_codec

__all__ = ["LogPrinter", "logs"]


class LogPrinter:
    """Writes one job's chunks once each (by event id), stdout's to `out`, stderr's to `err`;
    a header before each epoch when several are shown."""

    def __init__(self, job_id: str, epoch: int | None, out: BinaryIO, err: BinaryIO) -> None:
        self.job_id, self.epoch, self.out, self.err = job_id, epoch, out, err
        self.seen: set[str] = set()
        self.current: int | None = None

    def take(self, record: dict[str, Any]) -> bool:
        if record["job_id"] != self.job_id or record["event_id"] in self.seen:
            return False
        if self.epoch is not None and record["epoch"] != self.epoch:
            return False
        self.seen.add(record["event_id"])
        if self.epoch is None and record["epoch"] != self.current:
            self.current = record["epoch"]
            self.out.write(
                f"==> {self.job_id} epoch {record['epoch']} on {record['node_id']} <==\n".encode()
            )
        stream = self.out if record["stream"] == "STDOUT" else self.err
        if record["skipped"]:
            stream.write(f"\n[... {record['skipped']} bytes not published ...]\n".encode())
        stream.write(record["data"])
        stream.flush()
        return True


def logs(
    job_id: Annotated[str, typer.Argument(help="The job whose output to print.")],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new output.")
    ] = False,
    epoch: Annotated[int | None, typer.Option(help="Only this attempt (placement epoch).")] = None,
    timeout: Annotated[
        float | None, typer.Option(help="With --follow: stop after this many s.")
    ] = None,
    data_dir: Annotated[Path, typer.Option(help="Where `gpuflow up` runs.")] = Path("gpuflow-data"),
) -> None:
    """Print a job's stdout (and its stderr, to stderr), every epoch in turn or one (--epoch)."""
    config = running_config(data_dir)
    codec = make_codec(config.kafka.schema_registry_url or None)
    printer = LogPrinter(job_id, epoch, sys.stdout.buffer, sys.stderr.buffer)
    c = consumer(config.kafka, group_id=f"gpuflow-logs-{time.monotonic_ns()}")
    key = job_id.encode()
    try:
        ends = end_offsets(config.kafka, JOBS_LOGS)
        if not ends:
            raise fail(f"topic {JOBS_LOGS} does not exist on this broker")
        c.assign([TopicPartition(JOBS_LOGS, p, OFFSET_BEGINNING) for p in ends])
        started = time.monotonic()
        done = {p for p, end in ends.items() if end == 0}
        while follow or len(done) < len(ends):
            if follow and timeout is not None and time.monotonic() - started > timeout:
                break
            for msg in c.consume(500, timeout=0.2):
                if msg.error():
                    continue
                partition, offset = int(msg.partition() or 0), int(msg.offset() or 0)
                if offset + 1 >= ends.get(partition, 0):
                    done.add(partition)
                if msg.key() == key:
                    _print(codec, printer, msg.value())
    except KafkaException as exc:
        raise fail(f"broker error: {exc}") from None
    except KeyboardInterrupt:
        pass
    finally:
        c.close()
    if not printer.seen:
        typer.echo(f"no output for {job_id} on {JOBS_LOGS}", err=True)


def _print(codec: Any, printer: LogPrinter, value: bytes | None) -> None:
    try:
        name, record = codec.decode(value, topic=JOBS_LOGS)
    except DecodeError:
        return
    if name == "JobLog":
        printer.take(record)
