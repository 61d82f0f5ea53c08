"""The tiny wrapper every job runs under: `python -I -S .../shim.py EPOCH_DIR -- ARGV`.

The executor starts it as the leader of a new session (so the job's whole process group can be
signalled); the shim starts the command, waits for it and writes its exit status to the epoch's
`exit.json`, so the status survives an executor that is dead or restarting. Signals sent to the
group reach the command directly; the shim itself ignores them (not SIG_IGN, which the command
would inherit) and lives until the command ends. Only SIGKILL ends it early.

It is started once per job, so it is kept to what the interpreter has loaded already (`os`,
`sys`) and builtin modules (`_signal`, `time`): run by path, isolated and without site, it
costs about one bare interpreter start (~10 ms of CPU here). `subprocess`, `signal`, `json`
and `pathlib` would triple that (their imports: enum, threading, re, ...); the exit record is
two integers, written by hand, and `json` is imported only to report a launch error.
"""

from __future__ import annotations

import _signal
import os
import sys
import time

_CAUGHT = (
    _signal.SIGTERM,
    _signal.SIGINT,
    _signal.SIGHUP,
    _signal.SIGUSR1,
    _signal.SIGUSR2,
    _signal.SIGQUIT,
)
# Python ignores these at start; the command gets them back at their defaults, as
# subprocess.Popen(restore_signals=True) does.
_RESTORED = (_signal.SIGPIPE, _signal.SIGXFSZ)


def write_text(path: str, text: str) -> None:
    """As agents.execution.journal.write_json: a temp file, then an atomic rename."""
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _spawn(command: list[str]) -> int:
    """Fork and exec `command` (PATH searched as execvp does); its pid, or OSError when it
    could not be executed. The child learns the exec's failure through a close-on-exec pipe,
    as subprocess does. Not posix_spawn: glibc's leaves its two internal signals ignored in
    the command."""
    r, w = os.pipe()  # both close-on-exec
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child only execs or reports why not
        try:
            for sig in _RESTORED:
                _signal.signal(sig, _signal.SIG_DFL)
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(w, str(exc.errno or 0).encode())
        finally:
            os._exit(127)
    os.close(w)
    try:
        failed = os.read(r, 32)
    finally:
        os.close(r)
    if failed:
        os.waitpid(pid, 0)
        errno = int(failed)
        raise OSError(errno, os.strerror(errno))
    return pid


def _launch_error(exit_path: str, exe: str, exc: OSError) -> int:
    import json  # only on this rare path: its import costs as much as the whole shim

    record = {"launch_error": f"{exe}: {exc.strerror}", "ended_ms": _now_ms()}
    write_text(exit_path, json.dumps(record))
    return 127


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: shim.py EPOCH_DIR -- COMMAND...\n")
        return 2
    exit_path, command = os.path.join(argv[0], "exit.json"), argv[2:]
    for sig in _CAUGHT:
        _signal.signal(sig, _ignore)
    try:  # stdio, cwd and environment are the shim's own
        pid = _spawn(command)
    except OSError as exc:
        return _launch_error(exit_path, command[0], exc)
    _, status = os.waitpid(pid, 0)  # retried after our no-op handlers run (PEP 475)
    code = os.waitstatus_to_exitcode(status)  # negative: killed by that signal
    write_text(exit_path, f'{{"exit_code": {code}, "ended_ms": {_now_ms()}}}')
    return code if code >= 0 else 128 - code


def _ignore(*_: object) -> None:
    return None


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main(sys.argv[1:]))
