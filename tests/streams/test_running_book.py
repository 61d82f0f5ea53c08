"""The running book's sums equal a walk over every running job, whatever changes it."""

from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from streams.scheduler.running_book import RunningBook
from streams.scheduler.tenancy import Running, Tenancy


def run(job_id: str, tenant: str, region: str, milli: int) -> Running:
    return Running(
        job_id=job_id, tenant=tenant, region=region, gpu_class="A", priority=0,
        class_name="batch", preemptible=True, protected=False, milli=milli, gpus=milli // 1000,
        cpu_milli=0, memory_mib=0, started_ms=0, expected_end_ms=0.0, checkpoint_ms=0,
        checkpoint_interval_s=0,
    )  # fmt: skip


def walked(t: Tenancy) -> dict[tuple[str, str, str], int]:
    """Usage as it was computed before the book: a walk over `holding()`."""
    out: dict[tuple[str, str, str], int] = {}
    for r in t.holding():
        cell = (r.tenant, r.region, r.gpu_class)
        out[cell] = out.get(cell, 0) + r.milli
    return out


def by_id(r: Running) -> str:
    return r.job_id


ops = st.lists(
    st.tuples(
        st.sampled_from(("book", "forget", "leave", "stay", "claim", "unclaim", "clear")),
        st.integers(0, 7),  # job
        st.sampled_from(("t0", "t1")),
        st.sampled_from(("eu", "us")),
        st.sampled_from((0, 250, 1000, 4000)),  # milli: 0 is a CPU-only job
    ),
    max_size=40,
)


@example(ops=[("book", 1, "t0", "eu", 0), ("book", 0, "t0", "eu", 0),
              ("book", 0, "t0", "us", 0), ("book", 1, "t0", "us", 0)])  # fmt: skip
@given(ops=ops)
def test_usage_and_regions_match_a_walk_over_every_job(
    ops: list[tuple[str, int, str, str, int]],
) -> None:
    t = Tenancy(state=None)  # type: ignore[arg-type]  # usage needs no cluster state
    leaving: dict[str, str] = {}
    t.leaving = leaving
    for op, i, tenant, region, milli in ops:
        job = f"j{i}"
        if op == "book":
            t.running[job] = run(job, tenant, region, milli)  # new, or replaced in place
        elif op == "forget":
            t.running.pop(job, None)
        elif op == "leave":
            leaving[job] = "p"
        elif op == "stay":
            leaving.pop(job, None)
        elif op == "claim":
            t.claims[f"c{i}"] = run(f"c{i}", tenant, region, milli)
        elif op == "unclaim":
            t.claims.pop(f"c{i}", None)
        else:
            t.running.clear()
        assert t.usage() == walked(t)
        for r in ("eu", "us"):  # the same jobs; a job re-booked into another region comes
            # last there, where the dict keeps its first position (order is never relied on)
            assert sorted(t.holding_in(r), key=by_id) == sorted(
                (h for h in t.holding() if h.region == r), key=by_id
            )
        again = copy.deepcopy(t.running)
        assert again.cells == t.running.cells and dict(again) == dict(t.running)


def test_copies_and_pickles_rebuild_the_sums() -> None:
    book = RunningBook()
    book["a"] = run("a", "t0", "eu", 1000)
    book["b"] = run("b", "t0", "eu", 250)
    for other in (copy.copy(book), copy.deepcopy(book), pickle.loads(pickle.dumps(book))):
        assert other.cells == {("t0", "eu", "A"): [2, 1250]}
        assert [r.job_id for r in other.in_region("eu")] == ["a", "b"]


def test_mutators_that_would_skip_the_sums_are_refused() -> None:
    book = RunningBook()
    with pytest.raises(TypeError, match="changes only by item"):
        book.update({"a": run("a", "t0", "eu", 1000)})
    with pytest.raises(TypeError):
        book.setdefault("a", run("a", "t0", "eu", 1000))
    with pytest.raises(KeyError):
        del book["missing"]
