"""A small CPU training loop that follows gpuflow's checkpoint contract (docs/agents.md).

It fits y = 3x - 1 by SGD, one mini-batch a step, and checkpoints every `--every` steps and
whenever it is asked to stop (the executor's checkpoint signal, SIGUSR1 by default, or
SIGTERM): then it saves at the end of the step it is in and exits, so a resumed run does every
step exactly once. With `--steps-file` it appends each completed step's number to that file.

    gpuflow submit --gpus 1 -- python examples/train_counting.py --steps 60 --step-s 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

# the checkpoint contract, three lines: where, resume, report
CKPT = Path(os.environ.get("GPUFLOW_CHECKPOINT_DIR", ".")) / "train_counting.json"
RESUME = bool(os.environ.get("GPUFLOW_RESUME")) and CKPT.exists()
PROGRESS = Path(os.environ.get("GPUFLOW_PROGRESS_FILE", os.devnull))

stop_requested = False


def _ask_stop(signum: int, _frame: object) -> None:
    global stop_requested
    stop_requested = True


def save(state: dict, total: int) -> None:
    tmp = CKPT.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, CKPT)  # the checkpoint is whole or not there
    PROGRESS.write_text(f"{state['step'] / total:.6f}")  # then: "saved, progress p"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--step-s", type=float, default=0.25)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--steps-file", type=Path)
    args = ap.parse_args()
    signal.signal(signal.SIGUSR1, _ask_stop)
    signal.signal(signal.SIGTERM, _ask_stop)
    state = json.loads(CKPT.read_text()) if RESUME else {"step": 0, "w": 0.0, "b": 0.0, "seed": 7}
    epoch = os.environ.get("GPUFLOW_EPOCH", "-")
    print(
        f"epoch {epoch}: {'resuming at step' if RESUME else 'starting at step'} {state['step']}"
        f" on GPUs {os.environ.get('CUDA_VISIBLE_DEVICES', '-')}",
        flush=True,
    )
    rng = random.Random(state["seed"] + state["step"])
    while state["step"] < args.steps:
        xs = [rng.uniform(-1, 1) for _ in range(32)]
        grad_w = sum((state["w"] * x + state["b"] - (3 * x - 1)) * x for x in xs) / len(xs)
        grad_b = sum(state["w"] * x + state["b"] - (3 * x - 1) for x in xs) / len(xs)
        state["w"] -= 0.5 * grad_w
        state["b"] -= 0.5 * grad_b
        time.sleep(args.step_s)
        state["step"] += 1
        if args.steps_file:
            with open(args.steps_file, "a") as f:
                f.write(f"{state['step']}\n")
        loss = sum((state["w"] * x + state["b"] - (3 * x - 1)) ** 2 for x in xs) / len(xs)
        print(f"step {state['step']} loss {loss:.5f}", flush=True)
        if stop_requested:
            save(state, args.steps)
            print(f"checkpointed at step {state['step']}, stopping", flush=True)
            return 0
        if state["step"] % args.every == 0:
            save(state, args.steps)
    save(state, args.steps)
    print(f"done: w={state['w']:.3f} b={state['b']:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
