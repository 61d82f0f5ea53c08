"""Tenant keys from the configuration: the worker's key ring and a client's signer.

The signing itself is `schemas.signing`; this module only turns `[auth]` settings (or
`GPUFLOW_AUTH_*` variables) into keys, with errors that name the setting and never the secret.
"""

from __future__ import annotations

from pathlib import Path

from infra.config import AuthConfig
from infra.errors import ConfigError
from schemas.errors import KeySpecError
from schemas.signing import KeyRing, Signer, TenantKey, Verifier, parse_keys

__all__ = ["key_ring", "signer", "verifier"]


def key_ring(auth: AuthConfig) -> KeyRing:
    """Every tenant key the worker accepts: `auth.keys`, then the lines of `auth.keys_file`."""
    try:
        keys = list(parse_keys(auth.keys))
    except KeySpecError as exc:
        raise ConfigError(f"auth.keys: {exc}") from None
    if auth.keys_file:
        try:
            text = Path(auth.keys_file).read_text()
        except OSError as exc:
            why = f"cannot read {auth.keys_file}: {exc.strerror}"
            raise ConfigError(f"auth.keys_file: {why}") from None
        try:
            keys.extend(parse_keys(text))
        except KeySpecError as exc:
            raise ConfigError(f"auth.keys_file: {exc}") from None
    admins = [k.strip() for k in auth.admin_keys.replace(";", ",").split(",") if k.strip()]
    try:
        return KeyRing(keys, admins)
    except KeySpecError as exc:
        field = "auth.admin_keys" if "admin key" in str(exc) else "auth"
        raise ConfigError(f"{field}: {exc}") from None


def verifier(auth: AuthConfig) -> Verifier | None:
    """The worker's verifier, or None when no tenant key is configured (signing is off)."""
    ring = key_ring(auth)
    return Verifier(ring, max_age_s=auth.max_age_s) if ring else None


def signer(auth: AuthConfig) -> Signer | None:
    """A client's signer from `auth.tenant/key_id/secret`; None when none is set."""
    given = {"tenant": auth.tenant, "key_id": auth.key_id, "secret": auth.secret}
    if not any(given.values()):
        return None
    missing = [name for name, value in given.items() if not value]
    if missing:
        raise ConfigError(f"auth.{missing[0]}: needed to sign submissions (set GPUFLOW_AUTH_*)")
    return Signer(TenantKey(auth.tenant, auth.key_id, auth.secret))
