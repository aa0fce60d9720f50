"""Lengths that vary about a stated mean: output lengths that stop at end-of-sequence (what a
benchmark run without `--ignore-eos` generates when its report states only the mean and the
cap), and the prompts of a dataset that varies them (ShareGPT; a random dataset with a range).

A request asked for at most `cap` tokens stops at its end-of-sequence token or at the cap. When
a source states only the total output tokens (hence the mean) and the cap, the lengths are
taken as the distribution on 1..cap with that mean and the largest entropy, i.e. the least
added assumption: a truncated geometric, P(n) proportional to q^(n - 1) (Jaynes' maximum
entropy under a mean constraint; q < 1 when the mean is below (cap + 1) / 2, q = 1 the uniform,
q > 1 above it). A run's prompts, stated by their total (hence the mean) and the dataset's
longest (`cap`), are taken the same way; a random dataset that draws each length uniformly on
1..L is this distribution with cap L and mean (L + 1) / 2 (q = 1). `maxent_lengths` draws a
run's lengths as that distribution's quantiles, so a run of N requests has the stated mean to
within rounding, shuffled with a seed. Source: the benchmark's statement (vLLM `bench serve`'s
`total_output_tokens` / `num_prompts`, its `--random-output-len` as the cap);
docs/disaggregation.md, "A benchmark run's drain"; docs/method.md, "Prompts that vary".
"""

from __future__ import annotations

import functools
import math

import numpy as np

from capacity.errors import InputError
from capacity.types import IntArray

SUM_UP_TO = 4096
"""Caps up to which `geometric_mean_tokens` sums the weights; above, its closed form."""


def geometric_mean_tokens(q: float, cap: int) -> float:
    """Mean of P(n) proportional to q^(n - 1) on n = 1..cap (tokens). q = 1: (cap + 1) / 2.
    Example: q = 0.5, cap = 3: (1 + 2 x 0.5 + 3 x 0.25) / 1.75 = 1.571. Up to `SUM_UP_TO`
    tokens (or within 1e-4 of q = 1) the sums themselves; above, the closed form
    1 / (1 - q) - cap x q^cap / (1 - q^cap) for q < 1 and, the lengths mirrored (n -> cap + 1 -
    n takes q to 1 / q), cap + 1 - the mean at 1 / q for q > 1: a prompt's cap can be a model's
    context, hundreds of thousands of tokens, and the ratio is solved by bisection."""
    if cap > SUM_UP_TO and abs(1.0 - q) >= 1e-4:
        if q > 1.0:
            return cap + 1.0 - geometric_mean_tokens(1.0 / q, cap)
        x = q ** cap
        return 1.0 / (1.0 - q) - cap * x / (1.0 - x)
    n = np.arange(1, cap + 1, dtype=np.float64)
    w = _weights(q, cap)
    return float(np.sum(n * w) / np.sum(w))


def _weights(q: float, cap: int) -> np.ndarray:
    """q^(n - 1) for n = 1..cap, scaled so the largest is 1 (no overflow at any q > 0)."""
    lw = np.arange(cap, dtype=np.float64) * math.log(q)
    return np.asarray(np.exp(lw - lw.max()), dtype=np.float64)


def maxent_ratio(mean_tokens: float, cap: int) -> float:
    """The ratio q of the maximum-entropy lengths on 1..cap with mean `mean_tokens` (dimensionless,
    `geometric_mean_tokens(q, cap) = mean`), by bisection on log q. Example: cap 3, mean
    1.571 -> q = 0.5 (see `geometric_mean_tokens`)."""
    if not (cap >= 1 and 1.0 <= mean_tokens <= cap):
        raise InputError(f"a mean of {mean_tokens:g} output tokens does not fit a cap of {cap}")
    if cap == 1:
        return 1.0
    if mean_tokens == 1.0:  # every request stops at its first token
        return 0.0
    if mean_tokens == cap:  # every request reaches the cap
        return math.inf
    lo, hi = -50.0, 50.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if geometric_mean_tokens(math.exp(mid), cap) < mean_tokens:
            lo = mid
        else:
            hi = mid
    return math.exp((lo + hi) / 2)


def maxent_lengths(mean_tokens: float, cap: int, n: int, seed: int = 0) -> IntArray:
    """`n` lengths (tokens, 1..cap) of a run whose requests stop at end-of-sequence, or whose
    prompts vary, with mean `mean_tokens` and cap `cap` (module docstring): the quantiles (i + 0.5) / n of the
    maximum-entropy distribution, shuffled with `seed`. Example: mean 682, cap 2,048, 500
    requests (dstack's 1P3D run): q = 0.99895, lengths from 1 to 2,048, mean 682."""
    if n < 1:
        raise InputError(f"a run needs at least one request, got {n}")
    q = maxent_ratio(mean_tokens, cap)
    if q == 0.0:
        out = np.ones(n, dtype=np.int64)
    elif math.isinf(q):
        out = np.full(n, cap, dtype=np.int64)
    else:
        w = _weights(q, cap)
        cdf = np.cumsum(w) / np.sum(w)
        u = (np.arange(n, dtype=np.float64) + 0.5) / n
        out = np.minimum(np.searchsorted(cdf, u) + 1, cap).astype(np.int64)
    rng = np.random.default_rng(seed)
    return np.asarray(rng.permutation(out), dtype=np.int64)


@functools.cache
def maxent_run(mean_tokens: float, cap: int, n: int, seed: int = 0) -> tuple[int, ...]:
    """`maxent_lengths` as a tuple of ints, once per (mean, cap, requests, seed): the scorecard
    predicts a run on several bases, and several runs of one source share their lengths."""
    return tuple(int(x) for x in maxent_lengths(float(mean_tokens), cap, n, seed))
