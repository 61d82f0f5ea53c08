"""The zone filter: a job naming allowed zones is placed only on nodes of those zones."""

from __future__ import annotations

from dataclasses import replace

from scorer import JobSpec, Placer, build_filter


def _fleet(fleet, node):
    # slots: east/a, east/b, west/a, east (no zone)
    return fleet(
        [
            replace(node("ea", "H100"), region="east", zone="a"),
            replace(node("eb", "H100"), region="east", zone="b"),
            replace(node("wa", "H100"), region="west", zone="a"),
            replace(node("en", "H100"), region="east", zone=""),
        ]
    )


def _mask(context, state, job):
    return [bool(x) for x in build_filter("zone").filter(context(state, job))]


def test_zone_filter_masks(context, fleet, node) -> None:
    state = _fleet(fleet, node)
    assert _mask(context, state, JobSpec("j")) == [True] * 4  # no zones named: any
    assert _mask(context, state, JobSpec("j", allowed_zones=("east/b",))) == [0, 1, 0, 0]
    # a bare zone name matches that zone in every region; region/zone only its own region
    assert _mask(context, state, JobSpec("j", allowed_zones=("a",))) == [1, 0, 1, 0]
    assert _mask(context, state, JobSpec("j", allowed_zones=("west/a", "east/b"))) == [0, 1, 1, 0]
    assert _mask(context, state, JobSpec("j", allowed_zones=("mars/a",))) == [0, 0, 0, 0]


def test_zone_filter_explains(context, fleet, node) -> None:
    state = _fleet(fleet, node)
    zone = build_filter("zone")
    status = zone.explain(context(state, JobSpec("j", allowed_zones=("east/b",))), 0)
    assert not status.ok and "east/a is not an allowed zone (east/b)" in str(status)
    assert zone.explain(context(state, JobSpec("j", allowed_zones=("east/b",))), 1).ok
    only_b = JobSpec("j", allowed_zones=("b",))
    assert "east (no zone)" in str(zone.explain(context(state, only_b), 3))


def test_placer_puts_a_pinned_job_in_its_zone(fleet, node) -> None:
    state = _fleet(fleet, node)
    placer = Placer(state)
    for zone, where in (("east/b", "eb"), ("west/a", "wa")):
        result = placer.place(JobSpec(f"j-{zone}", gpu_count=1, allowed_zones=(zone,)))
        assert result.placed and {a.node_id for a in result.assignments} == {where}
