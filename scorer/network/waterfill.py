"""Weighted max-min fair sharing of links by flows, with demand caps and guaranteed minimums.

Every flow f crosses the links `links[f]` (its path) and gets one rate x_f on all of them.
Water-filling raises a common level t; each flow's rate is

    x_f(t) = clip(w_f * t, m_f, d_f)          (weight w, guaranteed minimum m, demand cap d)

and a link saturates when the rates of the flows on it add up to its capacity: those flows
freeze at x_f(t); the others keep rising. The result is weighted max-min fair: a flow below
its demand crosses a saturated link on which no flow above its minimum has a larger x / w.

Minimums first: if the minimums on a link exceed its capacity they are scaled down on that link
(each flow by the smallest factor over its links), so no link is ever over capacity.

Vectorised: the breakpoints of every link's load function (each flow's m/w and d/w) are sorted
once; each round evaluates all links' loads at their breakpoints with segmented cumulative sums,
finds the lowest saturation level, and freezes the flows on the links that saturate there. At
most one round per distinct saturation level (<= number of links).
"""

from __future__ import annotations

import numpy as np

from scorer.network.errors import NetworkError

__all__ = ["equal_split", "link_loads", "waterfill"]

_REL = 1e-12


def _entries(links: np.ndarray, n_links: int) -> tuple[np.ndarray, np.ndarray]:
    """(flow, link) of every valid path entry; -1 pads a short path."""
    if links.ndim != 2:
        raise NetworkError(f"links must be (flows, hops), got shape {links.shape}")
    flow, hop = np.nonzero(links >= 0)
    link = links[flow, hop].astype(np.int64)
    if link.size and link.max() >= n_links:
        raise NetworkError(f"a path names link {int(link.max())} of {n_links}")
    return flow.astype(np.int64), link


def link_loads(rates: np.ndarray, links: np.ndarray, n_links: int) -> np.ndarray:
    """Sum of the rates on each link."""
    flow, link = _entries(np.asarray(links), n_links)
    return np.bincount(link, weights=np.asarray(rates, float)[flow], minlength=n_links)


def equal_split(capacity: np.ndarray, links: np.ndarray) -> np.ndarray:
    """The network-blind baseline: each link split equally among the flows on it, whatever they
    need or do; a flow gets the smallest of its links' shares."""
    capacity = np.asarray(capacity, float)
    links = np.asarray(links)
    flow, link = _entries(links, capacity.shape[0])
    count = np.bincount(link, minlength=capacity.shape[0])
    share = capacity[link] / np.maximum(count[link], 1)
    out = np.full(links.shape[0], np.inf)
    np.minimum.at(out, flow, share)
    return out


def waterfill(
    capacity: np.ndarray,
    links: np.ndarray,
    weight: np.ndarray,
    demand: np.ndarray,
    minimum: np.ndarray | None = None,
) -> np.ndarray:
    """Rates of `len(links)` flows over links of `capacity` (see the module docstring).

    capacity (L,) >= 0; links (F, H) link indices, -1 padding; weight (F,) > 0; demand (F,) >= 0
    (inf: as much as the path gives); minimum (F,) >= 0 or None. A flow without links gets its
    demand.
    """
    cap = np.maximum(np.asarray(capacity, float), 0.0)
    links = np.asarray(links)
    w = np.asarray(weight, float)
    n_flows, n_links = links.shape[0], cap.shape[0]
    if w.shape != (n_flows,) or not (w > 0).all():
        raise NetworkError("every flow needs a weight > 0")
    flow, link = _entries(links, n_links)
    d = np.array(demand, float)
    if (d < 0).any() or np.isnan(d).any():
        raise NetworkError("demands must be >= 0")
    path_cap = np.full(n_flows, np.inf)
    np.minimum.at(path_cap, flow, cap[link])
    d = np.minimum(d, path_cap)  # no flow can use more than its narrowest link: all finite
    m = np.zeros(n_flows) if minimum is None else np.minimum(np.asarray(minimum, float), d)
    if (m < 0).any():
        raise NetworkError("minimums must be >= 0")
    m = _fit_minimums(m, flow, link, cap)
    x = d.copy()  # flows without links keep their demand
    routed = np.zeros(n_flows, bool)
    routed[flow] = True
    if flow.size:
        x[routed] = 0.0
        _fill(x, cap, flow, link, w, m, d, routed)
    return x


def _fit_minimums(m: np.ndarray, flow: np.ndarray, link: np.ndarray, cap: np.ndarray) -> np.ndarray:
    load = np.bincount(link, weights=m[flow], minlength=cap.shape[0])
    factor = np.where(load > cap, cap / np.where(load > 0, load, 1.0), 1.0)
    scale = np.ones(m.shape[0])
    np.minimum.at(scale, flow, factor[link])
    return m * scale


def _fill(
    x: np.ndarray,
    cap: np.ndarray,
    flow: np.ndarray,
    link: np.ndarray,
    w: np.ndarray,
    m: np.ndarray,
    d: np.ndarray,
    routed: np.ndarray,
) -> None:
    """Progressive filling in place: x gets the rates of the routed flows."""
    n_links = cap.shape[0]
    # two breakpoints per (flow, link) entry: activation at m/w, satiation at d/w
    ev_flow = np.concatenate([flow, flow])
    ev_link = np.concatenate([link, link])
    ev_t = np.concatenate([m[flow] / w[flow], d[flow] / w[flow]])
    ev_ds = np.concatenate([w[flow], -w[flow]])
    ev_dc = np.concatenate([-m[flow], d[flow]])
    order = np.lexsort((ev_t, ev_link))
    ev_flow, ev_link, ev_t = ev_flow[order], ev_link[order], ev_t[order]
    ev_ds, ev_dc = ev_ds[order], ev_dc[order]
    starts = np.flatnonzero(np.r_[True, ev_link[1:] != ev_link[:-1]])
    seg_link = ev_link[starts]
    seg_of = np.repeat(np.arange(starts.shape[0]), np.diff(np.r_[starts, ev_link.shape[0]]))
    cap_ev = cap[ev_link]
    base = np.zeros(n_links)  # load of frozen flows
    frozen = ~routed
    level = 0.0
    while True:
        live = ~frozen[ev_flow]
        if not live.any():
            return
        ds, dc = np.where(live, ev_ds, 0.0), np.where(live, ev_dc, 0.0)
        mins = np.bincount(ev_link, weights=np.where(live & (ev_ds > 0), m[ev_flow], 0.0),
                           minlength=n_links)  # fmt: skip
        slope = _segmented_cumsum(ds, starts, seg_of)
        const = _segmented_cumsum(dc, starts, seg_of) + (base + mins)[ev_link]
        load = const + slope * ev_t
        over = live & (load >= cap_ev * (1 - _REL) - _REL)
        sat_level = _saturation_levels(over, slope, const, ev_t, cap_ev, starts, seg_of, level)
        has_live = np.bincount(seg_of, weights=live, minlength=starts.shape[0]) > 0
        sat_level = np.where(has_live, sat_level, np.inf)
        t_star = float(sat_level.min(initial=np.inf))
        if not np.isfinite(t_star):
            open_flows = np.unique(ev_flow[live])
            x[open_flows] = d[open_flows]
            return
        level = max(level, t_star)
        hit = seg_link[sat_level <= level * (1 + 1e-9) + _REL]
        on_hit = np.isin(ev_link, hit) & live
        newly = np.unique(ev_flow[on_hit])
        x[newly] = np.clip(w[newly] * level, m[newly], d[newly])
        frozen[newly] = True
        base += np.bincount(link, weights=np.where(np.isin(flow, newly), x[flow], 0.0),
                            minlength=n_links)  # fmt: skip


def _segmented_cumsum(values: np.ndarray, starts: np.ndarray, seg_of: np.ndarray) -> np.ndarray:
    total = np.cumsum(values)
    before = total[starts] - values[starts]
    return total - before[seg_of]


def _saturation_levels(
    over: np.ndarray,
    slope: np.ndarray,
    const: np.ndarray,
    ev_t: np.ndarray,
    cap_ev: np.ndarray,
    starts: np.ndarray,
    seg_of: np.ndarray,
    level: float,
) -> np.ndarray:
    """Per link segment: the level at which its load first reaches capacity (inf: never)."""
    out = np.full(starts.shape[0], np.inf)
    idx = np.flatnonzero(over)
    if not idx.size:
        return out
    segs, first = np.unique(seg_of[idx], return_index=True)
    k1 = idx[first]
    at_start = k1 == starts[segs]
    k0 = np.where(at_start, k1, k1 - 1)
    s0 = slope[k0]
    crossing = np.where(
        at_start | (s0 <= 0),
        np.where(at_start, level, ev_t[k0]),
        (cap_ev[k0] - const[k0]) / np.where(s0 > 0, s0, 1.0),
    )
    out[segs] = np.maximum(np.minimum(crossing, ev_t[k1]), level)
    return out
