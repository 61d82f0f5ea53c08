"""Tenant keys from `[auth]` / GPUFLOW_AUTH_*: the worker's ring, a client's signer, and errors
that name the setting without the secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.config import AuthConfig, config_env, load_config
from infra.errors import ConfigError
from infra.signing import key_ring, signer, verifier


def test_keys_from_env_and_file(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys"
    keys_file.write_text("# tenant:key_id:secret\nads:ka:file-secret\n")
    env = {"GPUFLOW_AUTH_KEYS": "vision:kv:env-secret", "GPUFLOW_AUTH_KEYS_FILE": str(keys_file)}
    config = load_config(env=env)
    ring = key_ring(config.auth)
    assert len(ring) == 2 and ring.get("ka").tenant == "ads"  # type: ignore[union-attr]
    assert "secret" not in repr(config.auth).replace("secret=", "")
    assert config_env(config)["GPUFLOW_AUTH_KEYS"] == "vision:kv:env-secret"  # the worker gets it


def test_no_keys_means_no_verifier_and_no_signer() -> None:
    assert verifier(AuthConfig()) is None and signer(AuthConfig()) is None


@pytest.mark.parametrize(
    ("auth", "setting"),
    [
        (AuthConfig(keys="vision:kv"), "auth.keys"),
        (AuthConfig(keys="a:k:s1,b:k:s2"), "listed twice"),
        (AuthConfig(keys_file="/nonexistent/keys"), "auth.keys_file"),
        (AuthConfig(tenant="vision", key_id="kv"), "auth.secret"),
        (AuthConfig(secret="hunter2"), "auth.tenant"),
    ],
)
def test_bad_auth_settings_name_the_setting(auth: AuthConfig, setting: str) -> None:
    with pytest.raises(ConfigError, match=setting) as caught:
        verifier(auth) if auth.keys or auth.keys_file else signer(auth)
    assert "s1" not in str(caught.value) and "hunter2" not in str(caught.value)


def test_admin_keys_name_configured_keys() -> None:
    env = {"GPUFLOW_AUTH_KEYS": "A:ka:s1,ops:ko:s2", "GPUFLOW_AUTH_ADMIN_KEYS": "ko"}
    ring = key_ring(load_config(env=env).auth)
    assert ring.is_admin("ko") and not ring.is_admin("ka")
    with pytest.raises(ConfigError, match=r"^auth.admin_keys: admin key id 'kx' is not a"):
        key_ring(AuthConfig(keys="A:ka:s1", admin_keys="ka, kx"))
