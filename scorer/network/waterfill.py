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
        cap, flow, link, routed = _satisfied(x, cap, flow, link, w, m, d, routed)
        if flow.size:
            _fill(x, cap, flow, link, w, m, d, routed)
    return x


def _satisfied(
    x: np.ndarray,
    cap: np.ndarray,
    flow: np.ndarray,
    link: np.ndarray,
    w: np.ndarray,
    m: np.ndarray,
    d: np.ndarray,
    routed: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Settle, before filling, the flows that surely get their whole demand (most computing
    jobs): no link can saturate below level (capacity - sum of minimums) / sum of weights,
    so a flow whose d / w is below that on all its links ends at d. Exact, and repeated while
    it settles flows (settling raises the others' bounds)."""
    n_links = cap.shape[0]
    cap = cap.copy()
    for _ in range(4):
        weights = np.bincount(link, weights=w[flow], minlength=n_links)
        mins = np.bincount(link, weights=m[flow], minlength=n_links)
        bound = np.where(weights > 0, (cap - mins) / np.where(weights > 0, weights, 1.0), np.inf)
        lowest = np.full(x.shape[0], np.inf)
        np.minimum.at(lowest, flow, bound[link])
        done = routed & (d / w <= lowest * (1 - 1e-12))
        if not done.any():
            break
        x[done] = d[done]
        gone = done[flow]
        cap -= np.bincount(link[gone], weights=d[flow[gone]], minlength=n_links)
        cap = np.maximum(cap, 0.0)
        flow, link = flow[~gone], link[~gone]
        routed = routed & ~done
    return cap, flow, link, routed


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
    events = _Events(cap, flow, link, w, m, d)
    frozen = ~routed
    level = 0.0
    sat = np.full(cap.shape[0], np.inf)
    busy = np.flatnonzero(events.length > 0)
    sat[busy] = events.levels(busy, frozen, level)
    while True:
        if not np.isfinite(sat.min(initial=np.inf)):
            open_flows = np.flatnonzero(~frozen)
            x[open_flows] = d[open_flows]
            return
        newly, level = events.saturate(sat, frozen, x, level)
        touched = events.freeze(newly, x)  # their rates now load every link they cross
        affected = touched[np.isfinite(sat[touched])]
        if affected.size:
            sat[affected] = events.levels(affected, frozen, level)


class _Events:
    """Breakpoints of every link's load function, sorted by link then level.

    Each (flow, link) entry contributes m until level m/w, w x level until d/w, then d; so
    two events per entry change the slope (+w, -w) and the constant (-m, +d)."""

    def __init__(
        self,
        cap: np.ndarray,
        flow: np.ndarray,
        link: np.ndarray,
        w: np.ndarray,
        m: np.ndarray,
        d: np.ndarray,
    ) -> None:
        n_links = cap.shape[0]
        ev_flow = np.concatenate([flow, flow])
        ev_link = np.concatenate([link, link])
        ev_t = np.concatenate([m[flow] / w[flow], d[flow] / w[flow]])
        # one float key sorts by link, then level (levels scaled into [0, 0.5)): one argsort
        scale = 2.0 * float(ev_t.max(initial=0.0)) + 1.0
        order = np.argsort(ev_link + ev_t / scale)
        self.flow, self.link, self.t = ev_flow[order], ev_link[order], ev_t[order]
        self.ds = np.concatenate([w[flow], -w[flow]])[order]
        self.dc = np.concatenate([-m[flow], d[flow]])[order]
        self.min_at = np.where(self.ds > 0, m[self.flow], 0.0)  # activation events carry m
        self.length = np.bincount(self.link, minlength=n_links)
        self.start = np.cumsum(self.length) - self.length
        self.cap = cap
        self.w, self.m, self.d = w, m, d
        self.base = np.zeros(n_links)  # load of frozen flows
        # entries come from np.nonzero over (flow, hop): already grouped by flow
        self.entry_flow, self.entry_link = flow, link
        self.f_len = np.bincount(flow, minlength=w.shape[0])
        self.f_start = np.cumsum(self.f_len) - self.f_len
        self.shares = _sharing(flow, link, n_links)

    def gather(self, links: np.ndarray) -> np.ndarray:
        """Event positions of `links` (each link's events are contiguous)."""
        return _ranges(self.start[links], self.length[links])

    def saturate(
        self, sat: np.ndarray, frozen: np.ndarray, x: np.ndarray, level: float
    ) -> tuple[np.ndarray, float]:
        """Freeze the lowest saturating link, and with it every link of higher level that
        shares no flow with a link before it (frozen or not): nothing below its level can
        change its load, so its level is exact. Returns the flows frozen and the new level."""
        order = np.argsort(sat, kind="stable")
        before = np.zeros(sat.shape[0], bool)  # links looked at in this pass
        newly: list[np.ndarray] = []
        for lk in order.tolist():
            t = float(sat[lk])
            if not np.isfinite(t):
                break
            if not newly or not self.shares[lk, before].any():
                level = max(level, t) if not newly else level
                flows = self.flow[self.start[lk] : self.start[lk] + self.length[lk]]
                live = flows[~frozen[flows]]
                x[live] = np.clip(self.w[live] * max(t, level), self.m[live], self.d[live])
                frozen[live] = True
                sat[lk] = np.inf
                newly.append(live)
            before[lk] = True
        return np.flatnonzero(_mask(np.concatenate(newly), frozen.shape[0])), level

    def freeze(self, flows: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Add frozen flows' rates to their links' base load; the links touched."""
        pos = _ranges(self.f_start[flows], self.f_len[flows])
        touched = self.entry_link[pos]
        self.base += np.bincount(touched, weights=x[self.entry_flow[pos]], minlength=self.base.size)
        return np.flatnonzero(_mask(touched, self.base.shape[0]))

    def levels(self, links: np.ndarray, frozen: np.ndarray, level: float) -> np.ndarray:
        """Per link in `links`: the level at which its load reaches capacity (inf: never)."""
        lengths = self.length[links]
        pos = _ranges(self.start[links], lengths)
        seg = np.repeat(np.arange(links.shape[0]), lengths)
        seg_start = np.cumsum(lengths) - lengths
        live = ~frozen[self.flow[pos]]
        ds, dc = np.where(live, self.ds[pos], 0.0), np.where(live, self.dc[pos], 0.0)
        mins = np.bincount(seg, weights=np.where(live, self.min_at[pos], 0.0),
                           minlength=links.shape[0])  # fmt: skip
        slope = _segmented_cumsum(ds, seg_start, seg)
        const = _segmented_cumsum(dc, seg_start, seg) + (self.base[links] + mins)[seg]
        t = self.t[pos]
        cap = self.cap[links][seg]
        over = live & (const + slope * t >= cap * (1 - _REL) - _REL)
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


def _mask(idx: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, bool)
    out[idx] = True
    return out


def _sharing(flow: np.ndarray, link: np.ndarray, n_links: int) -> np.ndarray:
    """(links x links) True where some flow crosses both (entries grouped by flow)."""
    shares = np.zeros((n_links, n_links), bool)
    for gap in range(1, 8):  # paths are short: pair each entry with the next few of its flow
        if gap >= flow.shape[0]:
            break
        same = flow[:-gap] == flow[gap:]
        if not same.any():
            break
        a, b = link[:-gap][same], link[gap:][same]
        shares[a, b] = True
        shares[b, a] = True
    return shares


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
