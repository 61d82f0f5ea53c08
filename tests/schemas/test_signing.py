"""Signed submissions: what the signature covers, and every reason a verifier refuses one."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest

from infra.jobspec import job_record
from schemas import SingleObjectCodec
from schemas.errors import KeySpecError
from schemas.signing import KeyRing, Signer, TenantKey, Verifier, parse_keys, signing_payload

NOW = 1_700_000_000_000
KEY_A = TenantKey("vision", "k-vision-1", "s3cret-vision")
KEY_B = TenantKey("nlp", "k-nlp-1", "s3cret-nlp")
CODEC = SingleObjectCodec()


def _signed(**fields: Any) -> dict[str, Any]:
    record = job_record({"job_id": "j1", "gpu_count": 2, **fields}, now_ms=NOW)
    return Signer(KEY_A).sign(record, now_ms=NOW)


def _verifier() -> Verifier:
    return Verifier(KeyRing([KEY_A, KEY_B]), max_age_s=300, clock_ms=lambda: NOW + 1000)


def test_signature_is_hmac_sha256_of_the_avro_body_without_signature() -> None:
    record = _signed()
    body = CODEC.encode("JobSubmitted", {**record, "signature": ""})[10:]  # magic + fingerprint
    assert signing_payload(record) == body
    expected = hmac.new(b"s3cret-vision", body, hashlib.sha256).hexdigest()
    assert record["signature"] == expected
    assert (record["tenant"], record["key_id"], record["ts"]) == ("vision", "k-vision-1", NOW)


def test_a_signed_record_is_admitted_after_an_avro_round_trip() -> None:
    data = CODEC.encode("JobSubmitted", _signed())
    _, decoded = CODEC.decode(data)
    verdict = _verifier().check(decoded, kafka_key=b"j1", position=7, schema=CODEC.writer(data))
    assert verdict.admitted and verdict.tenant == "vision"


def _tampered(field: str, value: Any) -> dict[str, Any]:
    return {**_signed(), field: value}


REFUSALS = [
    # (record, kafka key, reason fragment)
    ({**_signed(), "key_id": "", "signature": ""}, b"j1", "unsigned submission"),
    (_tampered("signature", ""), b"j1", "unsigned submission"),
    (_tampered("key_id", "k-unknown"), b"j1", "unknown key id 'k-unknown'"),
    (_tampered("tenant", "nlp"), b"j1", "does not belong to tenant 'nlp'"),
    (_tampered("gpu_count", 8), b"j1", "bad signature"),
    (_tampered("priority", 100), b"j1", "bad signature"),
    (_tampered("signature", "00" * 32), b"j1", "bad signature"),
    # signed with B's secret but naming A's key: the MAC does not match A's secret
    ({**Signer(TenantKey("vision", "k-vision-1", "s3cret-nlp")).sign(_signed(), now_ms=NOW)},
     b"j1", "bad signature"),
    # ts 301 s before the verifier's clock (NOW + 1 s): outside the 300 s window
    (Signer(KEY_A).sign(_signed(), now_ms=NOW - 300_000), b"j1", "expired: signed 301s ago"),
    (Signer(KEY_A).sign(_signed(), now_ms=NOW + 302_000), b"j1", "301s in the future"),
    (_signed(), b"other-job", "message key is not the job id"),
    (_signed(), None, "message key is not the job id"),
]  # fmt: skip


@pytest.mark.parametrize("record,key,reason", REFUSALS)
def test_refusals_name_the_reason(record: dict[str, Any], key: bytes | None, reason: str) -> None:
    verdict = _verifier().check(record, kafka_key=key, position=1)
    assert not verdict.admitted and verdict.tenant is None
    assert reason in (verdict.reason or "")
    assert "s3cret" not in (verdict.reason or "")


def test_a_replay_is_refused_but_a_redelivery_is_not() -> None:
    verifier, record = _verifier(), _signed()
    assert verifier.check(record, kafka_key=b"j1", position=("t", 0, 5)).admitted
    # the same record at the same log position: at-least-once redelivery after a crash
    assert verifier.check(record, kafka_key=b"j1", position=("t", 0, 5)).admitted
    replay = verifier.check(record, kafka_key=b"j1", position=("t", 0, 9))
    assert not replay.admitted and "replayed submission" in (replay.reason or "")


def test_remembered_submissions_are_forgotten_once_expired() -> None:
    clock = [NOW]
    verifier = Verifier(KeyRing([KEY_A]), max_age_s=300, clock_ms=lambda: clock[0])
    verifier.check(_signed(), kafka_key=b"j1", position=1)
    assert len(verifier._seen) == 1
    clock[0] = NOW + 301_000  # j1 is now expired, so it need not be remembered
    other = Signer(KEY_A).sign(_signed(job_id="j2"), now_ms=clock[0])
    assert verifier.check(other, kafka_key=b"j2", position=2).admitted
    assert len(verifier._seen) == 1


def test_keys_parse_and_hide_secrets() -> None:
    keys = parse_keys("vision:k1:abc:def, nlp:k2:xyz\n# comment\n;ads:k3:q")
    assert [(k.tenant, k.key_id, k.secret) for k in keys] == [
        ("vision", "k1", "abc:def"),
        ("nlp", "k2", "xyz"),
        ("ads", "k3", "q"),
    ]
    assert "abc" not in repr(keys) and "xyz" not in repr(KeyRing(keys))


@pytest.mark.parametrize("text", ["vision:k1", "vision::s", ":k1:s", "a:k1:s,b:k1:t"])
def test_bad_key_specs_are_refused(text: str) -> None:
    with pytest.raises(KeySpecError):
        KeyRing(parse_keys(text))
