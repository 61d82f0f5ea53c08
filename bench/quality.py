"""Policy quality on Gavel-recipe traces: gpuflow against fifo, bestfit, fgd and gavel-like.

    .venv/bin/python bench/quality.py [--jobs 1000] [--lams 600,300,230,180] [--seeds 0,1,2]

Cluster: Gavel's 36 V100 + 36 P100 + 36 K80 as 9 servers x 4 GPUs per model, listed
round-robin (so first fit is blind to the model). Jobs: `agents.replay.generate.gavel_jobs`
(Poisson arrivals of mean gap `lam` seconds, 26 job types, 1-4 h on a V100, 70/10/20 % of the
distributed models on 1/2/4 GPUs), run times from Gavel's table (`scorer/data/`).
Each load runs every policy on the same traces (in-process engine, same scheduler code as the
worker), then every policy once more with `--arrivals-only` (jobs never finish: allocation at
the first refusal and at the end, the FGD paper's fragmentation experiment) on Gavel's mix, and on
a bigger cluster (21 x 8-GPU servers per model) with a mix of GPU shares (`SHARE_MIX`).
Writes bench/results/quality.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.replay import Trace, gavel_cluster, gavel_jobs  # noqa: E402
from agents.replay.generate import SHARE_MIX, share_mix_jobs  # noqa: E402
from bench._common import write_result  # noqa: E402
from gpuflow.replay import replay_policy, summarize  # noqa: E402
from scorer import gavel_throughputs  # noqa: E402

POLICIES = ("fifo", "bestfit", "fgd", "gavel-like", "gpuflow")
KEYS = (
    "avg_jct_s",
    "p50_jct_s",
    "p99_jct_s",
    "avg_wait_s",
    "makespan_s",
    "gpu_alloc_rate",
    "gpu_hours",
    "cost",
    "carbon_kg",
)


def _mean(summaries: list[dict[str, Any]], key: str) -> float:
    return float(np.mean([s[key] for s in summaries if s.get(key) is not None]))


def run_load(trace_of: Any, seeds: list[int], arrivals_only: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for policy in POLICIES:
        summaries = [
            summarize(
                replay_policy(trace_of(s), policy, arrivals_only=arrivals_only),
                policy=policy,
                engine="inprocess",
            )
            for s in seeds
        ]
        keys = ("first_refusal_alloc_rate", "final_alloc_rate") if arrivals_only else KEYS
        out[policy] = {k: _mean(summaries, k) for k in keys}
        out[policy]["completed"] = sum(s["completed"] for s in summaries)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--lams", default="600,300,230,180")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", help="result file (default bench/results/quality.json)")
    args = ap.parse_args()
    throughput = gavel_throughputs()
    nodes = gavel_cluster()
    seeds = [int(s) for s in args.seeds.split(",")]
    started = time.perf_counter()
    loads: dict[str, Any] = {}
    for lam in (float(x) for x in args.lams.split(",")):

        def trace_of(seed: int, lam: float = lam) -> Trace:
            return Trace(nodes, gavel_jobs(throughput, args.jobs, lam, seed=seed), throughput)

        res = run_load(trace_of, seeds, arrivals_only=False)
        ratio = res["fifo"]["avg_jct_s"] / res["gpuflow"]["avg_jct_s"]
        loads[f"lam_{lam:g}s"] = {"policies": res, "fifo_over_gpuflow_avg_jct": ratio}
        print(
            f"lam={lam:g}s  fifo/gpuflow avg JCT = {ratio:.2f}x  "
            + "  ".join(f"{p}={res[p]['avg_jct_s'] / 3600:.2f}h" for p in POLICIES)
        )

    def packed(seed: int) -> Trace:
        return Trace(nodes, gavel_jobs(throughput, 400, 60.0, seed=seed), throughput)

    big = gavel_cluster(per_model=168, gpus_per_node=8)
    big_gpus = sum(n.gpu_count for n in big)

    def shares(seed: int) -> Trace:
        return Trace(big, share_mix_jobs(throughput, 1.2 * big_gpus, seed=seed), throughput)

    frag = run_load(packed, seeds, arrivals_only=True)
    frag_shares = run_load(shares, seeds, arrivals_only=True)
    for label, res in (("gavel mix", frag), ("share mix", frag_shares)):
        for p in POLICIES:
            first, final = res[p]["first_refusal_alloc_rate"], res[p]["final_alloc_rate"]
            print(f"arrivals-only {label} {p}: first refusal {first:.1%}, final {final:.1%}")
    path = write_result(
        "quality",
        {
            "cluster": "36 V100-16 + 36 P100 + 36 K80 (9 x 4-GPU servers per model, round-robin)",
            "jobs_per_trace": args.jobs,
            "seeds": seeds,
            "loads": loads,
            "arrivals_only": {
                "gavel_mix": {"jobs_per_trace": 400, "lam_s": 60.0, "policies": frag},
                "share_mix": {
                    "cluster": "168 V100-16 + 168 P100 + 168 K80 as 21 x 8-GPU servers per model",
                    "mix": {f"{g}x{m}m": p for (g, m), p in SHARE_MIX.items()},
                    "demand": "jobs arrive until their GPU demand reaches 120 % of the 504 GPUs",
                    "policies": frag_shares,
                },
            },
            "wall_s": round(time.perf_counter() - started, 1),
        },
        out=args.out,
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
