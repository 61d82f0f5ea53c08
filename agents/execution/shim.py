"""The tiny wrapper every job runs under: `python -I -S .../shim.py EPOCH_DIR -- ARGV`.

The executor starts it as the leader of a new session (so the job's whole process group can be
signalled); the shim starts the command, waits for it and writes its exit status to the epoch's
`exit.json`, so the status survives an executor that is dead or restarting. Signals sent to the
group reach the command directly; the shim itself ignores them (not SIG_IGN, which the command
would inherit) and lives until the command ends. Only SIGKILL ends it early.

It imports nothing but the standard library (run by path, isolated, without site): a shim
costs one small interpreter start per job, not gpuflow's imports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_CAUGHT = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGQUIT,
)


def write_json(path: Path, data: Any) -> None:
    """As agents.execution.journal.write_json: a temp file, then an atomic rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: shim.py EPOCH_DIR -- COMMAND...\n")
        return 2
    epoch_dir, command = Path(argv[0]), argv[2:]
    for sig in _CAUGHT:
        signal.signal(sig, lambda *_: None)
    try:
        child = subprocess.Popen(command)  # stdio, cwd and env are the shim's own
    except OSError as exc:
        write_json(
            epoch_dir / "exit.json",
            {"launch_error": f"{command[0]}: {exc.strerror}", "ended_ms": int(time.time() * 1000)},
        )
        return 127
    while True:
        try:
            code = child.wait()
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
    write_json(epoch_dir / "exit.json", {"exit_code": code, "ended_ms": int(time.time() * 1000)})
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main(sys.argv[1:]))
