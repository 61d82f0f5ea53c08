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

from dataclasses import dataclass

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
    return _per_flow_min(flow, share, links.shape[0], np.inf)


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
    path_cap = _per_flow_min(flow, cap[link], n_flows, np.inf)
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
        problem, routed = _satisfied(x, _Problem(cap, flow, link, w, m, d), routed)
        if problem.flow.size:
            _fill(x, problem, routed)
    return x


@dataclass(frozen=True)
class _Problem:
    """Capacities, the (flow, link) entries grouped by flow, and per-flow w, m, d."""

    cap: np.ndarray
    flow: np.ndarray
    link: np.ndarray
    w: np.ndarray
    m: np.ndarray
    d: np.ndarray


def _satisfied(x: np.ndarray, p: _Problem, routed: np.ndarray) -> tuple[_Problem, np.ndarray]:
    """Settle, before filling, the flows that surely get their whole demand (most computing
    jobs): no link can saturate below level (capacity - sum of minimums) / sum of weights,
    so a flow whose d / w is below that on all its links ends at d. Exact, and repeated while
    it settles flows (settling raises the others' bounds)."""
    cap, flow, link, w, m, d = p.cap.copy(), p.flow, p.link, p.w, p.m, p.d
    n_links = cap.shape[0]
    for _ in range(4):
        weights = np.bincount(link, weights=w[flow], minlength=n_links)
        mins = np.bincount(link, weights=m[flow], minlength=n_links)
        bound = np.where(weights > 0, (cap - mins) / np.where(weights > 0, weights, 1.0), np.inf)
        lowest = _per_flow_min(flow, bound[link], x.shape[0], np.inf)
        done = routed & (d / w <= lowest * (1 - 1e-12))
        if not done.any():
            break
        x[done] = d[done]
        gone = done[flow]
        cap -= np.bincount(link[gone], weights=d[flow[gone]], minlength=n_links)
        cap = np.maximum(cap, 0.0)
        flow, link = flow[~gone], link[~gone]
        routed = routed & ~done
    return _Problem(cap, flow, link, w, m, d), routed


def _fit_minimums(m: np.ndarray, flow: np.ndarray, link: np.ndarray, cap: np.ndarray) -> np.ndarray:
    load = np.bincount(link, weights=m[flow], minlength=cap.shape[0])
    factor = np.where(load > cap, cap / np.where(load > 0, load, 1.0), 1.0)
    scale = np.minimum(_per_flow_min(flow, factor[link], m.shape[0], 1.0), 1.0)
    return m * scale


def _fill(x: np.ndarray, p: _Problem, routed: np.ndarray) -> None:
    """Progressive filling in place: x gets the rates of the routed flows."""
    events = _Events(p)
    frozen = ~routed
    level = 0.0
    sat = np.full(p.cap.shape[0], np.inf)
    busy = np.flatnonzero(events.e_len > 0)
    sat[busy] = events.levels(busy, level)
    while True:
        if not np.isfinite(sat.min(initial=np.inf)):
            open_flows = np.flatnonzero(~frozen)
            x[open_flows] = p.d[open_flows]
            return
        newly, level = events.saturate(sat, frozen, x, level)
        touched = events.freeze(newly, x)  # their rates now load every link they cross
        affected = touched[np.isfinite(sat[touched])]
        if affected.size:
            sat[affected] = events.levels(affected, level)


class _Events:
    """Each link's load as a piecewise-linear function of the level t, kept as breakpoints.

    An entry (flow f on link l) contributes m until t = m/w, w t until d/w, then d: at its two
    breakpoints the slope changes by +w then -w and the constant by -m then +d. Breakpoints of
    one link at the same level are merged (flows of one shape share them), so a link holds a
    handful however many flows cross it; a frozen flow's contributions are taken out of them
    and its rate added to the link's base load."""

    def __init__(self, p: _Problem) -> None:
        cap, flow, link, w, m, d = p.cap, p.flow, p.link, p.w, p.m, p.d
        n_links, n = cap.shape[0], flow.shape[0]
        self.cap, self.w, self.m, self.d = cap, w, m, d
        t = np.concatenate([m[flow] / w[flow], d[flow] / w[flow]])
        both = np.concatenate([link, link])
        # one float key sorts by link, then level (levels scaled into [0, 0.5))
        key = both + t / (2.0 * float(t.max(initial=0.0)) + 1.0)
        order = np.argsort(key)
        first = np.r_[True, key[order][1:] != key[order][:-1]]
        agg = np.empty(2 * n, np.int64)
        agg[order] = np.cumsum(first) - 1
        n_agg = int(first.sum())
        self.agg_a, self.agg_s = agg[:n], agg[n:]  # each entry's two breakpoints
        self.t = t[order][first]
        agg_link = both[order][first]
        wf, mf, df = w[flow], m[flow], d[flow]
        self.ds = np.bincount(agg, np.concatenate([wf, -wf]), n_agg)
        self.dc = np.bincount(agg, np.concatenate([-mf, df]), n_agg)
        self.a_len = np.bincount(agg_link, minlength=n_links)
        self.a_start = np.cumsum(self.a_len) - self.a_len
        self.base = np.zeros(n_links)  # load of frozen flows
        self.mins = np.bincount(link, mf, n_links)  # live flows' minimums: load below any t
        self.entry_flow, self.entry_link = flow, link  # grouped by flow (np.nonzero order)
        self.f_len = np.bincount(flow, minlength=w.shape[0])
        self.f_start = np.cumsum(self.f_len) - self.f_len
        self.by_link = _stable_order(link, n_links)  # entries by link
        self.e_len = np.bincount(link, minlength=n_links)
        self.e_start = np.cumsum(self.e_len) - self.e_len
        self.shares = _sharing(flow, link, n_links)

    def saturate(
        self, sat: np.ndarray, frozen: np.ndarray, x: np.ndarray, level: float
    ) -> tuple[np.ndarray, float]:
        """Freeze the lowest saturating link, and with it every link of higher level that
        shares no flow with any link of lower level (saturating or not): nothing below its
        level can change its load, so its level is exact. Returns the flows frozen and the
        new level."""
        order = np.argsort(sat)
        order = order[np.isfinite(sat[order])]
        blocked = np.asarray(np.tril(self.shares[np.ix_(order, order)], -1).any(axis=1))
        blocked[0] = False  # the lowest always freezes
        chosen = order[~blocked]
        level = max(level, float(sat[order[0]]))
        entries = self.by_link[_ranges(self.e_start[chosen], self.e_len[chosen])]
        at = np.repeat(np.maximum(sat[chosen], level), self.e_len[chosen])
        flows = self.entry_flow[entries]
        live = ~frozen[flows]
        flows, at = flows[live], at[live]
        x[flows] = np.clip(self.w[flows] * at, self.m[flows], self.d[flows])
        frozen[flows] = True
        sat[chosen] = np.inf
        return flows, level

    def freeze(self, flows: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Take frozen flows out of their links' breakpoints, add their rates to the links'
        base load; the links touched."""
        pos = _ranges(self.f_start[flows], self.f_len[flows])
        lk, fl = self.entry_link[pos], self.entry_flow[pos]
        n_links, n_agg = self.base.shape[0], self.t.shape[0]
        self.base += np.bincount(lk, x[fl], n_links)
        self.mins -= np.bincount(lk, self.m[fl], n_links)
        wf = self.w[fl]
        a, s = self.agg_a[pos], self.agg_s[pos]
        self.ds -= np.bincount(a, wf, n_agg) - np.bincount(s, wf, n_agg)
        self.dc += np.bincount(a, self.m[fl], n_agg) - np.bincount(s, self.d[fl], n_agg)
        return np.flatnonzero(_mask(lk, n_links))

    def levels(self, links: np.ndarray, level: float) -> np.ndarray:
        """Per link in `links`: the level at which its load reaches capacity (inf: never)."""
        lengths = self.a_len[links]
        pos = _ranges(self.a_start[links], lengths)
        seg = np.repeat(np.arange(links.shape[0]), lengths)
        seg_start = np.cumsum(lengths) - lengths
        slope = _segmented_cumsum(self.ds[pos], seg_start, seg)
        const = _segmented_cumsum(self.dc[pos], seg_start, seg)
        const += (self.base[links] + self.mins[links])[seg]
        t = self.t[pos]
        cap = self.cap[links][seg]
        over = const + slope * t >= cap * (1 - _REL) - _REL
        out = np.full(links.shape[0], np.inf)
        idx = np.flatnonzero(over)
        if not idx.size:
            return out
        first = np.r_[True, seg[idx][1:] != seg[idx][:-1]]
        segs, k1 = seg[idx][first], idx[first]
        at_start = k1 == seg_start[segs]
        k0 = np.where(at_start, k1, k1 - 1)
        s0 = slope[k0]
        crossing = np.where(
            at_start | (s0 <= 0),
            np.where(at_start, level, t[k0]),
            (cap[k0] - const[k0]) / np.where(s0 > 0, s0, 1.0),
        )
        out[segs] = np.maximum(np.minimum(crossing, t[k1]), level)
        return out


def _per_flow_min(flow: np.ndarray, values: np.ndarray, n_flows: int, empty: float) -> np.ndarray:
    """Smallest of `values` per flow (entries grouped by flow, as np.nonzero yields them)."""
    out = np.full(n_flows, empty)
    if flow.size:
        starts = np.flatnonzero(np.r_[True, flow[1:] != flow[:-1]])
        out[flow[starts]] = np.minimum.reduceat(values, starts)
    return out


def _stable_order(small: np.ndarray, bound: int) -> np.ndarray:
    """np.argsort(small, kind="stable") for integers in [0, bound): as int16 when they fit,
    where numpy sorts by radix (several times faster than its merge sort of int64)."""
    if bound <= np.iinfo(np.int16).max:
        small = small.astype(np.int16)
    return np.argsort(small, kind="stable")


def _mask(idx: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, bool)
    out[idx] = True
    return out


def _sharing(flow: np.ndarray, link: np.ndarray, n_links: int) -> np.ndarray:
    """(links x links) True where some flow crosses both (entries grouped by flow): the pairs
    coded a * n_links + b and counted at once, not written into the matrix pair by pair."""
    codes = []
    for gap in range(1, 8):  # paths are short: pair each entry with the next few of its flow
        if gap >= flow.shape[0]:
            break
        same = flow[:-gap] == flow[gap:]
        if not same.any():
            break
        codes.append(link[:-gap][same] * n_links + link[gap:][same])
    if not codes:
        return np.zeros((n_links, n_links), bool)
    pairs = np.bincount(np.concatenate(codes), minlength=n_links * n_links)
    shares = pairs.reshape(n_links, n_links) > 0
    return shares | shares.T


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated aranges [start, start + length) for each pair."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(total)


def _segmented_cumsum(values: np.ndarray, starts: np.ndarray, seg_of: np.ndarray) -> np.ndarray:
    if not values.size:
        return values
    total = np.cumsum(values)
    before = total[starts] - values[starts]
    return total - before[seg_of]
