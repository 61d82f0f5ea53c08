"""Configuration: defaults < gpuflow.toml < GPUFLOW_* env < keyword overrides, typed and checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.config import (
    BrokerConfig,
    Config,
    KafkaConfig,
    StoreConfig,
    WorkerConfig,
    config_env,
    load_config,
)
from infra.errors import ConfigError, GpuflowError, InfraError

TOML = """
data_dir = "/srv/gpuflow"

[kafka]
bootstrap_servers = "kafka-1:9092"
partitions = 8

[kafka.client]
"security.protocol" = "SASL_SSL"
"sasl.username" = "file-user"

[store]
dsn = "http://ch:8123/gpuflow"
batch_rows = 100

[worker]
log_level = "info"
"""


@pytest.fixture(autouse=True)
def _no_stray_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # load_config reads ./gpuflow.toml when present


def write_toml(tmp_path: Path, text: str = TOML) -> Path:
    path = tmp_path / "conf" / "gpuflow.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_defaults() -> None:
    config = load_config(env={})
    assert config == Config()
    assert config.kafka == KafkaConfig() and config.kafka.embedded
    assert config.kafka.partitions == 4 and dict(config.kafka.client) == {}
    assert config.broker == BrokerConfig(host="127.0.0.1", port=0)
    assert config.store == StoreConfig() and config.worker == WorkerConfig()
    assert config.data_dir == Path("gpuflow-data")
    assert config.store_dsn == f"chdb:///{Path('gpuflow-data').resolve() / 'history'}"


def test_toml_file(tmp_path: Path) -> None:
    config = load_config(write_toml(tmp_path), env={})
    assert config.data_dir == Path("/srv/gpuflow")
    assert config.kafka.bootstrap_servers == "kafka-1:9092" and not config.kafka.embedded
    assert config.kafka.partitions == 8
    assert dict(config.kafka.client) == {
        "security.protocol": "SASL_SSL",
        "sasl.username": "file-user",
    }
    assert config.kafka.client_conf() == {
        "bootstrap.servers": "kafka-1:9092",
        "security.protocol": "SASL_SSL",
        "sasl.username": "file-user",
    }
    assert config.store_dsn == "http://ch:8123/gpuflow"
    assert config.store.batch_rows == 100
    assert config.worker.log_level == "info"
    assert config.kafka.session_timeout_s == 6.0  # untouched settings keep their defaults


def test_toml_found_in_the_working_directory_or_by_gpuflow_config(tmp_path: Path) -> None:
    (tmp_path / "gpuflow.toml").write_text("[kafka]\npartitions = 3\n")
    assert load_config(env={}).kafka.partitions == 3
    elsewhere = write_toml(tmp_path, "[kafka]\npartitions = 5\n")
    assert load_config(env={"GPUFLOW_CONFIG": str(elsewhere)}).kafka.partitions == 5


def test_env_overrides() -> None:
    config = load_config(
        env={
            "GPUFLOW_DATA_DIR": "/data",
            "GPUFLOW_KAFKA_BOOTSTRAP_SERVERS": "k:9092",
            "GPUFLOW_KAFKA_PARTITIONS": "12",
            "GPUFLOW_KAFKA_SESSION_TIMEOUT_S": "2.5",
            "GPUFLOW_KAFKA_CLIENT_SASL_USERNAME": "alice",
            "GPUFLOW_KAFKA_CLIENT_SECURITY_PROTOCOL": "SASL_SSL",
            "GPUFLOW_BROKER_PORT": "19092",
            "GPUFLOW_STORE_DSN": "http://ch:8123",
            "GPUFLOW_WORKER_APP_ID": "gpuflow-eu",
            "GPUFLOW_WORKER_WEB_PORT": "7000",
            "PATH": "/usr/bin",  # not ours: ignored
            "GPUFLOW_SHARED_DATA": "/x",  # not a section: ignored
        }
    )
    assert config.data_dir == Path("/data")
    assert config.kafka.bootstrap_servers == "k:9092"
    assert config.kafka.partitions == 12 and isinstance(config.kafka.partitions, int)
    assert config.kafka.session_timeout_s == 2.5
    assert dict(config.kafka.client) == {"sasl.username": "alice", "security.protocol": "SASL_SSL"}
    assert config.broker.port == 19092
    assert config.store.dsn == "http://ch:8123"
    assert (config.worker.app_id, config.worker.web_port) == ("gpuflow-eu", 7000)


def test_gpuflow_broker_bin_is_the_broker_binary() -> None:
    # infra.broker documents GPUFLOW_BROKER_BIN; it used to fail as "unknown setting 'bin'".
    assert load_config(env={"GPUFLOW_BROKER_BIN": "/opt/tansu"}).broker.binary == "/opt/tansu"


def test_precedence_defaults_file_env_overrides(tmp_path: Path) -> None:
    path = write_toml(tmp_path)
    env = {"GPUFLOW_KAFKA_PARTITIONS": "16", "GPUFLOW_KAFKA_CLIENT_SASL_USERNAME": "env-user"}
    assert load_config(env={}).kafka.partitions == 4
    assert load_config(path, env={}).kafka.partitions == 8
    from_env = load_config(path, env=env)
    assert from_env.kafka.partitions == 16
    assert from_env.kafka.client["sasl.username"] == "env-user"
    assert from_env.kafka.client["security.protocol"] == "SASL_SSL"  # file keys merge, not replace
    assert from_env.kafka.bootstrap_servers == "kafka-1:9092"
    top = load_config(path, env=env, kafka={"partitions": 32}, data_dir="/override")
    assert top.kafka.partitions == 32
    assert top.kafka.bootstrap_servers == "kafka-1:9092"  # a partial override keeps the rest
    assert top.data_dir == Path("/override")


BAD_VALUES: list[tuple[dict[str, Any], str]] = [
    ({"kafka": {"partitions": "many"}}, "kafka.partitions"),
    ({"kafka": {"partitions": 4.7}}, "kafka.partitions"),  # would silently truncate to 4
    ({"kafka": {"partitions": True}}, "kafka.partitions"),
    ({"kafka": {"session_timeout_s": "soon"}}, "kafka.session_timeout_s"),
    ({"broker": {"start_timeout_s": [1]}}, "broker.start_timeout_s"),
    ({"store": {"batch_rows": None}}, "store.batch_rows"),
    ({"kafka": "k:9092"}, "kafka"),
    ({"kafka": {"client": "sasl"}}, "kafka.client"),
]


@pytest.mark.parametrize(("overrides", "field"), BAD_VALUES)
def test_bad_type_names_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{field}: expected"):
        load_config(env={}, **overrides)


def test_bad_type_from_env_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"^worker\.web_port: expected int, got 'http'"):
        load_config(env={"GPUFLOW_WORKER_WEB_PORT": "http"})


def test_region_order_pins_regions_to_partitions() -> None:
    cfg = load_config(
        env={"GPUFLOW_KAFKA_REGION_ORDER": "us-east, eu-west,", "GPUFLOW_KAFKA_PARTITIONS": "4"}
    )
    assert cfg.kafka.regions_pinned == ("us-east", "eu-west")
    assert [cfg.kafka.partitioner()(r) for r in ("us-east", "eu-west")] == [0, 1]
    assert cfg.kafka.partitioner(2)("eu-west") == 1
    with pytest.raises(ConfigError, match=r"^kafka\.region_order: 'us-east' is listed twice"):
        load_config(env={"GPUFLOW_KAFKA_REGION_ORDER": "us-east,us-east"})


def test_compression_is_a_librdkafka_codec() -> None:
    assert load_config(env={}).kafka.compression == "zstd"
    assert load_config(env={"GPUFLOW_KAFKA_COMPRESSION": "lz4"}).kafka.compression == "lz4"
    with pytest.raises(ConfigError, match=r"^kafka\.compression: 'brotli' is not one of none, "):
        load_config(env={"GPUFLOW_KAFKA_COMPRESSION": "brotli"})


def test_the_broker_engine_is_tansu_or_logbroker() -> None:
    cfg = load_config(env={})
    assert (cfg.broker.engine, cfg.broker.retention_ms) == ("logbroker", 600_000)
    assert load_config(env={"GPUFLOW_BROKER_ENGINE": "tansu"}).broker.engine == "tansu"
    with pytest.raises(ConfigError, match=r"^broker\.engine: 'kafka' is not 'tansu' or 'logbrok"):
        load_config(env={"GPUFLOW_BROKER_ENGINE": "kafka"})


def test_fetch_pacing_and_batches_fail_at_load_when_out_of_range() -> None:
    cfg = load_config(env={})
    assert (cfg.kafka.fetch_interval_ms, cfg.worker.batch_max) == (50.0, 64)
    assert load_config(env={"GPUFLOW_KAFKA_FETCH_INTERVAL_MS": "0"}).kafka.fetch_interval_ms == 0
    with pytest.raises(ConfigError, match=r"^kafka\.fetch_interval_ms: must be >= 0, got -5"):
        load_config(env={"GPUFLOW_KAFKA_FETCH_INTERVAL_MS": "-5"})
    with pytest.raises(ConfigError, match=r"^worker\.batch_max: must be at least 1, got 0"):
        load_config(env={"GPUFLOW_WORKER_BATCH_MAX": "0"})


def test_porting_penalties_parse_and_fail_at_load() -> None:
    cfg = load_config(env={"GPUFLOW_WORKER_PORTING_PENALTY": "rocm=10, CANN=50"})
    assert cfg.worker.porting_penalties == {"rocm": 10.0, "cann": 50.0}
    assert load_config(env={}).worker.porting_penalties == {}  # the scorer's defaults
    for bad in ("rocm", "rocm=x", "rocm=150"):
        with pytest.raises(ConfigError, match=r"^worker\.porting_penalty: expected family="):
            load_config(env={"GPUFLOW_WORKER_PORTING_PENALTY": bad})


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"GPUFLOW_KAFKA_PARTITONS": "4"}, r"^kafka: unknown setting 'partitons'"),
        ({"GPUFLOW_STORE_PASSWD": "x"}, r"^store: unknown setting 'passwd'"),
    ],
)
def test_unknown_env_setting(source: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(env=source)


def test_unknown_file_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^worker: unknown setting 'threads'"):
        load_config(write_toml(tmp_path, "[worker]\nthreads = 4\n"), env={})
    with pytest.raises(ConfigError, match=r"^config: unknown setting 'kafak'"):
        load_config(write_toml(tmp_path, "[kafak]\npartitions = 4\n"), env={})


@pytest.mark.parametrize(
    ("section", "name", "value"),
    [
        ("kafka", "partitions", -1),
        ("kafka", "session_timeout_s", -0.5),
        ("broker", "port", -80),
        ("store", "flush_s", -1.0),
        ("worker", "stale_after_s", -10),
    ],
)
def test_negative_number(section: str, name: str, value: float) -> None:
    overrides: dict[str, Any] = {section: {name: value}}
    with pytest.raises(ConfigError, match=rf"^{section}\.{name}: must be >= 0"):
        load_config(None, env={}, **overrides)
    with pytest.raises(ConfigError, match=rf"^{section}\.{name}: must be >= 0"):
        load_config(env={f"GPUFLOW_{section.upper()}_{name.upper()}": str(value)})


def test_unreadable_or_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.toml"):
        load_config(tmp_path / "missing.toml", env={})
    with pytest.raises(ConfigError, match=r"gpuflow\.toml"):
        load_config(write_toml(tmp_path, "[kafka\n"), env={})


def test_config_error_is_an_infra_error() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(env={"GPUFLOW_KAFKA_PARTITIONS": "x"})
    assert isinstance(err.value, InfraError) and isinstance(err.value, GpuflowError)


def test_config_env_round_trips(tmp_path: Path) -> None:
    config = load_config(
        write_toml(tmp_path),
        env={"GPUFLOW_KAFKA_CLIENT_SASL_PASSWORD": "hunter2"},
        data_dir=str(tmp_path / "data"),
        broker={"port": 19092, "start_timeout_s": 2.5},
        store={"password": "pw", "user": "u"},
        worker={"app_id": "gpuflow-x"},
    )
    env = config_env(config)
    assert env["GPUFLOW_KAFKA_CLIENT_SASL_USERNAME"] == "file-user"
    assert env["GPUFLOW_DATA_DIR"] == str(tmp_path / "data")
    assert load_config(env=env) == config


def test_config_env_resolves_a_relative_data_dir(tmp_path: Path) -> None:
    env = config_env(load_config(env={}, data_dir="rel"))
    assert load_config(env=env).data_dir == (tmp_path / "rel").resolve()


def test_store_repr_hides_credentials() -> None:
    store = StoreConfig(dsn="http://bob:s3cret@ch:8123/db", user="bob", password="hunter2")
    text = repr(store)
    assert "hunter2" not in text and "s3cret" not in text
    assert "ch:8123/db" in text and "***" in text


def test_kafka_repr_hides_secret_client_settings() -> None:
    config = load_config(
        env={
            "GPUFLOW_KAFKA_CLIENT_SASL_USERNAME": "alice",
            "GPUFLOW_KAFKA_CLIENT_SASL_PASSWORD": "hunter2",
            "GPUFLOW_KAFKA_CLIENT_SASL_OAUTHBEARER_CLIENT_SECRET": "oauth-secret",
            "GPUFLOW_KAFKA_CLIENT_SSL_KEY_PASSWORD": "keypass",
            "GPUFLOW_KAFKA_CLIENT_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL": "https://idp",
            "GPUFLOW_STORE_PASSWORD": "store-pw",
        },
        kafka={"schema_registry_url": "https://reg-user:reg-pw@registry:8081"},
    )
    for text in (repr(config.kafka), repr(config), str(config)):
        for secret in ("hunter2", "oauth-secret", "keypass", "store-pw", "reg-pw"):
            assert secret not in text
        assert "alice" in text and "registry:8081" in text
    # only the repr is redacted: clients still get the real values
    assert config.kafka.client_conf()["sasl.password"] == "hunter2"


def test_network_section_and_links_file(tmp_path: Path) -> None:
    from infra.network import allocation_policy, hysteresis, load_links, network_view

    links = tmp_path / "links.yaml"
    links.write_text(
        "links:\n  - {src: a, dst: b, rtt_ms: 40, capacity_gbps: 100, cost_per_gb: 0.02,"
        " both_ways: true}\n  - {src: b, dst: c, rtt_ms: 70, capacity_gbps: 10}\n"
    )
    config = load_config(
        env={"GPUFLOW_NETWORK_LINKS_FILE": str(links), "GPUFLOW_NETWORK_ROUND_S": "0.25",
             "GPUFLOW_NETWORK_CROSS_REGION_GANGS": "true"},
    )  # fmt: skip
    assert config.network.round_s == 0.25 and config.network.cross_region_gangs
    assert load_config(env=config_env(config)).network == config.network
    view = network_view(config.network)
    assert sorted(view.graph.links) == ["a>b", "b>a", "b>c"]
    assert view.graph.link("b>a").cost_per_gb == 0.02
    assert allocation_policy(config.network).mode == "elastic"
    assert hysteresis(config.network).ttl_s == 30.0
    bad = tmp_path / "bad.yaml"
    bad.write_text("links:\n  - {src: a, dst: b, rtt_ms: 40, capacity_gbps: -1}\n")
    with pytest.raises(ConfigError, match=r"links\[0\]\.capacity_gbps"):
        load_links(bad)
    with pytest.raises(ConfigError, match=r"network\.policy"):
        allocation_policy(load_config(env={}, network={"policy": "greedy"}).network)


def test_replan_carbon_weight_out_of_range_names_the_field(tmp_path: Path) -> None:
    # 1 is carbon only, 0 price only; 1.5 is no weight at all
    with pytest.raises(ConfigError, match=r"^replan\.carbon_weight: must be in \[0, 1\], got 1.5"):
        load_config(write_toml(tmp_path, "[replan]\ncarbon_weight = 1.5\n"), env={})
    config = load_config(
        env={"GPUFLOW_REPLAN_CARBON_WEIGHT": "1", "GPUFLOW_REPLAN_MAX_SLOWDOWN": "0.02"}
    )
    assert (config.replan.carbon_weight, config.replan.max_slowdown) == (1.0, 0.02)
