"""Invariants under random fleets, jobs and event orders (hypothesis), on the real scheduler:

- a preemption never evicts a non-preemptible job, never for an equal or lower priority
  (without quotas), and always a whole gang: the decision names every GPU the victim holds;
- once the victims are gone the preemptor is placed, and no GPU is promised twice (logs);
- a tenant never holds more than nominal + borrowing limit (nominal alone without a cohort),
  and its non-preemptible jobs never more than nominal, whatever arrives, finishes or is
  evicted.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorer import JobSpec
from scorer.tenancy import DEFAULT_CLASSES, nominal_of, resolve_priority

CLASSES = [c.name for c in DEFAULT_CLASSES]

jobs_st = st.lists(
    st.tuples(
        st.sampled_from(("t0", "t1", "t2")),
        st.sampled_from(CLASSES),
        st.booleans(),  # preemptible (asked protection when False)
        st.sampled_from((1, 2, 4, 8)),
        st.integers(0, 900),  # seconds since the previous job
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.sampled_from((4, 8)), min_size=1, max_size=3),
    running=jobs_st,
    preemptor=st.tuples(st.sampled_from(CLASSES), st.sampled_from((1, 2, 4, 8))),
)
def test_preemption_invariants(
    world: Any, make_node: Any, overlaps: Any, sizes: list[int], running: list[Any], preemptor: Any
) -> None:
    w = world(*(make_node(f"n{i}", gpus=g) for i, g in enumerate(sizes)))
    specs: dict[str, dict[str, Any]] = {}
    for i, (tenant, cls, preemptible, gpus, gap) in enumerate(running):
        w.advance(gap)
        specs[f"j{i}"] = {"tenant": tenant, "priority_class": cls, "preemptible": preemptible,
                          "gpu_count": gpus, "checkpoint_interval_s": 300}  # fmt: skip
        w.submit(f"j{i}", **specs[f"j{i}"])
    held = {job: w.s.state.reservation(job) for job in specs}
    cls, gpus = preemptor
    w.advance(60)
    specs["p"] = {"tenant": "tp", "priority_class": cls, "gpu_count": gpus}
    w.submit("p", **specs["p"])

    def priority(job_id: str) -> Any:
        resolved = resolve_priority(JobSpec(job_id, **specs[job_id]), DEFAULT_CLASSES)
        assert not isinstance(resolved, str)
        return resolved

    for d in w.preemptions():
        victim, mine = priority(d["job_id"]), priority(d["for_job_id"])
        assert victim.preemptible and victim.value < mine.value
        whole = sorted((a.node_id, g) for a in held[d["job_id"]] or () for g in a.gpu_indices)
        named = sorted((a["node_id"], g) for a in d["victim_assignments"] for g in a["gpu_indices"])
        assert named == whole
    for d in w.preemptions():
        w.report(d["job_id"], "EVICTED")
    for preemptor in {d["for_job_id"] for d in w.preemptions()}:
        assert w.placed(preemptor), f"{preemptor} is placed once its victims are gone"
    assert overlaps(w) == []


COHORT_ST = st.fixed_dictionaries(
    {
        "A": st.tuples(st.integers(0, 8), st.one_of(st.none(), st.integers(0, 6))),
        "B": st.tuples(st.integers(0, 8), st.one_of(st.none(), st.integers(0, 6))),
        "C": st.tuples(st.integers(0, 4), st.none()),
    }
)
OPS_ST = st.lists(
    st.one_of(
        st.tuples(
            st.just("submit"),
            st.sampled_from("ABC"),
            st.sampled_from(CLASSES),
            st.sampled_from((1, 1, 2, 4)),
        ),
        st.tuples(st.just("finish"), st.integers(0, 50)),
        st.tuples(st.just("tick"), st.integers(1, 120)),
    ),
    min_size=1,
    max_size=30,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(quotas=COHORT_ST, ops=OPS_ST)
def test_no_tenant_exceeds_nominal_plus_borrowing_limit(
    world: Any, make_node: Any, quotas: dict[str, Any], ops: list[Any]
) -> None:
    tenants = {
        t: {
            **({"cohort": "c"} if t != "C" else {}),
            "quotas": [{"nominal": n, **({} if lim is None else {"borrowing_limit": lim})}],
        }
        for t, (n, lim) in quotas.items()
    }
    w = world(make_node("n1"), make_node("n2"), policy={"tenants": tenants})
    policy = w.s.tenancy.policy
    n = 0
    for op in ops:
        if op[0] == "submit":
            _, tenant, cls, gpus = op
            w.submit(f"j{n}", tenant=tenant, priority_class=cls, gpu_count=gpus)
            n += 1
        elif op[0] == "finish" and w.s.tenancy.running:
            running = sorted(w.s.tenancy.running)
            w.report(running[op[1] % len(running)], "FINISHED")
        else:
            w.tick(op[1] if op[0] == "tick" else 1)
        for d in w.preemptions():  # a prompt executor: every victim stops at once
            entry = w.s.reservations.get(d["job_id"]) or {}
            if not entry.get("released") and entry.get("epoch") == d["victim_epoch"]:
                w.report(d["job_id"], "EVICTED")
        usage = w.s.tenancy.usage()
        for t, (nominal, limit) in quotas.items():
            used = usage.get((t, "eu", "A100-80"), 0)
            assert nominal_of(policy, t, "eu", "A100-80") == nominal * 1000
            cap = nominal if t == "C" else nominal + (limit if limit is not None else 16)
            assert used <= cap * 1000, (t, used, cap)
            protected = sum(
                r.milli for r in w.s.tenancy.running.values() if r.tenant == t and not r.preemptible
            )
            assert protected <= nominal * 1000, (t, protected, nominal)
