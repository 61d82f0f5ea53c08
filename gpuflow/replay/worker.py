"""`python -m gpuflow.replay.worker`: the real stream worker, with the replay's placer preset.

The worker builds `Placer(state, throughput=...)` (the gpuflow preset; the measured table
comes from `worker.throughput_csv`); a replay of another policy needs the same preset as the
in-process engine, so this entry point swaps the placer factory for `make_placer(policy)`
(GPUFLOW_REPLAY_POLICY) and runs the unchanged worker. A `worker.policy` knob would replace it.
"""

from __future__ import annotations

import os

__all__ = ["main"]


def main() -> None:
    import streams.app
    from scorer import ClusterState, Placer, ThroughputModel, make_placer
    from streams.worker import main as worker_main

    policy = os.environ.get("GPUFLOW_REPLAY_POLICY", "gpuflow")

    def placer(state: ClusterState, throughput: ThroughputModel | None = None) -> Placer:
        return make_placer(policy, state, throughput=throughput)

    streams.app.Placer = placer  # type: ignore[assignment,misc]
    worker_main()


if __name__ == "__main__":
    main()
