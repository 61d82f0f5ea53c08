"""The tenancy policy file (YAML, docs/tenancy.md): loaded at start, reloaded when it changes.

A bad file is one line naming the field (`policy.yaml: tenants.vision.quotas[0].nominal: must
be >= 0, got -1`): at start the worker refuses to run with it; on a reload the policy in force
stays and the line is logged.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import yaml

from infra.errors import ConfigError
from scorer.tenancy import PolicyError, TenancyPolicy, parse_policy

__all__ = ["PolicyFile", "load_policy"]

log = logging.getLogger(__name__)


def load_policy(path: str | Path) -> TenancyPolicy:
    """Parse a policy file; ConfigError with one line naming the file and the field."""
    try:
        raw: Any = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    try:
        return parse_policy(raw)
    except PolicyError as exc:
        raise ConfigError(f"{path}: {exc}") from None


class PolicyFile:
    """A policy file watched by modification time; `reload()` answers only on a change."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path else None
        self._stamp: tuple[int, int] | None = None
        self.error: str | None = None  # the last refused reload, one line
        self.policy = TenancyPolicy()
        if self.path is not None:
            self._stamp = self._stat()
            self.policy = load_policy(self.path)

    def _stat(self) -> tuple[int, int] | None:
        assert self.path is not None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def reload(self) -> TenancyPolicy | None:
        """The new policy when the file changed and parses; None when unchanged or bad (the
        policy in force stays; `error` says why)."""
        if self.path is None:
            return None
        stamp = self._stat()
        if stamp == self._stamp:
            return None
        self._stamp = stamp
        try:
            policy = load_policy(self.path)
        except ConfigError as exc:
            self.error = str(exc)
            log.error("policy reload refused, the policy in force stays: %s", exc)
            return None
        self.error = None
        self.policy = policy
        log.warning("policy reloaded path=%s tenants=%d", self.path, len(policy.tenants))
        return policy
