"""Hostile records on every topic the worker consumes (hypothesis; the long run is
`bench/fuzz.py`): each is dead-lettered or processed, nothing raises, no GPU is promised twice.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeline import CODEC, WorkerTwin

from agents.hostile import CONSUMED, HostileRecords
from schemas import CodecError, default_schemas
from streams.scheduler.validation import problems

FUZZ = settings(
    max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
EVENTS = sorted(CONSUMED.values())


def _fleet(twin: WorkerTwin, gen: HostileRecords) -> None:
    for node in gen.nodes:  # a sane fleet first, so valid jobs can be placed
        record = {**gen.base("NodeInventory"), "node_id": node}
        record["region"] = node.rsplit("-fuzz-", 1)[0]
        assert twin.feed("NodeInventory", CODEC.encode("NodeInventory", record)) == "processed"


@FUZZ
@given(st.integers(0, 2**32 - 1), st.lists(st.sampled_from(sorted(CONSUMED)), min_size=1))
def test_hostile_streams_are_dead_lettered_or_processed(seed: int, topics: list[str]) -> None:
    gen, twin = HostileRecords(seed), WorkerTwin()
    _fleet(twin, gen)
    fed = 0
    for _ in range(25):
        for topic in topics[:6]:
            twin.feed(CONSUMED[topic], gen.draw(topic).value)
            fed += 1
    assert sum(twin.outcomes.values()) == fed + len(gen.nodes)
    twin.assert_no_gpu_promised_twice()


# ---- schema-valid records with hypothesis-chosen hostile values -------------------------------

_INTS = st.one_of(
    st.sampled_from((-1, 0, 1, 2**31 - 1, -(2**31))), st.integers(-(2**31), 2**31 - 1)
)
_LONGS = st.one_of(st.sampled_from((-1, 0, 2**63 - 1)), st.integers(-(2**63), 2**63 - 1))
_TEXT = st.one_of(st.sampled_from(("", "x" * 10_240, "\x00")), st.text(max_size=20))


def _values(schema: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    if isinstance(schema, list):
        return st.one_of(*[_values(s, depth) for s in schema])
    kind = schema["type"] if isinstance(schema, dict) else schema
    simple: dict[str, st.SearchStrategy[Any]] = {
        "null": st.none(),
        "boolean": st.booleans(),
        "int": _INTS,
        "long": _LONGS,
        "float": st.floats(width=32),
        "double": st.floats(),
        "string": _TEXT,
        "bytes": st.binary(max_size=20),
    }
    if kind in simple:
        return simple[kind]
    if kind == "enum":
        return st.sampled_from(schema["symbols"])
    if kind == "array":
        return st.lists(_values(schema["items"], depth + 1), max_size=3 if depth < 2 else 0)
    if kind == "map":
        return st.dictionaries(_TEXT, _values(schema["values"], depth + 1), max_size=3)
    if kind == "record":
        return st.fixed_dictionaries(
            {f["name"]: _values(f["type"], depth + 1) for f in schema["fields"]}
        )
    raise AssertionError(f"unhandled Avro type {kind}")


@st.composite
def _hostile_record(draw: st.DrawFn, event: str) -> dict[str, Any]:
    record = HostileRecords(draw(st.integers(0, 1000))).base(event)
    fields = [f for f in default_schemas().get(event).parsed["fields"] if f["name"] != "schema"]
    for f in draw(st.lists(st.sampled_from(fields), min_size=1, max_size=3, unique_by=id)):
        record[f["name"]] = draw(_values(f["type"]))
    return record


@FUZZ
@given(st.data())
def test_schema_valid_hostile_values_never_break_a_processor(data: st.DataObject) -> None:
    twin = WorkerTwin()
    gen = HostileRecords(0)
    _fleet(twin, gen)
    for event in EVENTS:
        record = data.draw(_hostile_record(event), label=event)
        try:
            value = CODEC.encode(event, record)
        except CodecError:
            continue  # not schema-valid after all (e.g. an int out of range): not this test
        outcome = twin.feed(event, value)
        assert outcome in ("processed", "dead_letter:invalid")
        if outcome == "processed":
            assert not problems(event, CODEC.decode(value)[1])
    twin.assert_no_gpu_promised_twice()


@FUZZ
@given(st.sampled_from(EVENTS), st.data())
def test_non_finite_and_out_of_range_numbers_are_refused(event: str, data: st.DataObject) -> None:
    record = data.draw(_hostile_record(event))
    try:
        _, decoded = CODEC.decode(CODEC.encode(event, record))
    except CodecError:
        return
    found = problems(event, decoded)

    def reals(value: Any) -> list[float]:
        if isinstance(value, float):
            return [value]
        if isinstance(value, dict):
            return [x for v in value.values() for x in reals(v)]
        if isinstance(value, list):
            return [x for v in value for x in reals(v)]
        return []

    envelope_free = {k: v for k, v in decoded.items() if k not in ("labels", "refusals")}
    if any(not math.isfinite(x) for x in reals(envelope_free)):
        assert found, decoded  # a NaN or infinity never reaches the decision core


# ---- bytes that are not events --------------------------------------------------------------


@FUZZ
@given(st.sampled_from(EVENTS), st.binary(max_size=64), st.integers(0, 10_000), st.data())
def test_corrupt_bytes_raise_only_decode_errors(
    event: str, noise: bytes, seed: int, data: st.DataObject
) -> None:
    valid = CODEC.encode(event, HostileRecords(seed).base(event))
    cut = data.draw(st.integers(0, len(valid)))
    flip = data.draw(st.integers(0, len(valid) * 8 - 1))
    flipped = bytearray(valid)
    flipped[flip // 8] ^= 1 << (flip % 8)
    for value in (noise, valid[:cut], bytes(flipped), valid + noise, b"\xc3\x01" + noise):
        with contextlib.suppress(CodecError):  # anything else raised fails the test
            CODEC.decode(value)
        outcome = WorkerTwin().feed(event, value)
        assert outcome == "processed" or outcome.startswith("dead_letter:")
