"""Local executor nodes: `gpuflow agent --execute --simulate` as child processes, for
`gpuflow up --execute`, the tests and bench/executor.py. Each is a real process that can be
stopped (SIGTERM) or killed (SIGKILL: its jobs run on, a restart re-attaches)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from infra.config import Config

__all__ = ["ExecutorNode"]


class ExecutorNode:
    """One simulated node (`gpus` x `model` in `region`) whose executor runs real processes."""

    def __init__(
        self,
        config: Config,
        node_id: str,
        root: Path,
        *,
        region: str = "us-east",
        model: str = "L4",
        gpus: int = 4,
        grace_s: float = 5.0,
    ) -> None:
        self.config, self.node_id, self.root = config, node_id, root
        self.gpus = gpus
        self.args = [
            sys.executable,
            "-m",
            "gpuflow",
            "agent",
            "--execute",
            "--simulate",
            "--node-id",
            node_id,
            "--region",
            region,
            "--gpu-model",
            model,
            "--gpus",
            str(gpus),
            "--hz",
            "2",
            "--data-dir",
            str(root / "data"),
            "--state-dir",
            str(root / node_id),
            "--checkpoint-root",
            str(root / "checkpoints"),
            "--grace",
            str(grace_s),
        ]
        self.log = root / f"{node_id}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        k = self.config.kafka
        return {
            **os.environ,
            "GPUFLOW_KAFKA_BOOTSTRAP_SERVERS": k.bootstrap_servers,
            "GPUFLOW_KAFKA_REGION_ORDER": k.region_order,
            "GPUFLOW_WORKER_APP_ID": self.config.worker.app_id,
        }

    def start(self) -> ExecutorNode:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.args, env=self.env(), stdout=out, stderr=out)
        return self

    def kill(self) -> None:
        """SIGKILL: the executor dies, the jobs it started do not."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""
