"""scorer is the ground floor: it imports no broker, stream, NVML, store or upper package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FORBIDDEN = (
    "streams",
    "infra",
    "agents",
    "gpuflow",
    "schemas",
    "confluent_kafka",
    "faust",
    "aiokafka",
    "pynvml",
    "clickhouse_connect",
    "chdb",
)


def test_scorer_imports_nothing_forbidden(repo: Path) -> None:
    code = (
        "import json, sys, scorer, scorer.policies, scorer.router, scorer.views;"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True
    )
    loaded = json.loads(out.stdout)
    bad = [m for m in loaded if m.split(".")[0] in FORBIDDEN]
    assert bad == [], f"scorer pulled in {bad}"
