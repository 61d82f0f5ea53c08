"""A small LSTM for the next day: direct multi-step, on CPU, seeded and reproducible.

The encoder reads the last `lookback` points (value, phase of day and week, off-day flag).
Each step k = 1..H is then predicted from the encoder state and the step's own features:
calendar phase, off-day flag, the seasonal-naive value, the usual value of that time on the
same kind of day (`forecast.features.profile`: working days and off days, weekends and the
country's holidays, have different shapes), the last value and its deviations from both,
and k/H. A linear highway (as in LSTNet) adds a per-step linear map of those lag features and
of the last season's values, started at the seasonal-naive forecast; the network learns
what the linear part cannot. Values are standardised on the history.

Training: windows in time order, the last `val_share` held out for early stopping and for
the interval (empirical quantiles of the held-out k-step errors); AdamW on the L1 loss (what
MASE and sMAPE score). One CPU thread, a fixed seed and a seeded shuffle give the same
weights, hence the same forecast, on every run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forecast import features
from forecast.base import FitContext, Forecast, interval_offsets
from forecast.errors import ModelUnavailableError, SeriesTooShortError
from forecast.series import Series, calendar_features

__all__ = ["NAME", "Lstm"]

NAME = "lstm"
_MIN_WINDOWS = 48  # training windows below this teach the net nothing
_ENC = 7  # encoder features per point
_ENC_DEV = 6  # encoder column: the point's deviation from the usual value of its time
_HEAD = 11  # head features per step
_NAIVE, _PROFILE, _LAST, _DEV, _DEV_PROFILE = 5, 6, 7, 8, 9  # head columns the highway reads


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - an install without the extra
        raise ModelUnavailableError(
            f"{NAME}: torch is not installed (pip install 'gpuflow[lstm]')"
        ) from exc
    return torch


@contextlib.contextmanager
def _one_thread(torch: Any) -> Iterator[None]:
    """One intra-op thread: reproducible sums, and no fight with the worker for cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class _Shape:
    lookback: int
    season: int
    steps: int
    profile_days: int

    @property
    def first(self) -> int:
        """First origin with a full input window and a season before it."""
        return max(self.lookback, self.season + 1)


def _windows(
    z: np.ndarray, ts: np.ndarray, off: np.ndarray, origins: np.ndarray, shape: _Shape
) -> tuple[np.ndarray, np.ndarray]:
    """Encoder inputs (N, lookback, _ENC) and head inputs (N, steps, _HEAD) at the origins.

    `z`, `ts` and `off` cover every index up to the last step; values at or after an origin
    are never read for its window.
    """
    cal = np.concatenate([calendar_features(ts), off[:, None]], axis=1)
    # each point's usual value from the days before it: its deviation is what persists
    everywhere = np.arange(len(z))
    usual_then = features.profile(z, off, everywhere, 1, shape.season, shape.profile_days)[:, 0]
    dev = z - usual_then
    enc_idx = origins[:, None] + np.arange(-shape.lookback, 0)[None, :]
    enc = np.concatenate([z[enc_idx][..., None], cal[enc_idx], dev[enc_idx][..., None]], axis=2)
    grid = (len(origins), shape.steps)
    naive = features.naive(z, origins, shape.steps, shape.season)
    usual = features.profile(z, off, origins, shape.steps, shape.season, shape.profile_days)
    last = z[origins - 1]
    k = np.arange(1, shape.steps + 1)
    cols = [
        naive,
        usual,
        np.broadcast_to(last[:, None], grid),
        np.broadcast_to((last - z[origins - 1 - shape.season])[:, None], grid),
        np.broadcast_to(dev[origins - 1][:, None], grid),
        np.broadcast_to(k / shape.steps, grid),
    ]
    step_cal = cal[origins[:, None] + (k - 1)[None, :]]
    head = np.concatenate([step_cal, *(c[..., None] for c in cols)], axis=2)
    return enc.astype(np.float32), head.astype(np.float32)


def _net(torch: Any, hidden: int, shape: _Shape) -> Any:
    nn = torch.nn
    recent = min(shape.lookback, shape.season)

    class Net(nn.Module):  # type: ignore[name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.LSTM(_ENC, hidden, batch_first=True)
            self.head = nn.Sequential(
                nn.Linear(hidden + _HEAD, hidden), nn.ReLU(), nn.Linear(hidden, 1)
            )
            self.ar = nn.Parameter(torch.zeros(shape.steps, recent))
            lags = torch.zeros(shape.steps, 5)
            lags[:, 0] = 1.0  # starts as the seasonal-naive forecast
            self.lags = nn.Parameter(lags)
            self.bias = nn.Parameter(torch.zeros(shape.steps))

        linear_only = False  # stage one of training: the highway alone

        def forward(self, enc: Any, head: Any) -> Any:
            lag_cols = head[:, :, [_NAIVE, _PROFILE, _LAST, _DEV, _DEV_PROFILE]]
            recent = enc[:, -self.ar.shape[1] :, _ENC_DEV]
            linear = recent @ self.ar.T + (lag_cols * self.lags).sum(2) + self.bias
            if self.linear_only:
                return linear
            _, (h, _) = self.encoder(enc)
            state = h[-1][:, None, :].expand(-1, head.shape[1], -1)
            return linear + self.head(torch.cat([state, head], dim=2)).squeeze(2)

    return Net()


class _AdamW:
    """AdamW (Loshchilov & Hutter), as torch.optim.AdamW computes it with default betas.

    Written out because constructing a torch.optim optimizer imports torch._dynamo, which
    took 22 s on a loaded two-core machine: longer than the training it serves.
    """

    def __init__(self, torch: Any, params: list[Any], lr: float, weight_decay: float) -> None:
        self.torch, self.params, self.lr, self.decay = torch, params, lr, weight_decay
        self.betas, self.eps, self.t = (0.9, 0.999), 1e-8, 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        b1, b2 = self.betas
        self.t += 1
        with self.torch.no_grad():
            for p, m, v in zip(self.params, self.m, self.v, strict=True):
                if p.grad is None:
                    continue
                p.mul_(1 - self.lr * self.decay)
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                denom = (v / (1 - b2**self.t)).sqrt_().add_(self.eps)
                p.addcdiv_(m, denom, value=-self.lr / (1 - b1**self.t))


@dataclass
class _Fitted:
    model: str
    start_s: int
    step_s: int
    level: float
    shape: _Shape
    country: str
    mean: float
    scale: float
    net: Any
    lo: np.ndarray
    hi: np.ndarray
    values: np.ndarray  # the latest points, as many as a window reads
    seen: int = field(default=0)

    def update(self, values: np.ndarray) -> None:
        keep = self.shape.first + self.shape.profile_days * self.shape.season
        self.values = np.concatenate([self.values, np.asarray(values, float)])[-keep:]
        self.seen += len(values)

    def forecast(self, steps: int) -> Forecast:
        if steps > self.shape.steps:
            raise ValueError(f"{NAME}: fitted for {self.shape.steps} steps, asked for {steps}")
        torch = _torch()
        n, first = len(self.values), self.seen - len(self.values)
        ts = self.start_s + self.step_s * np.arange(first, self.seen + self.shape.steps)
        z = np.concatenate([(self.values - self.mean) / self.scale, np.zeros(self.shape.steps)])
        enc, head = _windows(z, ts, features.off_days(ts, self.country), np.array([n]), self.shape)
        with _one_thread(torch), torch.no_grad():
            out = self.net(torch.from_numpy(enc), torch.from_numpy(head)).numpy()[0]
        point = (out * self.scale + self.mean)[:steps].astype(float)
        origin = self.start_s + self.seen * self.step_s
        lo, hi = self.lo[:steps], self.hi[:steps]
        return Forecast(self.model, origin, self.step_s, point, point + lo, point + hi, self.level)


class Lstm:
    """The medium-horizon forecaster. Every knob is a constructor argument."""

    name = NAME

    def __init__(
        self,
        *,
        hidden: int = 32,
        lookback_seasons: float = 2.0,
        profile_days: int = 14,
        epochs: int = 60,
        patience: int = 8,
        batch: int = 32,
        learning_rate: float = 3e-3,
        weight_decay: float = 1e-3,
        val_share: float = 0.15,
        country: str = "CN",
        seed: int = 0,
        refit_every_seasons: float = 7.0,
    ) -> None:
        if min(hidden, epochs, batch, profile_days) < 1 or lookback_seasons <= 0:
            raise ValueError("hidden, epochs, batch, profile_days, lookback_seasons must be > 0")
        if not 0.0 < val_share < 0.5:
            raise ValueError(f"val_share must be in (0, 0.5), got {val_share}")
        self.hidden, self.lookback_seasons, self.profile_days = (
            hidden,
            lookback_seasons,
            profile_days,
        )
        self.epochs, self.patience, self.batch = epochs, patience, batch
        self.learning_rate, self.weight_decay = learning_rate, weight_decay
        self.val_share, self.country, self.seed = val_share, country.strip().upper(), seed
        self.refit_every_seasons = refit_every_seasons

    def _shape(self, ctx: FitContext) -> _Shape:
        lookback = max(2, round(self.lookback_seasons * ctx.season))
        return _Shape(lookback, max(1, ctx.season), ctx.horizon, self.profile_days)

    def min_length(self, ctx: FitContext) -> int:
        return self._shape(ctx).first + ctx.horizon + _MIN_WINDOWS

    def fit(self, history: Series, ctx: FitContext, previous: Any = None) -> _Fitted:
        need, y = self.min_length(ctx), history.values
        shape = self._shape(ctx)
        if len(y) < need:
            why = f"lookback {shape.lookback} + horizon {ctx.horizon} + {_MIN_WINDOWS} windows"
            raise SeriesTooShortError(NAME, need, len(y), why)
        torch = _torch()
        mean, scale = float(np.mean(y)), float(np.std(y)) or 1.0
        z, ts = (y - mean) / scale, history.timestamps()
        origins = np.arange(shape.first, len(y) - shape.steps + 1)
        enc, head = _windows(z, ts, features.off_days(ts, self.country), origins, shape)
        target = z[origins[:, None] + np.arange(shape.steps)[None, :]].astype(np.float32)
        n_val = max(1, round(self.val_share * len(origins)))
        with _one_thread(torch):
            torch.manual_seed(self.seed)
            net = _net(torch, self.hidden, shape)
            data = [torch.from_numpy(a) for a in (enc, head, target)]
            self._train(torch, net, data, len(origins) - n_val)
            with torch.no_grad():
                pred = net(data[0][-n_val:], data[1][-n_val:]).numpy()
        lo, hi = interval_offsets((target[-n_val:] - pred) * scale, ctx.level)
        keep = shape.first + shape.profile_days * shape.season
        return _Fitted(
            NAME,
            history.start_s,
            history.step_s,
            ctx.level,
            shape,
            self.country,
            mean,
            scale,
            net,
            lo,
            hi,
            y[-keep:].copy(),
            seen=len(y),
        )

    def _train(self, torch: Any, net: Any, data: list[Any], n_train: int) -> None:
        """Two stages: the linear highway alone, then everything, each with early stopping.

        The network's last layer starts at zero, so stage two starts from the linear
        solution, and keeps its weights only where the held-out loss improves on it.
        """
        linear = [net.ar, net.lags, net.bias]
        torch.nn.init.zeros_(net.head[-1].weight)
        torch.nn.init.zeros_(net.head[-1].bias)
        gen = torch.Generator().manual_seed(self.seed)
        net.linear_only = True
        best, state = self._stage(torch, net, data, n_train, linear, gen, float("inf"), None)
        net.linear_only = False
        _, state = self._stage(torch, net, data, n_train, list(net.parameters()), gen, best, state)
        if state is not None:
            net.load_state_dict(state)
        net.eval()

    def _stage(
        self,
        torch: Any,
        net: Any,
        data: list[Any],
        n_train: int,
        params: list[Any],
        gen: Any,
        best: float,
        best_state: Any,
    ) -> tuple[float, Any]:
        enc, head, target = data
        opt = _AdamW(torch, params, self.learning_rate, self.weight_decay)
        stale = 0
        for _ in range(self.epochs):
            net.train()
            for idx in torch.randperm(n_train, generator=gen).split(self.batch):
                loss = (net(enc[idx], head[idx]) - target[idx]).abs().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            net.eval()
            with torch.no_grad():
                val = float((net(enc[n_train:], head[n_train:]) - target[n_train:]).abs().mean())
            if val < best - 1e-6:
                best, stale = val, 0
                best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
            else:
                stale += 1
                if stale >= self.patience:
                    break
        if best_state is not None:
            net.load_state_dict(best_state)
        return best, best_state
