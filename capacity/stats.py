"""The distribution quantiles the planner needs, without scipy on the start-up path.

`normal_quantile(q)` is the standard normal's inverse CDF (the standard library's
`statistics.NormalDist`); `gamma_quantile(mean, var, q)` the q-quantile of the gamma
distribution with that mean and variance, vectorised over numpy arrays. scipy (0.9-2 s to import
`scipy.special`, most of a `capacity size` run) is kept for the calibration's least squares only.

The gamma quantile (docs/method.md, "Queueing: quantiles"): shape k = mean^2 / var, scale =
var / mean; x solves P(k, x) = q where P is the regularised lower incomplete gamma function
(its power series, summed in logs and vectorised over the terms; Numerical Recipes, 3rd ed.,
section 6.2), found by Halley's method from the Wilson-Hilferty start
k (1 - 1/(9k) + z_q / (3 sqrt k))^3. For k >= `WH_SHAPE` the Wilson-Hilferty value itself is
used: its relative error there is under 2e-6 at q = 0.99 and under 6e-7 at q = 0.9
(tests/test_stats.py checks every branch against scipy.special.gammaincinv).

`gamma_quantile_at_most(mean, var, q, bound)` answers "is that quantile within `bound`?" as
`gamma_quantile(...) <= bound` would, with one evaluation of P instead of Halley's steps where
that settles it (the planner's capacity search asks only this, thousands of times).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Final

import numpy as np
import numpy.typing as npt

from capacity.types import BoolArray, FloatArray

WH_SHAPE: Final = 1000.0
"""Shape from which the Wilson-Hilferty approximation is the answer (no refinement)."""

_TINY: Final = 1e-300
_DECISIVE: Final = 1e-9
"""How far P(k, x) must be from q for `gamma_quantile_at_most` to answer from it: the series
is good to ~1e-15, and Halley's quantile to far less than the x this margin stands for."""


def normal_quantile(q: float) -> float:
    """The standard normal's q-quantile (dimensionless; 0 < q < 1): `NormalDist().inv_cdf`."""
    return NormalDist().inv_cdf(q)


def normal_cdf(x: npt.ArrayLike) -> FloatArray:
    """The standard normal's CDF Phi(x) over arrays (dimensionless): 1 - Q(x) with Q from
    Abramowitz and Stegun 7.1.26's erfc (absolute error below 1.5e-7), by symmetry for x < 0.
    Example: Phi(1.18) = 0.88100."""
    x = np.asarray(x, dtype=np.float64)
    z = np.abs(x) / math.sqrt(2.0)
    k = 1.0 / (1.0 + 0.3275911 * z)
    poly = k * (0.254829592 + k * (-0.284496736 + k * (1.421413741 + k * (
        -1.453152027 + k * 1.061405429))))
    upper = 0.5 * poly * np.exp(-z * z)          # Q(|x|) = erfc(|x| / sqrt 2) / 2
    return np.asarray(np.where(x >= 0, 1.0 - upper, upper), dtype=np.float64)


def _lgamma(a: FloatArray) -> FloatArray:
    flat = np.fromiter((math.lgamma(v) for v in a.ravel()), dtype=np.float64, count=a.size)
    return flat.reshape(a.shape)


def gamma_p(a: npt.ArrayLike, x: npt.ArrayLike) -> FloatArray:
    """The regularised lower incomplete gamma function P(a, x) (a > 0, 0 <= x <= 1e4;
    dimensionless).

    The power series P = x^a e^-x / Gamma(a + 1) (1 + sum_n prod_{j<=n} x / (a + j)) (Numerical
    Recipes, 3rd ed., 6.2), summed in logs (no overflow at large x) over a fixed number of terms per
    element: past the largest term at n = x - a they fall like exp(-(n - x + a)^2 / 2x), so
    10 sqrt(x) + 40 more terms leave under 1e-16 of the sum. All terms are positive: no
    cancellation. Vectorised over the terms (one matrix per size class), not looped.
    """
    a_arr, x_arr = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(x, dtype=np.float64))
    a_arr = a_arr.astype(np.float64)
    return _gamma_p(a_arr, x_arr.astype(np.float64), _lgamma(a_arr))


def _terms_needed(a: FloatArray, x: FloatArray) -> npt.NDArray[np.int64]:
    return np.ceil(np.maximum(x - a, 0.0) + 10.0 * np.sqrt(x) + 40.0).astype(np.int64)


def _gamma_p(a_arr: FloatArray, x: FloatArray, lg: FloatArray) -> FloatArray:
    """`gamma_p` with ln Gamma(a) given (the quantile's Halley steps reuse it)."""
    shape = a_arr.shape
    a_flat, x_flat, lg_flat = a_arr.ravel(), np.maximum(x.ravel(), 0.0), lg.ravel()
    out = np.zeros(a_flat.shape, dtype=np.float64)
    pos = np.flatnonzero(x_flat > 0)
    if not pos.size:
        return out.reshape(shape)
    aa, xx, ll = a_flat[pos], x_flat[pos], lg_flat[pos]
    need = _terms_needed(aa, xx)
    log_sum = np.empty(aa.shape, dtype=np.float64)
    # one matrix per size class (64, 128, ... terms), so a few long series do not make every
    # element pay for their length
    size_class = np.ceil(np.log2(np.maximum(need, 64))).astype(np.int64)
    for cls in sorted(set(size_class.tolist())):
        sel = size_class == cls
        n = np.arange(1, (1 << int(cls)) + 1, dtype=np.float64)
        cum = np.cumsum(np.log(xx[sel])[:, None] - np.log(aa[sel][:, None] + n), axis=1)
        top = np.maximum(cum.max(axis=1), 0.0)  # the n = 0 term is 1 (log 0)
        log_sum[sel] = top + np.log(np.exp(-top) + np.exp(cum - top[:, None]).sum(axis=1))
    # P = exp(a ln x - x - ln Gamma(a) - ln a + ln(sum)), Gamma(a + 1) = a Gamma(a)
    out[pos] = np.exp(aa * np.log(xx) - xx - ll - np.log(aa) + log_sum)
    return np.clip(out, 0.0, 1.0).reshape(shape)


def _gamma_p_inverse(a: FloatArray, q: float) -> FloatArray:
    """x with P(a, x) = q for each shape a (unit scale), by Halley's method: cubic convergence,
    so a step under 1e-6 x leaves an error far below double precision and ends the loop."""
    z = normal_quantile(q)
    with np.errstate(invalid="ignore"):
        wh = a * (1.0 - 1.0 / (9.0 * a) + z / (3.0 * np.sqrt(a))) ** 3
    x = np.where(a >= WH_SHAPE, wh, 0.0)
    refine = a < WH_SHAPE
    if not refine.any():
        return x
    aa = a[refine]
    # start: Wilson-Hilferty for a > 1; the small-shape form P ~ x^a / Gamma(a + 1) below it
    with np.errstate(over="ignore", invalid="ignore"):
        small = (q * np.exp(_lgamma(aa + 1.0))) ** (1.0 / aa)
    start = np.where(aa > 1.0, np.maximum(wh[refine], 1e-3), small)
    xx = np.maximum(start, _TINY)
    lg = _lgamma(aa)
    live = np.ones(aa.shape, dtype=bool)
    for _ in range(60):
        idx = np.flatnonzero(live)
        al, xl, ll = aa[idx], xx[idx], lg[idx]
        err = _gamma_p(al, xl, ll) - q
        with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
            pdf = np.exp((al - 1.0) * np.log(xl) - xl - ll)
            u = err / pdf
            step = u / (1.0 - 0.5 * np.minimum(1.0, u * ((al - 1.0) / xl - 1.0)))
        step = np.where(np.isfinite(step), step, 0.0)
        new = xl - step
        xx[idx] = np.where(new <= 0.0, 0.5 * xl, new)
        live[idx] = (np.abs(step) >= 1e-6 * xl) | (new <= 0.0)
        if not live.any():
            break
    x[refine] = xx
    return x


def gamma_quantile(mean: npt.ArrayLike, var: npt.ArrayLike, q: float) -> FloatArray:
    """q-quantile of a gamma distribution with this mean and variance (moment match; the unit
    of `mean`, e.g. ms).

    shape k = mean^2 / var, scale = var / mean; a zero variance (or a non-finite shape) gives
    the mean itself.
    """
    m = np.asarray(mean, dtype=np.float64)
    v = np.asarray(var, dtype=np.float64)
    m, v = np.broadcast_arrays(m, v)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(v > 0, m * m / np.where(v > 0, v, 1.0), np.inf)
        scale = np.where(m > 0, v / np.where(m > 0, m, 1.0), 0.0)
    finite = np.isfinite(k) & (k > 0) & np.isfinite(m)
    out = np.array(m, dtype=np.float64, copy=True)
    if finite.any():
        out[finite] = _gamma_p_inverse(k[finite], q) * scale[finite]
    return out


def gamma_quantile_at_most(mean: npt.ArrayLike, var: npt.ArrayLike, q: float,
                           bound: npt.ArrayLike, divisor: float = 1.0) -> BoolArray:
    """Whether `gamma_quantile(mean, var, q) / divisor <= bound`, elementwise: the same answer.

    Where `gamma_quantile` computes the mean itself (zero variance, a non-finite shape) or the
    Wilson-Hilferty value (shape k >= WH_SHAPE), so does this, and compares. Below WH_SHAPE
    the quantile x_q (unit scale) is at most x_b = bound x divisor / scale exactly when
    P(k, x_b) >= q, so one evaluation of P answers where it is more than `_DECISIVE` from q
    (and none where x_b is past k + sqrt(2 k t) + t, t = 5 - ln(1 - q): the gamma's upper tail
    beyond that holds less than e^-t, Boucheron, Lugosi and Massart, Concentration
    Inequalities (2013), section 2.4); the rare entries nearer q get the quantile itself.
    """
    m, v = np.broadcast_arrays(np.asarray(mean, dtype=np.float64),
                               np.asarray(var, dtype=np.float64))
    b = np.broadcast_to(np.asarray(bound, dtype=np.float64), m.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(v > 0, m * m / np.where(v > 0, v, 1.0), np.inf)
        scale = np.where(m > 0, v / np.where(m > 0, m, 1.0), 0.0)
    finite = np.isfinite(k) & (k > 0) & np.isfinite(m)
    out = np.asarray(m / divisor <= b)  # gamma_quantile's answer off `finite`: the mean
    wh = finite & (k >= WH_SHAPE)
    if wh.any():
        out[wh] = gamma_quantile(m[wh], v[wh], q) / divisor <= b[wh]
    rest = np.flatnonzero(finite & (k < WH_SHAPE))
    if not rest.size:
        return out
    kk, sc, bb = k[rest], scale[rest], b[rest]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x_b = bb * divisor / sc
        tail = 5.0 - math.log1p(-q)
        past = x_b >= kk + np.sqrt(2.0 * kk * tail) + tail
    p = np.full(rest.size, np.nan)
    mid = np.flatnonzero(~past & (x_b > 0))
    if mid.size:
        p[mid] = _gamma_p(kk[mid], x_b[mid], _lgamma(kk[mid]))
    p = np.where(past, 1.0, np.where(x_b > 0, p, 0.0))
    ans = p >= q
    close = np.flatnonzero(np.abs(p - q) <= _DECISIVE)
    if close.size:
        i = rest[close]
        ans[close] = gamma_quantile(m[i], v[i], q) / divisor <= b[i]
    out[rest] = ans
    return out


def weighted_quantile(values: Sequence[float], weights: Sequence[float], q: float) -> float:
    """The q-quantile of a weighted sample (the values' unit): the weighted empirical CDF at
    each value's midpoint, (weights below + half its own) / total, linearly interpolated, and
    clamped to the smallest and largest value. Equal weights give the 'Hazen' quantile
    (plotting positions (i - 0.5) / n). Example: values 1, 2, 3, 4 with weights 1, 1, 1, 1:
    midpoints 0.125, 0.375, 0.625, 0.875; q = 0.5 -> 2.5; q = 0.1 -> 1. Weights 1, 1, 2, 0:
    total 4, midpoints 0.125, 0.375, 0.75 (the zero weight drops 4); q = 0.5 -> 2 + (0.5 -
    0.375) / (0.75 - 0.375) = 2.333. Used for the typical basis' error band
    (`capacity.fit.typical_bands.step_error_band`: each published group weighted 1)."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    pts = sorted((float(x), float(w)) for x, w in zip(values, weights, strict=True) if w > 0)
    if not pts:
        raise ValueError("no values with a positive weight")
    total = sum(w for _, w in pts)
    xs, cdf, below = [], [], 0.0
    for x, w in pts:
        xs.append(x)
        cdf.append((below + w / 2.0) / total)
        below += w
    return float(np.interp(q, cdf, xs))
