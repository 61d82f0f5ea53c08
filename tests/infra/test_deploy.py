"""The deployment files in infra/deploy/ (Kubernetes manifests, the compose file, Prometheus and
Grafana provisioning) parse, and agree with the code: pinned images, ports, probes on pages
the worker serves, CLI commands that exist, and every environment variable a real setting
whose value loads. Neither Docker nor Kubernetes runs here; this is what can be checked."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuflow.cli import app as cli
from infra.config import config_key, load_config
from streams.worker.app import create_app

DEPLOY = Path(__file__).resolve().parents[2] / "infra" / "deploy"
K8S = DEPLOY / "k8s"
IMAGE = "ghcr.io/gpuflow/gpuflow:0.1.0"
WORKLOADS = {"StatefulSet", "Deployment", "DaemonSet", "Job"}
# not gpuflow settings, each set on purpose: the NVIDIA container runtime's own variables
RUNTIME_ENV = {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}


def k8s_docs() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in k8s_docs() if d["kind"] == kind]


def containers(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from doc["spec"]["template"]["spec"]["containers"]


def env_from(container: dict[str, Any]) -> dict[str, str]:
    """The variables a container gets from the ConfigMaps and Secrets it names."""
    sources = {
        (d["kind"], d["metadata"]["name"]): {**d.get("data", {}), **d.get("stringData", {})}
        for d in k8s_docs()
        if d["kind"] in ("ConfigMap", "Secret")
    }
    env: dict[str, str] = {}
    for ref in container.get("envFrom", []):
        kind, key = (
            ("ConfigMap", "configMapRef") if "configMapRef" in ref else ("Secret", "secretRef")
        )
        name = ref[key]["name"]
        assert (kind, name) in sources, f"{kind} {name} is not in the manifests"
        env |= sources[(kind, name)]
    return env


def check_gpuflow_env(env: dict[str, str], where: str) -> Any:
    """Every GPUFLOW_* name is a real setting and the values load as a config."""
    unknown = sorted(n for n in env if n.startswith("GPUFLOW_") and config_key(n) is None)
    assert unknown == [], f"{where}: not gpuflow settings: {unknown}"
    return load_config(env={k: v for k, v in env.items() if k.startswith("GPUFLOW_")})


def worker_paths() -> set[str]:
    app, _ = create_app(load_config(env={}, kafka={"bootstrap_servers": "127.0.0.1:9"}))
    web: Any = app.web  # Faust's aiohttp driver: its routes are the worker's pages
    return {r.canonical for r in web.web_app.router.resources()}


def cli_commands() -> set[str]:
    return {c.name or (c.callback.__name__ if c.callback else "") for c in cli.registered_commands}


def test_every_file_parses_and_kustomize_lists_every_manifest() -> None:
    for path in DEPLOY.rglob("*"):
        if path.suffix in (".yaml", ".yml"):
            assert list(yaml.safe_load_all(path.read_text())), path
        elif path.suffix == ".json":
            assert json.loads(path.read_text())["panels"], path
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    present = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(listed) == sorted(present)
    for doc in k8s_docs():
        assert doc["apiVersion"] and doc["metadata"]["name"], doc
    kinds = {d["kind"] for d in k8s_docs()}
    assert {"StatefulSet", "DaemonSet", "Job", "ConfigMap", "Secret", "Service"} <= kinds


def test_workloads_use_the_pinned_image_and_real_commands() -> None:
    commands = cli_commands()
    for doc in k8s_docs():
        if doc["kind"] not in WORKLOADS:
            continue
        for c in containers(doc):
            assert c["image"] == IMAGE, (doc["metadata"]["name"], c["image"])
            assert c["args"][0] in commands, (doc["metadata"]["name"], c["args"])
            assert "resources" in c and "requests" in c["resources"], doc["metadata"]["name"]


def test_worker_ports_and_probes_match_the_worker() -> None:
    [worker] = by_kind("StatefulSet")
    [c] = containers(worker)
    env = env_from(c)
    config = check_gpuflow_env(env, "worker")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": config.worker.web_port}
    assert config.worker.web_host == "0.0.0.0"  # reachable by probes and Prometheus
    paths = worker_paths()
    probes = {k: c[k]["httpGet"] for k in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"]["path"] == "/health/"
    assert probes["startupProbe"]["path"] == "/health/"
    assert probes["readinessProbe"]["path"] == "/ready/"
    for probe in probes.values():
        assert probe["path"] in paths and probe["port"] in ports
    annotations = worker["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] in paths
    assert int(annotations["prometheus.io/port"]) == config.worker.web_port
    grace = worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > config.worker.shutdown_timeout_s  # SIGTERM's bound fits in the grace
    assert worker["spec"]["replicas"] <= config.kafka.partitions  # else workers idle
    [service] = [s for s in by_kind("Service") if s["metadata"]["name"] == "gpuflow-worker"]
    assert service["spec"]["selector"] == worker["spec"]["selector"]["matchLabels"]


def test_external_kafka_with_sasl_tls_and_a_clickhouse_server() -> None:
    [worker] = by_kind("StatefulSet")
    [c] = containers(worker)
    config = check_gpuflow_env(env_from(c), "worker")
    client = config.kafka.client
    assert not config.kafka.embedded and config.kafka.replication_factor >= 3
    assert client["security.protocol"] == "SASL_SSL"
    assert {"sasl.mechanism", "sasl.username", "sasl.password"} <= set(client)
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert str(Path(client["ssl.ca.location"]).parent) in mounts
    assert config.store.dsn.startswith("https://") and config.store.password
    secret_keys = {k for s in by_kind("Secret") for k in s.get("stringData", {})}
    assert {"GPUFLOW_KAFKA_CLIENT_SASL_PASSWORD", "GPUFLOW_STORE_PASSWORD"} <= secret_keys
    config_keys = {k for m in by_kind("ConfigMap") for k in m["data"]}
    assert not {k for k in config_keys if "PASSWORD" in k}, "credentials belong in the Secret"


def test_agent_daemonset_runs_on_gpu_nodes_without_taking_a_gpu() -> None:
    [agent] = by_kind("DaemonSet")
    spec = agent["spec"]["template"]["spec"]
    assert spec["nodeSelector"]["nvidia.com/gpu.present"] == "true"
    assert any(t["key"] == "nvidia.com/gpu" for t in spec["tolerations"])
    [c] = containers(agent)
    assert "nvidia.com/gpu" not in json.dumps(c["resources"])
    check_gpuflow_env(env_from(c), "agent")
    args = " ".join(c["args"])
    for var in c["env"]:
        name = var["name"]
        if name.startswith("GPUFLOW_"):
            assert config_key(name), name
        elif name not in RUNTIME_ENV:  # anything else must be consumed by the args
            assert f"$({name})" in args, f"agent env {name} is neither a setting nor used"


def test_topic_job_creates_topics_with_the_shared_config() -> None:
    [job] = by_kind("Job")
    [c] = containers(job)
    assert c["args"][0] == "create-topics"
    assert job["spec"]["template"]["spec"]["restartPolicy"] in ("OnFailure", "Never")
    check_gpuflow_env(env_from(c), "topics job")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_compose_runs_kafka_kraft_clickhouse_workers_prometheus_grafana(compose: Any) -> None:
    services = compose["services"]
    assert {"kafka", "clickhouse", "topics", "prometheus", "grafana"} <= set(services)
    for name, svc in services.items():
        image = svc["image"]
        assert re.fullmatch(r"[\w./-]+:[\w.-]+", image) and not image.endswith(":latest"), name
        for dep in svc.get("depends_on", []):
            assert dep in services, (name, dep)
    assert "broker,controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]
    workers = {n: s for n, s in services.items() if s.get("command") == ["worker"]}
    assert len(workers) >= 3
    paths, commands = worker_paths(), cli_commands()
    for name, svc in workers.items():
        config = check_gpuflow_env(svc["environment"], name)
        assert config.kafka.bootstrap_servers.split(":")[0] in services
        assert config.store.dsn.split("//")[1].split(":")[0] in services
        assert svc["ports"][0].endswith(f":{config.worker.web_port}")
        assert "/health/" in paths and "/health/" in " ".join(svc["healthcheck"]["test"])
    assert services["topics"]["command"][0] in commands
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    [job] = prom["scrape_configs"]
    assert job["metrics_path"] in paths
    targets = {t for sc in job["static_configs"] for t in sc["targets"]}
    assert targets == {f"{n}:6066" for n in workers}


def test_grafana_provisioning_matches_the_dashboards(compose: Any) -> None:
    sources = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "gpuflow.yaml").read_text()
    )["datasources"]
    types = {s["type"] for s in sources}
    for name in ("gpuflow-live.json", "gpuflow-history.json"):
        dash = json.loads((DEPLOY / "grafana" / name).read_text())
        used = {p["datasource"]["type"] for p in dash["panels"]}
        assert used <= types, (name, used - types)
        [var] = dash["templating"]["list"]
        assert var["type"] == "datasource" and var["query"] in types
    grafana = compose["services"]["grafana"]
    assert "grafana-clickhouse-datasource" in grafana["environment"]["GF_INSTALL_PLUGINS"]
    mounts = " ".join(grafana["volumes"])
    assert "./grafana:" in mounts and "./grafana/provisioning:" in mounts
