"""Expert load imbalance of MoE routing under expert parallelism (docs/expert-parallel.md,
"Expert load imbalance"): a power law of expert popularity whose exponent is data
(data/moe_imbalance.toml), its measures (Gini, coverage), EPLB-style placement with redundant
experts, and the finite batch's sampling skew. `imbalance_factor` is what the EP step uses;
its placement part is memoised per (experts, active, exponent, GPUs, redundant), the greedy
packing being most of a planner search's time. Dimensionless throughout.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from capacity.catalog.moe_data import ImbalanceData, ImbalanceFamily, imbalance_data
from capacity.errors import InputError
from capacity.types import FloatArray


def zipf_shares(experts: int, exponent: float, active: int = 1) -> FloatArray:
    """Share of a layer's token-expert pairs each expert receives, hottest first (sums to 1).

    Power law (Zipf): share_i proportional to i^(-s), i = 1..E; s = 0 is uniform. Top-k routing
    sends a token to k distinct experts, so no expert gets more than 1/k of the pairs: shares are
    capped at 1/k and the excess spread over the others in proportion (water-filling). Unit: a
    fraction. Source: the power-law popularity of data/moe_imbalance.toml.
    """
    if experts < 1 or exponent < 0:
        raise InputError("experts must be >= 1 and the exponent >= 0")
    w = np.arange(1, experts + 1, dtype=np.float64) ** -exponent
    p = w / w.sum()
    cap = 1.0 / max(active, 1)
    capped = np.zeros(experts, dtype=bool)
    for _ in range(experts):
        over = (p > cap * (1 + 1e-12)) & ~capped
        if not over.any():
            break
        capped |= over
        free = ~capped
        p = np.where(capped, cap, p)
        if free.any():
            p[free] *= (1.0 - cap * capped.sum()) / p[free].sum()
    return np.asarray(p, dtype=np.float64)


def gini(shares: FloatArray) -> float:
    """Gini coefficient of shares (0 = equal, -> 1 = one takes all): sum_i (2i - n - 1) x_(i) /
    (n sum x), x sorted ascending. Dimensionless."""
    x = np.sort(np.asarray(shares, dtype=np.float64))
    n = x.size
    return float(np.sum((2 * np.arange(1, n + 1) - n - 1) * x) / (n * x.sum()))


def coverage(shares: FloatArray, mass: float) -> float:
    """Share of the experts (hottest first) needed to carry `mass` of the routing (a fraction):
    the smallest n with sum of the n largest shares >= mass, over E."""
    c = np.cumsum(np.sort(np.asarray(shares))[::-1])
    return float((np.searchsorted(c, mass - 1e-12) + 1) / c.size)


def _bisect(f: Callable[[float], float], target: float, increasing: bool) -> float:
    """The exponent in [0, 8] where the monotone measure `f` reaches `target` (bisection)."""
    lo, hi = 0.0, 8.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        v = f(mid)
        if (v < target) == increasing:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def exponent_for_gini(experts: int, target: float) -> float:
    """The Zipf exponent whose shares over `experts` experts have Gini `target` (bisection on
    [0, 8]; Gini grows with the exponent)."""
    return _bisect(lambda s: gini(zipf_shares(experts, s)), target, increasing=True)


def exponent_for_coverage(experts: int, share: float, mass: float) -> float:
    """The Zipf exponent whose shares over `experts` experts need `share` of them (hottest
    first) to carry `mass` of the routing (bisection; the needed share falls as it grows)."""
    return _bisect(lambda s: coverage(zipf_shares(experts, s), mass), share, increasing=False)


def family_exponent(family: ImbalanceFamily) -> float:
    """A family's exponent from what its source states (data/moe_imbalance.toml's header)."""
    if family.measure == "exponent":
        return family.value
    if family.measure == "gini":
        return exponent_for_gini(family.experts, family.value)
    return exponent_for_coverage(family.experts, family.value, family.mass)


def model_exponent(model_key: str, data: ImbalanceData | None = None) -> float:
    """The imbalance exponent of a catalog model (its family's; balanced when not listed)."""
    return family_exponent((data or imbalance_data()).family_of(model_key))


def placement_imbalance(shares: FloatArray, gpus: int, redundant: int = 0) -> float:
    """Busiest GPU's share of the routed load over the mean (>= 1), after EPLB-style placement.

    Redundancy: `redundant` times, the expert with the largest load per copy gets one more copy
    (its load splits evenly over its copies). Packing: copies, heaviest first, each onto the
    least-loaded GPU that has a free slot; every GPU has ceil((E + R) / gpus) slots (the greedy
    heuristic of DeepSeek's EPLB, github.com/deepseek-ai/EPLB). Dimensionless. Example (by
    hand, tests): shares 0.48, 0.24, 0.16, 0.12 on 2 GPUs -> 0.60 / 0.50 = 1.2; with one
    redundant copy -> 0.52 / 0.50 = 1.04.
    """
    load = np.asarray(shares, dtype=np.float64)
    copies = np.ones(load.size, dtype=np.int64)
    for _ in range(redundant):
        copies[int(np.argmax(load / copies))] += 1
    items = sorted((float(load[i] / copies[i]) for i in range(load.size)
                    for _ in range(int(copies[i]))), reverse=True)
    slots = math.ceil(len(items) / gpus)
    per_gpu = [0.0] * gpus
    used = [0] * gpus
    for x in items:
        free = [g for g in range(gpus) if used[g] < slots]
        g = min(free, key=lambda j: (per_gpu[j], j))
        per_gpu[g] += x
        used[g] += 1
    return max(per_gpu) / (sum(per_gpu) / gpus)


def sampling_imbalance(mean_pairs: float, gpus: int) -> float:
    """Expected busiest GPU over the mean from a finite batch (>= 1): 1 + sqrt(2 ln n / mu).

    A GPU's token-expert pairs are about Poisson with mean mu (variance mu); the expected
    maximum of n such counts is about mu + sqrt(mu) sqrt(2 ln n) (the Gaussian extreme-value
    approximation). 1 for one GPU or no load. Dimensionless.
    """
    if gpus <= 1 or mean_pairs <= 0:
        return 1.0
    return 1.0 + math.sqrt(2.0 * math.log(gpus) / mean_pairs)


def imbalance_factor(*, experts: int, active: int, exponent: float, gpus: int,
                     redundant: int = 0, batch_tokens: float = math.inf) -> float:
    """Expected busiest GPU's routed load over the mean, gamma >= 1: the placement's skew times
    the finite batch's (`placement_imbalance` x `sampling_imbalance` at B k / gpus pairs).
    Balanced routing (exponent 0) on E divisible by the GPUs and an infinite batch: 1."""
    static = static_imbalance(experts=experts, active=active, exponent=exponent, gpus=gpus,
                              redundant=redundant)
    return static * sampling_imbalance(batch_tokens * active / gpus, gpus)


@lru_cache(maxsize=4096)
def static_imbalance(*, experts: int, active: int, exponent: float, gpus: int,
                     redundant: int = 0) -> float:
    """The placement's skew of `imbalance_factor` (`placement_imbalance` of `zipf_shares`),
    memoised: the same deployment's steps at many batches share it. Dimensionless."""
    return placement_imbalance(zipf_shares(experts, exponent, active), gpus, redundant)
