"""`python -m infra.logbroker --port N`: the embedded log broker in its own process."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from infra.logbroker.server import serve
from infra.logbroker.state import BrokerSettings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m infra.logbroker", description=__doc__)
    d = BrokerSettings()
    ap.add_argument("--host", default=d.host)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument(
        "--partitions", type=int, default=d.partitions, help="of a topic made on first use"
    )
    ap.add_argument("--retention-ms", type=int, default=d.retention_ms, help="-1 keeps everything")
    ap.add_argument("--retention-bytes", type=int, default=d.retention_bytes, help="per partition")
    ap.add_argument("--delete-retention-ms", type=int, default=d.delete_retention_ms)
    ap.add_argument("--log-level", default="INFO")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    settings = BrokerSettings(
        host=args.host,
        port=args.port,
        partitions=args.partitions,
        retention_ms=args.retention_ms,
        retention_bytes=args.retention_bytes,
        delete_retention_ms=args.delete_retention_ms,
    )

    async def run() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await serve(settings)
        except asyncio.CancelledError:
            logging.getLogger(__name__).info("logbroker stopped")

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
