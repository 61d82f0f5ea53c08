"""The repository stands alone: a copy of its tracked files with nothing beside it works.

A user's clone has no `../shared`: nothing tracked may reach outside the repository, and the
tests run from a copy in an empty folder, importing the copy (not this checkout).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# a path out of the repository: ../shared, or this machine's work folders
OUTSIDE = re.compile(r"\.\./shared|/work/(main|wt|shared|notes)\b")
TEXT = {".py", ".md", ".toml", ".yaml", ".yml", ".json", ".avsc", ".sql", ".csv", ".txt", ""}


def tracked() -> list[str]:
    assert (REPO / ".git").exists(), "run from a git checkout: the tracked files are the repo"
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if (REPO / line).is_file()]


def test_nothing_tracked_reaches_outside_the_repository() -> None:
    offenders = []
    for name in tracked():
        path = REPO / name
        if path.suffix not in TEXT or name == "tests/test_standalone.py":
            continue
        for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{name}:{i}: {line.strip()[:100]}")
    assert not offenders, "\n".join(offenders)


def test_a_copy_with_nothing_beside_it_runs_its_tests(tmp_path: Path) -> None:
    clone = tmp_path / "alone" / "gpuflow"  # `alone` holds nothing else: no ../shared
    for name in tracked():
        target = clone / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    env = {**os.environ, "PYTHONPATH": str(clone)}
    where = subprocess.run(
        [sys.executable, "-c", "import scorer, schemas, agents; print(scorer.__file__)"],
        cwd=clone, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert where.stdout.strip().startswith(str(clone))  # the copy, not this checkout
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         "tests/scorer", "tests/schemas", "tests/agents/test_fleet.py",
         "tests/gpuflow/test_replay_engine.py"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(r"\d+ passed", proc.stdout) and "failed" not in proc.stdout
