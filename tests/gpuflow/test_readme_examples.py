"""Every command block of the README runs as shown, and its output has the shape it promises.

The blocks are read from README.md itself, so the page cannot drift: a command this file has
no shape for fails the test. `.venv/bin/gpuflow` and `.venv/bin/python` run as this
interpreter (the test's venv is the README's). The "while it runs" block runs against a live
`gpuflow up`, as a reader would; so does docs/events.md's Python example.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"```bash\n(.*?)```", README, re.S)
pytestmark = pytest.mark.integration


def commands(block: str) -> list[str]:
    """The block's command lines (continuations joined, trailing comments kept for bash)."""
    return [c.strip() for c in block.replace("\\\n", " ").splitlines() if c.strip()]


def as_run(command: str) -> str:
    tools = {"gpuflow": f'"{sys.executable}" -m gpuflow', "python": f'"{sys.executable}"'}
    return re.sub(r"(?<![\w/])\.venv/bin/(gpuflow|python)\b", lambda m: tools[m[1]], command)


def run(command: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUFLOW_WORKER_WEB_PORT": "0", "COLUMNS": "160"}
    return subprocess.run(["bash", "-c", as_run(command)], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout)  # fmt: skip


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A reader's working directory: the repository's examples, nothing else."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    return tmp_path


@dataclass(frozen=True)
class Shape:
    """What one README command must print: a regex over its stdout and the exit codes."""

    command: str  # regex matched against the README line
    output: str  # regex searched in stdout (MULTILINE)
    exit_codes: tuple[int, ...] = (0,)


DECISION = r"^(PLACED|QUEUED|REJECTED) +\S+"
QUEUE_HEADER = r"^(us-east|us-west|eu-west|ap-southeast): \d+ of \d+ GPUs free, \d+ waiting"
WHILE_IT_RUNS = (
    Shape(r"submit examples/job\.yaml", r"^(PLACED|QUEUED) +llama13b-finetune-001 "),
    Shape(
        r"--precision BF16$",
        r"^REJECTED .*memory: needs 139 GiB per GPU, H100 has 79\.6 GiB; fits on 16 GPUs, "
        r"with optimizer offload, or with LoRA",
        (1,),
    ),
    Shape(r"--finetune LORA$", r"^(PLACED|QUEUED) +job-\w+ "),
    Shape(
        r"submit --dry-run",
        r"^DRY RUN job-\w+  \(nothing was submitted\)\nmemory +needs [\d.]+ GiB per GPU .*\n"
        r"(would go  \S+ \S+ x8  score \d+  [\d.]+ TFLOPS BF16  .*\$[\d,.]+/h|would be QUEUED)",
    ),
    Shape(r"watch placement --count 5", rf"{DECISION}.*\n" * 4 + DECISION),
    Shape(r"gpuflow topics", r"gpuflow\.jobs\.submitted .*JobSubmitted"),
    Shape(r'gpuflow sql "SELECT region', r"│ (us-east|us-west|eu-west|ap-southeast) +│ +\d+ │"),
    Shape(r"top --once", r"GPUs by region and model[\s\S]*Last decisions"),
    Shape(r"gpuflow schemas\b", r"JobSubmitted .* [0-9a-f]{16} .* [0-9a-f]{16}"),
    Shape(r"gpuflow queue\b", QUEUE_HEADER),
    # preemptions come only when a job finds victims: the watch itself must answer and stop
    Shape(r"watch preemption --timeout 5", r"\A(.*\n)*\Z"),
    Shape(r"gpuflow jobs --tenant nlp", r"^JOBID +TENANT +STATE +REGION +GPUS[\s\S]*llama13b"),
    Shape(r"gpuflow status llama13b", r"^llama13b-finetune-001 +[A-Z]+ +tenant nlp[\s\S]*EPOCH"),
    # the job may have finished meanwhile (its run on the twin is scaled): then it says so, exit 1
    Shape(
        r"gpuflow cancel llama13b",
        r"^llama13b-finetune-001: (cancel requested|already [A-Z]+)",
        (0, 1),
    ),
)


def shape_of(command: str, shapes: tuple[Shape, ...]) -> Shape:
    found = [s for s in shapes if re.search(s.command, command)]
    assert len(found) == 1, f"README command without exactly one checked shape: {command}"
    return found[0]


def test_the_blocks_are_the_ones_this_test_knows() -> None:
    assert len(BLOCKS) == 7, "a README block was added or removed: give it a shape here"
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert commands(BLOCKS[1]) == [ci]  # the README's test command is what CI runs
    install = 'python3 -m venv .venv && .venv/bin/pip install -q -e ".[dev]"'
    assert commands(BLOCKS[0])[0].startswith(install) and ci.startswith(install)


def test_demo_block_runs_as_shown(workdir: Path) -> None:
    (command,) = commands(BLOCKS[0])
    up = command.rsplit(" && ", 1)[1]  # the venv and install steps are CI's own first steps
    assert up == ".venv/bin/gpuflow up --duration 60"
    proc = run(up, workdir, timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert re.search(r"^gpuflow broker 127\.0\.0\.1:\d+ \(embedded logbroker\)  worker pid \d+  "
                     r"400 nodes in 4 regions",
                     out, re.M)  # fmt: skip
    assert len(re.findall(r"^PLACED +job\d+-0-\d{6} +-> \S+ \S+x\d+ ", out, re.M)) >= 20, out[
        -3000:
    ]
    assert "Placements and utilisation by region and GPU model" in out
    for region in ("us-east", "us-west", "eu-west", "ap-southeast"):
        assert re.search(rf"│ {region} +│ all +│", out), region
    assert re.search(r"largest region: \S+ with \d+ % of [\d,]+ placements; ", out)
    assert re.search(r"^done in \d+s: .*placed \d+", out, re.M)
    assert not (workdir / "gpuflow-data" / "stack.json").exists()


def test_policy_block_runs_as_shown(workdir: Path) -> None:
    check, up = commands(BLOCKS[4])
    proc = run(check, workdir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^priority classes: online-inference 1000 \(not preemptible\)", proc.stdout,
                     re.M)  # fmt: skip
    assert re.search(r"^ *nlp +research +2 +us-east +hopper +16 ", proc.stdout, re.M)
    proc = run(up.split("#")[0].strip(), workdir, timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert re.search(r"^(PLACED|QUEUED) +job\d+-0-\d{6} ", out, re.M), out[-3000:]
    assert re.search(r"^done in \d+s: ", out, re.M), out[-3000:]


def test_forecast_block_runs_as_shown(workdir: Path) -> None:
    backtest, plot = commands(BLOCKS[3])
    proc = run(backtest, workdir)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    scores = json.loads(proc.stdout)
    assert {s["model"] for s in scores} >= {
        "seasonal_naive", "holt_winters", "lstm", "prophet", "selected"
    }  # fmt: skip
    proc = run(plot, workdir)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert re.search(r"^demand\.csv: 720 points every 3600 s", proc.stderr, re.M)  # the summary
    assert len(re.findall(r"^│ 2025-04-1\dT\d\d:00:00Z │", proc.stdout, re.M)) == 24
    assert (workdir / "demand.png").stat().st_size > 0


def test_replay_block_runs_as_shown(workdir: Path) -> None:
    (command,) = commands(BLOCKS[5])
    proc = run(command, workdir)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "trace replay" in proc.stdout and re.search(r"│ gpuf\S* +│ +200 │", proc.stdout)
    summary = json.loads((workdir / "replay-out" / "summary.json").read_text())
    assert set(summary["policies"]) == {"fifo", "bestfit", "fgd", "gpuflow"}


def test_packing_block_runs_as_shown(workdir: Path) -> None:
    generate, replay = commands(BLOCKS[6])
    for command in (generate, replay):
        proc = run(command, workdir)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads((workdir / "packing-out" / "summary.json").read_text())
    assert set(summary["policies"]) == {"fifo", "bestfit", "fgd", "gpuflow"}
    for figures in summary["policies"].values():
        assert figures["arrivals_only"] and 50 < figures["alloc_at_130_pct"] <= 100


def _ready(workdir: Path) -> bool:
    stack = workdir / "gpuflow-data" / "stack.json"
    if not stack.is_file():
        return False
    try:
        url = json.loads(stack.read_text())["web"]
        activity = httpx.get(f"{url}/activity/", timeout=2).json()
    except (httpx.HTTPError, ValueError, KeyError):
        return False
    return sum(activity["decisions_total"].values()) >= 5


def test_while_it_runs_block_and_the_events_example(workdir: Path) -> None:
    env = {**os.environ, "GPUFLOW_WORKER_WEB_PORT": "0"}
    stack = subprocess.Popen(
        # the reader's stack; lighter than the demo's defaults so that the commands, which
        # queue behind the generator's jobs on the same worker, answer on a shared machine
        [sys.executable, "-m", "gpuflow", "up", "--quiet", "--nodes", "200", "--rate", "2"],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not _ready(workdir) and time.monotonic() < deadline and stack.poll() is None:
            time.sleep(1)
        assert _ready(workdir), "the stack did not start deciding"
        for command in commands(BLOCKS[2]):
            shape = shape_of(command, WHILE_IT_RUNS)
            proc = run(command, workdir)
            assert proc.returncode in shape.exit_codes, (command, proc.stdout, proc.stderr)
            assert re.search(shape.output, proc.stdout, re.M), (command, proc.stdout[-3000:])
        _events_example(workdir)
    finally:
        stack.send_signal(signal.SIGTERM)
        out, _ = stack.communicate(timeout=120)
    assert stack.returncode == 0, out[-3000:]
    assert "Placements and utilisation by region and GPU model" in out


def _events_example(workdir: Path) -> None:
    """docs/events.md's Python example: the `avro` package publishes a job and reads its
    decision from the live stack."""
    doc = (REPO / "docs" / "events.md").read_text()
    (code,) = re.findall(r"```python\n(# gpuflow: events example.*?)```", doc, re.S)
    schemas = workdir / "schemas-out"
    assert run(f'.venv/bin/gpuflow schemas --out "{schemas}"', workdir).returncode == 0
    info = json.loads((workdir / "gpuflow-data" / "stack.json").read_text())
    env = {**os.environ, "BOOTSTRAP": info["bootstrap_servers"], "SCHEMAS": str(schemas)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env, text=True,
                          capture_output=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert re.match(r"^PLACED \S+ \S+ \[\]$", last), proc.stdout
