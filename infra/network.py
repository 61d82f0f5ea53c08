"""The worker's network model from configuration: links file, link graph, quota settings.

A links file (YAML) names the links the worker knows before any `LinkTelemetry` arrives, with
what telemetry cannot say (the price per GB):

    links:
      - {src: us-east, dst: eu-west, rtt_ms: 76, capacity_gbps: 100, cost_per_gb: 0.02}
      - {src: eu-west, dst: us-east, rtt_ms: 76, capacity_gbps: 100, cost_per_gb: 0.02}
      - {src: us-east, dst: us-west, rtt_ms: 62, capacity_gbps: 200, both_ways: true}

`both_ways: true` adds the reverse link with the same figures. A bad entry is a ConfigError
naming it (`network.links_file: links[2].capacity_gbps: expected a number >= 0`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from infra.config import NetworkConfig
from infra.errors import ConfigError
from scorer.network import (
    AllocationPolicy,
    Hysteresis,
    Link,
    LinkGraph,
    LinkPolicy,
    NetworkError,
    NetworkView,
)

__all__ = ["allocation_policy", "hysteresis", "load_links", "network_view"]

_WHERE = "network.links_file"


def _number(raw: Mapping[str, Any], key: str, where: str, default: float | None = None) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ConfigError(f"{_WHERE}: {where}.{key}: expected a number >= 0, got {value!r}")
    return float(value)


def load_links(path: str | Path) -> list[Link]:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{_WHERE}: cannot read {path}: {exc}".splitlines()[0]) from exc
    rows = data.get("links") if isinstance(data, Mapping) else None
    if not isinstance(rows, list):
        raise ConfigError(f"{_WHERE}: {path} must hold `links:`, a list of links")
    links: list[Link] = []
    for i, raw in enumerate(rows):
        where = f"links[{i}]"
        if not isinstance(raw, Mapping) or not raw.get("src") or not raw.get("dst"):
            raise ConfigError(f"{_WHERE}: {where}: needs src and dst")
        src, dst = str(raw["src"]), str(raw["dst"])
        figures = (
            _number(raw, "rtt_ms", where),
            _number(raw, "capacity_gbps", where),
            _number(raw, "cost_per_gb", where, 0.0),
        )
        try:
            links.append(Link(src, dst, *figures))
            if raw.get("both_ways"):
                links.append(Link(dst, src, *figures))
        except NetworkError as exc:
            raise ConfigError(f"{_WHERE}: {where}: {exc}") from exc
    return links


def network_view(config: NetworkConfig) -> NetworkView:
    """The link graph (from the links file, if any) wrapped for placement."""
    links = load_links(config.links_file) if config.links_file else []
    if not 0.0 <= config.headroom < 1.0:
        raise ConfigError(f"network.headroom: must be in 0..1, got {config.headroom}")
    return NetworkView(LinkGraph(links, LinkPolicy(headroom=config.headroom)))


def allocation_policy(config: NetworkConfig) -> AllocationPolicy:
    try:
        return AllocationPolicy(mode=config.policy, idle_gbps=config.idle_gbps)
    except NetworkError as exc:
        raise ConfigError(f"network.policy: {exc}") from exc


def hysteresis(config: NetworkConfig) -> Hysteresis:
    try:
        return Hysteresis(
            rel_change=config.change_threshold,
            abs_change_gbps=config.change_floor_gbps,
            ttl_s=config.quota_ttl_s,
            renew_before_s=config.renew_before_s,
        )
    except NetworkError as exc:
        raise ConfigError(f"network.quota_ttl_s / renew_before_s: {exc}") from exc
