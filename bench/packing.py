"""Packing as the FGD paper measures it: how full each policy packs a cluster before it refuses.

    .venv/bin/python bench/packing.py [--nodes 250] [--demand 1.5] [--seeds 0,1,2]
                                      [--policies fifo,bestfit,fgd,gpuflow] [--out FILE]

Traces: `gpuflow generate --recipe packing` (`agents/replay/packing.py`: nodes of 0/1/2/4/8 GPUs
of several models plus CPU-only nodes; most jobs ask for one GPU or a share of one, a few
percent for a 2-8 GPU gang on one node, one in seven for no GPU), Poisson arrivals until the
GPU demand reaches `--demand` x capacity. Every policy replays each trace `--arrivals-only`
(each job tried once on arrival, refused if it does not fit; nothing finishes), in-process.

Figures per policy, averaged over the seeds (and per seed): `alloc_at_100_pct` /
`alloc_at_130_pct` (allocated share of GPU capacity, %, when the GPU demand that has arrived
first reaches 100 % / 130 % of capacity), `first_whole_node_refusal_alloc_rate` (allocated
share when a job asking for a whole 8-GPU node is first refused for want of room),
`first_refusal_alloc_rate` and `final_alloc_rate`. Targets (issue 10): gpuflow >= fgd >=
bestfit > fifo on `alloc_at_130_pct`, and gpuflow's first whole-node refusal no earlier than
bestfit's. Writes bench/results/packing.json.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from agents.replay import Trace
from agents.replay.packing import packing_cluster, packing_jobs
from bench._common import write_result
from gpuflow.replay import replay_policy, summarize

KEYS = (
    "alloc_at_100_pct",
    "alloc_at_130_pct",
    "first_whole_node_refusal_alloc_rate",
    "first_refusal_alloc_rate",
    "final_alloc_rate",
)


def _mean(values: list[Any]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return float(np.mean(known)) if known else None


def run_policy(traces: list[Trace], policy: str) -> dict[str, Any]:
    started = time.perf_counter()
    per_seed = []
    for trace in traces:
        summary = summarize(
            replay_policy(trace, policy, arrivals_only=True), policy=policy, engine="inprocess"
        )
        per_seed.append({k: summary.get(k) for k in KEYS})
    out: dict[str, Any] = {k: _mean([s[k] for s in per_seed]) for k in KEYS}
    out["per_seed"] = per_seed
    out["replay_wall_s"] = round(time.perf_counter() - started, 1)
    return out


def targets(res: dict[str, dict[str, Any]]) -> dict[str, bool | None]:
    """The issue's packing targets, met or not (None: a policy it names was not run)."""
    at130 = {p: r["alloc_at_130_pct"] for p, r in res.items()}
    out: dict[str, bool | None] = {}
    if all(p in at130 and at130[p] is not None for p in ("gpuflow", "fgd", "bestfit", "fifo")):
        out["alloc_at_130: gpuflow >= fgd >= bestfit > fifo"] = (
            at130["gpuflow"] >= at130["fgd"] >= at130["bestfit"] > at130["fifo"]
        )
    if "gpuflow" in res and "bestfit" in res:
        ours = res["gpuflow"]["first_whole_node_refusal_alloc_rate"]
        theirs = res["bestfit"]["first_whole_node_refusal_alloc_rate"]
        # None: never refused a whole-node job (as late as it gets)
        out["first whole-node refusal: gpuflow no earlier than bestfit"] = ours is None or (
            theirs is not None and ours >= theirs
        )
    return out


def _fmt(value: float | None, scale: float = 1.0) -> str:
    return "never" if value is None else f"{value * scale:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=250)
    ap.add_argument("--demand", type=float, default=1.5)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--policies", default="fifo,bestfit,fgd,gpuflow")
    ap.add_argument("--out", help="result file (default bench/results/packing.json)")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    started = time.perf_counter()
    traces = []
    for seed in seeds:
        nodes = packing_cluster(args.nodes, seed=seed)
        traces.append(Trace(nodes, packing_jobs(nodes, demand=args.demand, seed=seed)))
    gpus = [t.total_gpus for t in traces]
    jobs = [len(t.jobs) for t in traces]
    print(f"{args.nodes} nodes ({gpus} GPUs), {jobs} jobs, seeds {seeds}", flush=True)
    res: dict[str, dict[str, Any]] = {}
    for policy in policies:
        res[policy] = r = run_policy(traces, policy)
        print(
            f"  {policy:8s} alloc@100% {_fmt(r['alloc_at_100_pct'])} %  "
            f"alloc@130% {_fmt(r['alloc_at_130_pct'])} %  first whole-node refusal at "
            f"{_fmt(r['first_whole_node_refusal_alloc_rate'], 100)} %  first refusal at "
            f"{_fmt(r['first_refusal_alloc_rate'], 100)} %  ({r['replay_wall_s']} s)",
            flush=True,
        )
    met = targets(res)
    for name, ok in met.items():
        print(f"target {name}: {'met' if ok else 'NOT met'}")
    result = write_result(
        "packing",
        {
            "recipe": "packing (agents/replay/packing.py), arrivals-only, in-process engine",
            "nodes": args.nodes,
            "gpus_per_trace": gpus,
            "jobs_per_trace": jobs,
            "demand": args.demand,
            "seeds": seeds,
            "policies": res,
            "targets": met,
            "wall_s": round(time.perf_counter() - started, 1),
        },
        out=args.out,
    )
    print(f"wrote {result}")


if __name__ == "__main__":
    main()
