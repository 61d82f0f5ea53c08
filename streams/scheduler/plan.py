"""`POST /plan/`: where a job would go now, without submitting it (`gpuflow submit --dry-run`).

Like `sbatch --test-only`: the worker runs its router and placer on its current state and
reserves nothing, sends nothing. The answer names the placement the worker would make now (the
router's region order, spilling over as the placer would), the best alternatives by region and
GPU model with their score breakdown, and for each GPU model that cannot take the job the first
reason it gives. With several workers, each plans over the regions it owns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from infra.jobspec import job_problems
from scorer import JobSpec, PlacementResult, memory_need
from scorer.errors import InvalidSpecError
from streams.scheduler.convert import assignment_records, job_spec
from streams.scheduler.protocols import Ranks
from streams.scheduler.routing import ranked_regions

__all__ = ["PLAN_PATH", "plan_job", "register_plan_page"]

PLAN_PATH = "/plan/"
ALTERNATIVES = 3


def plan_job(scheduler: Ranks, record: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
    """(HTTP status, answer) for a JobSubmitted record; nothing is reserved or sent."""
    problems = job_problems(record)
    if problems:
        return 400, {"error": f"bad job spec: {problems[0]}"}
    try:
        job = job_spec(record)
    except InvalidSpecError as exc:
        return 400, {"error": f"bad job spec: {exc}"}
    state = scheduler.state
    ranked = ranked_regions(scheduler, job)
    regions = [r for r, _ in ranked if r in state.regions]
    # one scoring cycle over every node this worker holds: the scores compare
    options = {
        (str(r.region), str(r.gpu_model)): _option(scheduler, job, r)
        for r in scheduler.placer.options(job)
        if not job.allowed_regions or r.region in job.allowed_regions
    }
    choice = _first_placement(scheduler, job, regions)
    if choice is not None and (choice["region"], choice["gpu_model"]) in options:
        same = options.pop((choice["region"], choice["gpu_model"]))
        choice.update(score=same["score"], score_breakdown=same["score_breakdown"])
    need = memory_need(job)
    return 200, {
        "job_id": job.job_id,
        "submitted": False,
        "memory_per_gpu_mib": need.mib if job.min_gpu_memory_mib <= 0 else job.min_gpu_memory_mib,
        "memory_parts_mib": {k: round(v / 2**20) for k, v in need.parts().items()},
        "regions_ranked": [(r, score) for r, score in ranked if r in state.regions],
        "placement": choice,
        "outcome": "PLACED" if choice else _not_now(scheduler, job, regions),
        "alternatives": list(options.values())[:ALTERNATIVES],
        "refused": _refused(scheduler, job, regions, {m for _, m in options} | _model(choice)),
    }


def _model(choice: Mapping[str, Any] | None) -> set[str]:
    return {str(choice["gpu_model"])} if choice else set()


def _first_placement(scheduler: Ranks, job: JobSpec, regions: list[str]) -> dict[str, Any] | None:
    """The worker's own path: regions in the router's order, the first that places wins."""
    for region in regions:
        result = scheduler.placer.place(job, region)
        if result.placed:
            return _option(scheduler, job, result)
    return None


def _not_now(scheduler: Ranks, job: JobSpec, regions: list[str]) -> str:
    """QUEUED when some region could host the job once capacity frees, else REJECTED."""
    for region in regions:
        if not scheduler.placer.place(job, region).never_fits:
            return "QUEUED"
    return "REJECTED"


def _refused(
    scheduler: Ranks, job: JobSpec, regions: list[str], placeable: set[str]
) -> dict[str, str]:
    """For each GPU model that can take the job nowhere now, the first reason it gives (in the
    router's best region that has the model). Models outside `allowed_gpu_models` are left out."""
    state = scheduler.state
    allowed = {state.catalog.canonical(m) for m in job.allowed_gpu_models}
    reasons: dict[str, str] = {}
    for region in regions:
        present = {state.models[int(m)] for m in state.model[state.slots(region)]}
        for model in sorted(present - placeable - set(reasons)):
            if allowed and state.catalog.canonical(model) not in allowed:
                continue
            one = dataclasses.replace(job, allowed_gpu_models=(model,))
            result = scheduler.placer.place(one, region)
            # the gpu_model filter only refuses the other models here: not this model's reason
            own = [r for r in result.reasons if not r.startswith("gpu_model:")]
            if not result.placed and own:
                reasons[model] = own[0]
    return dict(sorted(reasons.items()))


def _option(scheduler: Ranks, job: JobSpec, result: PlacementResult) -> dict[str, Any]:
    spec = scheduler.state.catalog.get(result.gpu_model or "")
    hours = result.expected_duration_s / 3600 if result.expected_duration_s else None
    return {
        "region": result.region,
        "gpu_model": result.gpu_model,
        "gpus": result.gpu_total,
        "gpu_milli": job.gpu_milli,
        "assignments": assignment_records(result.assignments),
        "score": result.score,
        "score_breakdown": dict(result.breakdown),
        "peak_tflops": spec.peak_tflops(job.precision) if spec else None,
        "expected_throughput": result.expected_throughput,
        "expected_duration_s": result.expected_duration_s,
        "price_per_hour": result.price_per_hour,
        "expected_cost_usd": round(result.price_per_hour * hours, 2)
        if hours is not None and result.price_per_hour is not None
        else None,
    }


def register_plan_page(app: Any, scheduler: Ranks) -> None:
    """Add POST /plan/ to a Faust app (runs on the event loop: it reads live state)."""
    from faust.web import Request, Response, View

    @app.page(PLAN_PATH)
    class PlanPage(View):
        async def post(self, request: Request) -> Response:
            try:
                body = await request.json()
            except ValueError:
                return self.json({"error": "body is not JSON"}, status=400)
            job = body.get("job") if isinstance(body, Mapping) else None
            if not isinstance(job, Mapping):
                return self.json({"error": 'expected JSON {"job": {...}}'}, status=400)
            status, answer = plan_job(scheduler, job)
            return self.json(answer, status=status)
