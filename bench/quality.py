"""Policy quality on Gavel-recipe traces: gpuflow against fifo, bestfit, fgd, gavel-like and gavel.

    .venv/bin/python bench/quality.py [--jobs 1000] [--lams 600,300,230,180] [--seeds 0,1,2]
                                      [--static-jobs 100] [--out FILE]

Cluster: Gavel's 36 V100 + 36 P100 + 36 K80 as 9 servers x 4 GPUs per model, listed
round-robin (so first fit is blind to the model). Jobs: `agents.replay.generate.gavel_jobs`
(26 job types, 1-4 h on a V100, 70/10/20 % of the distributed models on 1/2/4 GPUs), run times
from Gavel's table (`scorer/data/`). Scenarios: `static` (`--static-jobs` jobs all at t=0, as
Gavel's static traces) and Poisson arrivals of mean gap `lam` seconds (`--jobs` jobs each).
Every policy runs the same traces (in-process engine, the worker's own scheduler; `gavel` is
Gavel's round-based max-min fairness with its LP, `gpuflow/replay/gavel.py`).

For every scenario it computes from the traces the no-queueing bound (every job alone on its
fastest model: no schedule beats it, so fifo / bound is the most any policy can gain over
fifo), and for the static scenario the capacity lower bound (`gpuflow/replay/bounds.py`: a
linear-program relaxation on the real capacity, preemption and moves free). Then every
non-round policy once more with `--arrivals-only` on Gavel's mix and on a share mix (jobs never
finish: allocation at the first refusal and at the end). Writes bench/results/quality.json.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from agents.replay import Trace, gavel_cluster, gavel_jobs
from agents.replay.generate import SHARE_MIX, share_mix_jobs
from bench._common import write_result
from gpuflow.replay import replay_policy, summarize
from gpuflow.replay.bounds import capacity_lower_bound, no_queueing_bound
from scorer import gavel_throughputs

POLICIES = ("fifo", "bestfit", "fgd", "gavel-like", "gavel", "gpuflow")
PACKING_POLICIES = ("fifo", "bestfit", "fgd", "gavel-like", "gpuflow")
KEYS = (
    "avg_jct_s",
    "p50_jct_s",
    "p99_jct_s",
    "avg_wait_s",
    "makespan_s",
    "gpu_alloc_rate",
    "gpu_hours",
    "migrations",
    "preemptions",
    "cost",
    "carbon_kg",
)


def _mean(summaries: list[dict[str, Any]], key: str) -> float:
    return float(np.mean([s[key] for s in summaries if s.get(key) is not None]))


def run_load(traces: list[Trace], policies: tuple[str, ...], arrivals_only: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for policy in policies:
        started = time.perf_counter()
        summaries = [
            summarize(
                replay_policy(t, policy, arrivals_only=arrivals_only),
                policy=policy,
                engine="inprocess",
            )
            for t in traces
        ]
        keys = ("first_refusal_alloc_rate", "final_alloc_rate") if arrivals_only else KEYS
        out[policy] = {k: _mean(summaries, k) for k in keys}
        out[policy]["completed"] = sum(s["completed"] for s in summaries)
        out[policy]["replay_wall_s"] = round(time.perf_counter() - started, 1)
        print(f"  {policy}: {out[policy].get('avg_jct_s', 0) / 3600:.3f} h", flush=True)
    return out


def scenario(traces: list[Trace], capacity_bound: bool = False) -> dict[str, Any]:
    res = run_load(traces, POLICIES, arrivals_only=False)
    bound = float(np.mean([no_queueing_bound(t) for t in traces]))
    fifo, ours = res["fifo"]["avg_jct_s"], res["gpuflow"]["avg_jct_s"]
    row: dict[str, Any] = {
        "policies": res,
        "no_queueing_bound_s": bound,
        "fifo_over_gpuflow_avg_jct": fifo / ours,
        "fifo_over_bound": fifo / bound,  # the most any policy can gain over fifo here
        "gpuflow_over_bound": ours / bound,
        "gpuflow_over_gavel": ours / res["gavel"]["avg_jct_s"],
    }
    if capacity_bound:
        lower = float(np.mean([capacity_lower_bound(t) for t in traces]))
        row["capacity_lower_bound_s"] = lower
        row["capacity_lower_bound_over_bound"] = lower / bound
    return row


def _print(label: str, row: dict[str, Any]) -> None:
    res = row["policies"]
    print(
        f"{label}: bound {row['no_queueing_bound_s'] / 3600:.2f} h  "
        + "  ".join(f"{p}={res[p]['avg_jct_s'] / 3600:.2f}h" for p in POLICIES)
        + f"  fifo/gpuflow {row['fifo_over_gpuflow_avg_jct']:.2f}x (ceiling "
        f"{row['fifo_over_bound']:.2f}x)  gpuflow/bound {row['gpuflow_over_bound']:.3f}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--static-jobs", type=int, default=100)
    ap.add_argument("--lams", default="600,300,230,180")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", help="result file (default bench/results/quality.json)")
    args = ap.parse_args()
    throughput = gavel_throughputs()
    nodes = gavel_cluster()
    seeds = [int(s) for s in args.seeds.split(",")]
    started = time.perf_counter()
    print(f"static: {args.static_jobs} jobs at t=0", flush=True)
    static = scenario(
        [Trace(nodes, gavel_jobs(throughput, args.static_jobs, 0.0, seed=s), throughput)
         for s in seeds],
        capacity_bound=True,
    )  # fmt: skip
    _print("static", static)
    loads: dict[str, Any] = {"static": static}
    for lam in (float(x) for x in args.lams.split(",")):
        print(f"lam={lam:g}s: {args.jobs} jobs", flush=True)
        traces = [Trace(nodes, gavel_jobs(throughput, args.jobs, lam, seed=s), throughput)
                  for s in seeds]  # fmt: skip
        loads[f"lam_{lam:g}s"] = row = scenario(traces)
        _print(f"lam={lam:g}s", row)

    big = gavel_cluster(per_model=168, gpus_per_node=8)
    big_gpus = sum(n.gpu_count for n in big)
    packed = [Trace(nodes, gavel_jobs(throughput, 400, 60.0, seed=s), throughput) for s in seeds]
    shares = [Trace(big, share_mix_jobs(throughput, 1.2 * big_gpus, seed=s), throughput)
              for s in seeds]  # fmt: skip
    frag = run_load(packed, PACKING_POLICIES, arrivals_only=True)
    frag_shares = run_load(shares, PACKING_POLICIES, arrivals_only=True)
    for label, res in (("gavel mix", frag), ("share mix", frag_shares)):
        for p in PACKING_POLICIES:
            first, final = res[p]["first_refusal_alloc_rate"], res[p]["final_alloc_rate"]
            print(f"arrivals-only {label} {p}: first refusal {first:.1%}, final {final:.1%}")
    result = write_result(
        "quality",
        {
            "cluster": "36 V100-16 + 36 P100 + 36 K80 (9 x 4-GPU servers per model, round-robin)",
            "jobs_per_trace": args.jobs,
            "static_jobs_per_trace": args.static_jobs,
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
    print(f"wrote {result}")


if __name__ == "__main__":
    main()
