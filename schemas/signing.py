"""Tenant identity on `JobSubmitted`: HMAC-SHA256 over the canonical Avro body.

A submission is signed with one tenant key (tenant, key id, secret). The signed bytes are the
record's Avro body, as its writer schema encodes it, with `signature` set to "" — everything
else, `ts`, `tenant`, `job_id`, `event_id` and `key_id` included, is covered. Avro's binary
encoding is canonical for a given schema (no field names, fixed order; maps are written with
sorted keys here), so signer and verifier compute the same bytes from the same record.

The verifier admits a submission when its key id is known, the key belongs to the tenant the
job names, the signature matches (constant-time compare), `ts` is within `max_age_s` of the
verifier's clock (either side), the Kafka key is the job id (so replays of one job always meet
on one partition), and its `event_id` was not admitted before from another log position
(a redelivery of the same record after a crash is not a replay). Every refusal says why,
never with a secret in it.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastavro import schemaless_writer

from schemas.errors import CodecError, KeySpecError
from schemas.registry import EventSchema, default_schemas

__all__ = [
    "KeyRing",
    "Signer",
    "TenantKey",
    "Verdict",
    "Verifier",
    "parse_keys",
    "signing_payload",
]

SIGNED_EVENT = "JobSubmitted"


@dataclass(frozen=True)
class TenantKey:
    """One tenant's signing key. The secret never appears in a repr."""

    tenant: str
    key_id: str
    secret: str = field(repr=False)

    def __post_init__(self) -> None:
        for name in ("tenant", "key_id", "secret"):
            if not getattr(self, name):
                raise KeySpecError(f"tenant key: {name} must not be empty")


def parse_keys(text: str) -> tuple[TenantKey, ...]:
    """Keys from "tenant:key_id:secret" entries separated by commas, semicolons or new lines.

    Lines starting with `#` are comments; a secret may itself contain ':'.
    """
    keys = []
    for number, raw in enumerate(text.replace(";", "\n").replace(",", "\n").splitlines(), 1):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        parts = entry.split(":", 2)
        if len(parts) != 3:
            raise KeySpecError(f"tenant key entry {number}: expected tenant:key_id:secret")
        keys.append(TenantKey(parts[0].strip(), parts[1].strip(), parts[2].strip()))
    return tuple(keys)


class KeyRing:
    """Tenant keys by key id (a key id is unique across tenants). `admins`: key ids that may
    act on any tenant's jobs (cancel them); each must be a key of the ring."""

    def __init__(self, keys: Iterable[TenantKey] = (), admins: Iterable[str] = ()) -> None:
        self._by_id: dict[str, TenantKey] = {}
        for key in keys:
            if key.key_id in self._by_id:
                raise KeySpecError(f"tenant key id {key.key_id!r} is listed twice")
            self._by_id[key.key_id] = key
        self.admins = frozenset(admins)
        unknown = sorted(self.admins - set(self._by_id))
        if unknown:
            raise KeySpecError(f"admin key id {unknown[0]!r} is not a configured key")

    def is_admin(self, key_id: str) -> bool:
        return key_id in self.admins

    def __bool__(self) -> bool:
        return bool(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, key_id: str) -> TenantKey | None:
        return self._by_id.get(key_id)

    def __repr__(self) -> str:
        return f"KeyRing(key_ids={sorted(self._by_id)!r})"


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def signing_payload(record: Mapping[str, Any], schema: EventSchema | None = None) -> bytes:
    """The bytes a signature covers: the Avro body of `record` with `signature` set to ""."""
    schema = schema or default_schemas().get(SIGNED_EVENT)
    buf = io.BytesIO()
    unsigned = _canonical({**record, "signature": ""})
    try:
        schemaless_writer(buf, schema.parsed, unsigned)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        raise CodecError(f"{schema.name}: cannot encode for signing: {exc}") from exc
    return buf.getvalue()


def _mac(secret: str, payload: bytes) -> str:
    return hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Signer:
    """Signs JobSubmitted records with one tenant key (the client side: `gpuflow submit`)."""

    key: TenantKey

    def sign(
        self,
        record: Mapping[str, Any],
        *,
        now_ms: int | None = None,
        schema: EventSchema | None = None,
    ) -> dict[str, Any]:
        """A copy of `record` for this key's tenant, stamped now, with key id and signature.
        `schema`: the event's own (a CancelRequest's); JobSubmitted's when None."""
        signed = dict(record)
        signed["tenant"] = self.key.tenant
        signed["key_id"] = self.key.key_id
        signed["ts"] = int(time.time() * 1000) if now_ms is None else now_ms
        signed["signature"] = _mac(self.key.secret, signing_payload(signed, schema))
        return signed


@dataclass(frozen=True)
class Verdict:
    """Whether a submission is admitted: the verified tenant, or the reason it is refused."""

    tenant: str | None = None  # the verified tenant (None: not verified)
    reason: str | None = None  # why it is refused (None: admitted)
    admin: bool = False  # signed with an admin key (KeyRing.admins)

    @property
    def admitted(self) -> bool:
        return self.reason is None


class Verifier:
    """Checks signatures, freshness and replays of JobSubmitted records (the worker side)."""

    def __init__(
        self,
        keys: KeyRing,
        *,
        max_age_s: float = 300.0,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        remember: int = 1_000_000,
    ) -> None:
        self.keys = keys
        self.max_age_ms = int(max_age_s * 1000)
        self._clock_ms = clock_ms
        self._remember = remember
        # (key_id, event_id) -> (log position, ts): admitted submissions still within the window
        self._seen: OrderedDict[tuple[str, str], tuple[Any, int]] = OrderedDict()

    def check(
        self,
        record: Mapping[str, Any],
        *,
        kafka_key: bytes | None,
        position: Any,
        schema: EventSchema | None = None,
    ) -> Verdict:
        """Admit or refuse one decoded submission found at `position` (topic, partition, offset).

        `schema` is the writer schema of the record (the latest JobSubmitted when None).
        """
        key_id, signature = str(record.get("key_id") or ""), str(record.get("signature") or "")
        if not key_id or not signature:
            return Verdict(reason="unsigned submission: tenant keys are configured")
        key = self.keys.get(key_id)
        if key is None:
            return Verdict(reason=f"unknown key id {key_id!r}")
        tenant = str(record.get("tenant", ""))
        if tenant != key.tenant:
            return Verdict(reason=f"key {key_id!r} does not belong to tenant {tenant!r}")
        try:
            expected = _mac(key.secret, signing_payload(record, schema))
        except CodecError as exc:
            return Verdict(reason=f"cannot verify: {exc}")
        if not hmac.compare_digest(expected, signature):
            return Verdict(reason=f"bad signature for key {key_id!r}")
        admin = self.keys.is_admin(key_id)
        refusal = self._fresh_once(record, key_id, kafka_key, position)
        return refusal or Verdict(tenant=key.tenant, admin=admin)

    def _fresh_once(
        self, record: Mapping[str, Any], key_id: str, kafka_key: bytes | None, position: Any
    ) -> Verdict | None:
        """A refusal for a stale, misaddressed or replayed submission; None when it is fine."""
        now, ts = self._clock_ms(), int(record["ts"])
        if now - ts > self.max_age_ms:
            return Verdict(
                reason=f"expired: signed {(now - ts) / 1000:.0f}s ago, "
                f"window {self.max_age_ms / 1000:.0f}s"
            )
        if ts - now > self.max_age_ms:
            return Verdict(reason=f"timestamp {(ts - now) / 1000:.0f}s in the future")
        if kafka_key != str(record["job_id"]).encode():
            return Verdict(reason="message key is not the job id")
        self._forget_older_than(now - self.max_age_ms)
        seen_key = (key_id, str(record["event_id"]))
        first = self._seen.get(seen_key)
        if first is not None and first[0] != position:
            return Verdict(reason=f"replayed submission: event_id first seen at {first[0]}")
        self._seen[seen_key] = (position, ts)
        return None

    def _forget_older_than(self, cutoff_ms: int) -> None:
        # Submissions older than the window are refused as expired: no need to remember them.
        # Insertion order is nearly ts order; stop at the first one still inside the window.
        while self._seen and (
            next(iter(self._seen.values()))[1] < cutoff_ms or len(self._seen) > self._remember
        ):
            self._seen.popitem(last=False)
