"""p99 latency of a pool of replicas from an M/M/c queue (numpy, vectorised over minutes).

A replica has `slots` concurrent sequences; the load balancer spreads requests over every
serving replica, so `replicas x slots` servers share one Poisson stream, each holding a request
for an exponential time of mean `service_ms`. The sojourn time T = wait + service; with the
Erlang C probability Pw of waiting and the wait's rate theta = c·mu - lambda:

    P(T > t) = (1 - Pw)·e^(-mu·t) + Pw·(theta·e^(-mu·t) - mu·e^(-theta·t)) / (theta - mu)

p99 is the t where that is 1 %, found by bisection. An overloaded pool (lambda >= c·mu) has no
steady state: its p99 is infinite.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["capacity_at_slo", "erlang_c", "p99_ms", "p99_ms_many", "pool_capacity_rps"]

_QUANTILE = 0.99
_STEPS = 60  # bisection halvings: the bracket shrinks by 2**-60


def erlang_c(servers: ArrayLike, offered: ArrayLike) -> NDArray[np.float64]:
    """Probability an arrival waits in M/M/c (offered load a = lambda/mu in Erlangs);
    1 where a >= c."""
    c = np.asarray(servers, dtype=np.int64)
    a = np.asarray(offered, dtype=np.float64)
    b = np.ones(np.broadcast(c, a).shape)
    for k in range(1, int(c.max(initial=0)) + 1):  # Erlang B by its stable recursion
        step = a * b / (k + a * b)
        b = np.where(k <= c, step, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = c * b / (c - a * (1.0 - b))
    return np.where((a < c) & (c > 0), np.clip(wait, 0.0, 1.0), 1.0)


def _survival(
    t: NDArray[np.float64], mu: float, theta: NDArray[np.float64], pw: NDArray[np.float64]
) -> NDArray[np.float64]:
    service = np.exp(-mu * t)
    near = np.abs(theta - mu) < 1e-9 * mu
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mixed = (theta * service - mu * np.exp(-theta * t)) / (theta - mu)
    mixed = np.where(near, service * (1.0 + mu * t), mixed)
    return np.asarray((1.0 - pw) * service + pw * mixed)


def p99_ms_many(rate_rps: ArrayLike, servers: ArrayLike, service_ms: float) -> NDArray[np.float64]:
    """p99 sojourn time, ms, per element (rate, servers); inf where the pool is overloaded;
    0 where nothing arrives."""
    lam = np.asarray(rate_rps, dtype=np.float64)
    c = np.asarray(servers, dtype=np.int64)
    lam, c = np.broadcast_arrays(lam, c)
    mu = 1000.0 / service_ms
    stable = (c > 0) & (lam < c * mu)
    theta = np.where(stable, c * mu - lam, mu)
    pw = np.where(stable, erlang_c(np.where(stable, c, 1), np.where(stable, lam / mu, 0.0)), 0.0)
    lo = np.zeros(lam.shape)
    hi = np.full(lam.shape, (math.log(1 / (1 - _QUANTILE)) + 1.0) * 4.0) / np.minimum(theta, mu)
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        above = _survival(mid, mu, theta, pw) > 1 - _QUANTILE
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    out = hi * 1000.0
    out = np.where(stable, out, np.inf)
    return np.asarray(np.where(lam <= 0, 0.0, out))


def p99_ms(rate_rps: float, servers: int, service_ms: float) -> float:
    """p99 sojourn time, ms, of `servers` M/M/c servers at `rate_rps` (inf when overloaded)."""
    return float(p99_ms_many(np.array([rate_rps]), np.array([servers]), service_ms)[0])


def capacity_at_slo(slots: int, service_ms: float, slo_ms: float, replicas: int = 1) -> float:
    """Requests/s one replica serves with p99 <= slo_ms when `replicas` of them share the load
    (0 when even an idle slot misses the SLO: exponential service alone has p99 4.6 x mean)."""
    servers = slots * replicas
    top = servers * 1000.0 / service_ms
    if p99_ms(top * 1e-9, servers, service_ms) > slo_ms:
        return 0.0
    lo, hi = 0.0, top
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if p99_ms(mid, servers, service_ms) <= slo_ms else (lo, mid)
    return lo / replicas


def pool_capacity_rps(
    slots: int, service_ms: float, slo_ms: float, max_replicas: int
) -> NDArray[np.float64]:
    """Requests/s n replicas serve together with p99 <= slo_ms, for n = 0..max_replicas
    (bisection on the rate for every n at once; pooling makes it more than n x one's)."""
    n = np.arange(max_replicas + 1)
    servers = n * slots
    top = servers * 1000.0 / service_ms
    lo, hi = np.zeros(len(n)), top.astype(np.float64)
    for _ in range(40):
        mid = (lo + hi) / 2
        ok = p99_ms_many(np.maximum(mid, 1e-12), np.maximum(servers, 1), service_ms) <= slo_ms
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    lo[0] = 0.0
    return np.asarray(lo)
