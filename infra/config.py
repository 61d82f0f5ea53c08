"""One typed configuration: defaults, then `gpuflow.toml`, then `GPUFLOW_*` environment variables.

Environment names are `GPUFLOW_<SECTION>_<FIELD>` (e.g. `GPUFLOW_KAFKA_BOOTSTRAP_SERVERS`,
`GPUFLOW_STORE_DSN`). Kafka client settings pass through untouched from `[kafka.client]` or
`GPUFLOW_KAFKA_CLIENT_<KEY>` with `_` for `.` (`GPUFLOW_KAFKA_CLIENT_SASL_USERNAME`).
Each section's settings live in `infra.config_sections` and are importable from here.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, get_type_hints

from infra.config_sections import (
    AuthConfig,
    BrokerConfig,
    ForecastConfig,
    KafkaConfig,
    NetworkConfig,
    SlurmConfig,
    StoreConfig,
    WorkerConfig,
)
from infra.errors import ConfigError
from scorer.replan import ReplanConfig

__all__ = [
    "AuthConfig",
    "BrokerConfig",
    "Config",
    "ForecastConfig",
    "KafkaConfig",
    "NetworkConfig",
    "SlurmConfig",
    "StoreConfig",
    "WorkerConfig",
    "config_env",
    "config_key",
    "load_config",
]

# Variables read outside this module that share the GPUFLOW_<SECTION>_ prefix.
_ENV_ALIASES = {"broker_bin": ("broker", "binary")}


@dataclass(frozen=True)
class Config:
    data_dir: Path = Path("gpuflow-data")
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    worker: WorkerConfig = field(default_factory=WorkerConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    forecast: ForecastConfig = field(default_factory=ForecastConfig)
    replan: ReplanConfig = field(default_factory=ReplanConfig)  # decide again (docs/replanning.md)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)  # Slurm bridges (docs/slurm.md)

    @property
    def store_dsn(self) -> str:
        return self.store.dsn or f"chdb:///{self.data_dir.resolve() / 'history'}"

    def with_bootstrap(self, servers: str) -> Config:
        return dataclasses.replace(
            self, kafka=dataclasses.replace(self.kafka, bootstrap_servers=servers)
        )

    def with_regions(self, regions: Iterable[str]) -> Config:
        """Pin `regions` to partitions in this order, unless an order is configured already."""
        if self.kafka.region_order:
            return self
        order = ",".join(regions)
        return dataclasses.replace(self, kafka=dataclasses.replace(self.kafka, region_order=order))


def _coerce(section: str, name: str, kind: Any, raw: Any) -> Any:
    where = f"{section}.{name}" if section else name
    try:
        if kind is bool and isinstance(raw, str):
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(raw)
            return raw.lower() in ("1", "true", "yes")
        if kind in (int, float) and isinstance(raw, bool):
            raise ValueError(raw)
        if kind is int and isinstance(raw, float) and not raw.is_integer():
            raise ValueError(raw)  # no silent truncation of 4.7 to 4
        if kind in (int, float, str, bool):
            return kind(raw)
        if kind is Path:
            return Path(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected {kind.__name__}, got {raw!r}") from None
    return raw


def _build(cls: type, section: str, values: Mapping[str, Any]) -> Any:
    hints = get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - known
    if unknown:
        raise ConfigError(f"{section or 'config'}: unknown setting {sorted(unknown)[0]!r}")
    kwargs = {}
    for name, raw in values.items():
        kind = hints[name]
        if dataclasses.is_dataclass(kind):
            if not isinstance(raw, Mapping):
                raise ConfigError(f"{name}: expected a table")
            kwargs[name] = _build(kind, name, raw)  # type: ignore[arg-type]
        elif name == "client":
            if not isinstance(raw, Mapping):
                raise ConfigError(f"{section}.client: expected a table")
            kwargs[name] = MappingProxyType({str(k): str(v) for k, v in raw.items()})
        else:
            kwargs[name] = _coerce(section, name, kind, raw)
    for name, value in kwargs.items():
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise ConfigError(f"{section}.{name}: must be >= 0, got {value}")
    try:
        return cls(**kwargs)
    except ValueError as exc:  # a section's own check (e.g. replan.carbon_weight in [0, 1])
        raise ConfigError(f"{section}.{exc}" if section else str(exc)) from None


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sections = {f.name for f in dataclasses.fields(Config) if f.name != "data_dir"}
    for key, value in env.items():
        if not key.startswith("GPUFLOW_"):
            continue
        rest = key[len("GPUFLOW_") :].lower()
        if rest == "data_dir":
            out["data_dir"] = value
            continue
        if rest in _ENV_ALIASES:
            section, name = _ENV_ALIASES[rest]
            out.setdefault(section, {})[name] = value
            continue
        if rest.startswith("kafka_client_"):
            client_key = rest[len("kafka_client_") :].replace("_", ".")
            out.setdefault("kafka", {}).setdefault("client", {})[client_key] = value
            continue
        section, _, name = rest.partition("_")
        if section in sections and name:
            out.setdefault(section, {})[name] = value
    return out


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def load_config(
    path: Path | None = None, env: Mapping[str, str] | None = None, **overrides: Any
) -> Config:
    """Defaults < gpuflow.toml (explicit path, or ./gpuflow.toml if present) < env < overrides."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    path = path or (Path(env["GPUFLOW_CONFIG"]) if "GPUFLOW_CONFIG" in env else None)
    if path is None and Path("gpuflow.toml").is_file():
        path = Path("gpuflow.toml")
    if path is not None:
        try:
            values = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from exc
    values = _merge(values, _env_overrides(env))
    values = _merge(values, overrides)
    return _build(Config, "", values)


def config_key(env_name: str) -> str | None:
    """The setting a `GPUFLOW_*` environment variable sets (`kafka.partitions`), or None.

    `GPUFLOW_KAFKA_CLIENT_*` pass through to librdkafka (`kafka.client.sasl.username`).
    """
    if not env_name.startswith("GPUFLOW_"):
        return None
    rest = env_name[len("GPUFLOW_") :].lower()
    if rest == "data_dir":
        return "data_dir"
    if rest == "config":
        return "config"  # the file to read, not a setting in it
    if rest in _ENV_ALIASES:
        return ".".join(_ENV_ALIASES[rest])
    if rest.startswith("kafka_client_") and len(rest) > len("kafka_client_"):
        return "kafka.client." + rest[len("kafka_client_") :].replace("_", ".")
    sections = {n: t for n, t in get_type_hints(Config).items() if dataclasses.is_dataclass(t)}
    section, _, name = rest.partition("_")
    if section not in sections:
        return None
    fields = {f.name for f in dataclasses.fields(sections[section])} - {"client"}
    return f"{section}.{name}" if name in fields else None


def config_env(config: Config) -> dict[str, str]:
    """GPUFLOW_* variables that reproduce `config` in a child process (e.g. the worker)."""
    env = {"GPUFLOW_DATA_DIR": str(config.data_dir.resolve())}
    for section in (
        "kafka",
        "broker",
        "store",
        "worker",
        "network",
        "auth",
        "forecast",
        "replan",
        "slurm",
    ):
        values = getattr(config, section)
        for f in dataclasses.fields(values):
            value = getattr(values, f.name)
            if f.name == "client":
                for key, item in value.items():
                    env[f"GPUFLOW_KAFKA_CLIENT_{key.replace('.', '_').upper()}"] = str(item)
            else:
                env[f"GPUFLOW_{section.upper()}_{f.name.upper()}"] = str(value)
    return env
