"""Admission of submissions: who may ask for GPUs, checked before the router looks at a job.

With tenant keys configured (`[auth]`), a JobSubmitted is admitted only when its signature,
freshness and log position check out (`schemas.signing.Verifier`). A refused submission gets a
REJECTED decision with `admitted = false` and the reason, and a dead letter; it is never
routed. `admitted = false` keeps its job id undecided: an impostor cannot squat a job id,
and a replay of a placed job cannot overwrite its placement in the ledger.

The admitted record carries `verified_tenant` (the key's tenant; None when signing is off),
which the router copies onto the RoutedJob. Quotas and preemption must act on that field,
never on the claimed `tenant` alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from infra.topics import DECISIONS_PLACEMENT
from schemas import Codec, DecodeError
from schemas.signing import Verdict, Verifier
from streams.base.outbox import Outgoing, new_event_id, now_ms, outgoing
from streams.scheduler.convert import decision_record

__all__ = ["VERIFIED_TENANT", "Admission"]

log = logging.getLogger(__name__)

VERIFIED_TENANT = "verified_tenant"  # key set on an admitted JobSubmitted record


class Admission:
    """The router's gate: verifies signed submissions when keys are configured."""

    def __init__(
        self, verifier: Verifier | None, codec: Codec, partition_of: Callable[[str], int]
    ) -> None:
        self.verifier = verifier
        self.codec = codec
        self.partition_of = partition_of
        self.refused = 0

    @property
    def required(self) -> bool:
        return self.verifier is not None

    def check(self, message: Any, record: Mapping[str, Any]) -> Verdict:
        """Admit or refuse the decoded `record` of Kafka `message`."""
        if self.verifier is None:
            return Verdict()
        try:
            schema = self.codec.writer(message.value)
        except DecodeError as exc:  # decoded a moment ago, so not expected
            return Verdict(reason=f"cannot verify: {exc}")
        position = (message.topic, message.partition, message.offset)
        key = message.key if isinstance(message.key, bytes) else None
        return self.verifier.check(record, kafka_key=key, position=position, schema=schema)

    def refusal(self, record: Mapping[str, Any], reason: str) -> Outgoing:
        """The REJECTED decision of a submission that was not admitted."""
        self.refused += 1
        job_id = str(record["job_id"])
        decision = decision_record(
            record,
            "REJECTED",
            event_id=new_event_id(job_id, "not-admitted", str(record["event_id"])),
            ts=now_ms(),
            submitted_ts=int(record["ts"]),
            attempt=0,
            worker_us=0,
            reasons=[f"not admitted: {reason}"],
        )
        decision["admitted"] = False
        log.warning(
            "submission not admitted job_id=%s tenant=%s key_id=%s reason=%s",
            job_id,
            record.get("tenant"),
            record.get("key_id"),
            reason,
        )
        return outgoing(
            DECISIONS_PLACEMENT, job_id, decision, region=None, partition_of=self.partition_of
        )
