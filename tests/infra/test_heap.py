"""trim_heap: pages a thread's burst freed go back to the OS (glibc keeps them otherwise)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# In a fresh interpreter, so pytest's own heap does not blur the figures: a thread allocates
# ~200 MB in 4 KB blocks and keeps one in 64, so its arena cannot shrink from the top by itself.
_BURST = textwrap.dedent(
    """
    import json, os, threading
    from infra.heap import trim_heap

    def rss():
        return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    kept = []
    def burst():
        blocks = [bytearray(4096) for _ in range(50_000)]
        kept.extend(blocks[::64])
    t = threading.Thread(target=burst)
    t.start()
    t.join()
    before = rss()
    trimmed = trim_heap()
    print(json.dumps({"before": before, "after": rss(), "trimmed": trimmed, "kept": len(kept)}))
    """
)


def test_trim_heap_returns_what_a_threads_burst_freed() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _BURST], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    assert figures["trimmed"] is True
    assert figures["kept"] == 782  # the survivors are still there: only free pages went
    freed_mb = (figures["before"] - figures["after"]) / 1e6
    assert freed_mb > 100, figures  # ~200 MB was allocated, 1/64 of it kept
