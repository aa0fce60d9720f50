"""The event model's statistics (`capacity.plan.events`): inter-token gaps as the event loop
emits tokens (`Gaps`), token-weighted means and quantiles (the bench's ITL), and plain
p50/p90/p99. Split out of `capacity.plan.events`, which re-exports them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from capacity.plan.queueing import QUANTILES
from capacity.types import FloatArray, IntArray


class Gaps:
    """Inter-token gaps (ms) as the event loop emits tokens: one value, how many tokens had
    it, and whose they were (for leaving the warm-up requests out). Kept as one array per
    emission (`tokens`: every id of a step at once, the event loop's hottest path after the
    pool's claims), in emission order, joined when read."""

    def __init__(self, n_requests: int) -> None:
        self.last_ms = np.full(n_requests, np.nan)
        self._values: list[FloatArray] = []
        self._counts: list[IntArray | int] = []
        """Per emission: each gap's tokens, or (an int) that many gaps of one token each."""
        self._requests: list[IntArray] = []
        self._joined: tuple[FloatArray, FloatArray, IntArray] | None = None
        """The emissions joined (`_arrays`), kept until the next emission."""

    def tokens(self, ids: Sequence[int] | IntArray, now_ms: float,
               step_ms: float | None = None, k: int = 1) -> None:
        """Each of `ids` got k tokens ending at `now_ms`, the last k - 1 of them `step_ms`
        apart (decode steps); the first gap runs from its previous token. Per id, in order:
        its first gap (1 token), then `step_ms` for k - 1 tokens when k > 1."""
        if len(ids) == 0:
            return
        self._joined = None
        a = np.asarray(ids, dtype=np.int64)   # the event loop passes its running ids' array
        first = (now_ms - (k - 1) * (step_ms or 0.0)) - self.last_ms[a]
        self.last_ms[a] = now_ms
        if k > 1 and step_ms is not None:
            values = np.empty(2 * a.size, dtype=np.float64)
            values[0::2], values[1::2] = first, step_ms
            counts = np.empty(2 * a.size, dtype=np.int64)
            counts[0::2], counts[1::2] = 1, k - 1
            self._values.append(values)
            self._counts.append(counts)
            self._requests.append(np.repeat(a, 2))
        else:
            self._values.append(first)
            self._counts.append(a.size)   # one token each, made an array when read
            self._requests.append(a)

    def kept(self, first_counted: int, end: int | None = None
             ) -> tuple[FloatArray, FloatArray]:
        """(gap ms, tokens that had it) of requests numbered first_counted..end - 1 (None:
        to the last)."""
        v, w, r = self._arrays()
        keep = (r >= first_counted) & np.isfinite(v)
        if end is not None:
            keep &= r < end
        return v[keep], w[keep]

    def _arrays(self) -> tuple[FloatArray, FloatArray, IntArray]:
        """(gap ms, tokens that had it, whose) of every emission so far, joined once for
        every read until the next emission (a run reads its mean and its quantiles)."""
        if self._joined is None:
            v = np.concatenate([np.zeros(0), *self._values])
            w = np.concatenate([np.zeros(0), *(np.ones(c) if isinstance(c, int) else c
                                               for c in self._counts)]).astype(np.float64)
            r = np.concatenate([np.zeros(0, dtype=np.int64), *self._requests])
            self._joined = (v, w, r)
        return self._joined

    def mean(self, first_counted: int, end: int | None = None) -> float:
        """Token-weighted mean gap (ms) of requests numbered first_counted..end - 1 (NaN:
        none)."""
        return weighted_mean(*self.kept(first_counted, end))

    def quantiles(self, first_counted: int, end: int | None = None) -> dict[float, float]:
        """Token-weighted quantiles of the gaps of requests numbered first_counted..end - 1."""
        return weighted_quantiles(*self.kept(first_counted, end))


def weighted_mean(values: FloatArray, weights: FloatArray) -> float:
    """The mean of `values` where each counts `weights` times (NaN for no weight). Unit: that
    of the values."""
    total = float(np.sum(weights))
    return float(np.sum(values * weights)) / total if total > 0 else math.nan


def weighted_quantiles(values: FloatArray, weights: FloatArray) -> dict[float, float]:
    """QUANTILES of `values` where each counts `weights` times (the lower value at a tie of
    the cumulative weight; NaN for no values). Unit: that of the values."""
    if values.size == 0 or float(np.sum(weights)) <= 0:
        return {q: math.nan for q in QUANTILES}
    order = np.argsort(values, kind="stable")
    v, cum = values[order], np.cumsum(weights[order])
    total = float(cum[-1])
    return {q: float(v[min(int(np.searchsorted(cum, q * total)), v.size - 1)])
            for q in QUANTILES}


def quantiles(x: FloatArray) -> dict[float, float]:
    """p50/p90/p99 of `x` (its unit; numpy's linear interpolation), NaN when empty."""
    if x.size == 0:
        return {q: math.nan for q in QUANTILES}
    v = np.quantile(x, QUANTILES)
    return {q: float(v[j]) for j, q in enumerate(QUANTILES)}
