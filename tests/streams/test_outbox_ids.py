"""Deterministic decision ids are the RFC 4122 name-based (SHA-1) UUIDs they always were."""

from __future__ import annotations

import uuid

import pytest

from streams.base.outbox import new_event_id


@pytest.mark.parametrize(
    "parts", [("job-1", "final"), ("j", "queued", "3"), ("ünïcode job", "final"), ("",)]
)
def test_named_ids_equal_uuid5_of_the_url_namespace(parts: tuple[str, ...]) -> None:
    want = str(uuid.uuid5(uuid.NAMESPACE_URL, "gpuflow:" + ":".join(parts)))
    assert new_event_id(*parts) == want


def test_unnamed_ids_are_fresh_uuid4s() -> None:
    a, b = new_event_id(), new_event_id()
    assert a != b and uuid.UUID(a).version == 4
