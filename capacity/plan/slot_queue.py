"""The wait for a free slot (docs/method.md, queueing): requests that arrive at random hold one
of a replica's slots (min(C_vram, max_num_seqs)) for their prefill and decode, and one that
finds every slot busy waits for one, first come first served, as the event model's requests do.

`slot_wait` is the closed form over arrays of configurations: the busy slots as a birth-death
process whose holding time grows with the batch, summed exactly for a few slots and as a
normal about their mode for many, a geometric queue above the slots, and M/D/c's wait for
requests of a fixed length. `slot_queue` takes a configuration's holding time as a function
of the batch (`queueing.analytic_latency` passes its own) and gives the wait's mean and the
probability of waiting.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from capacity.stats import normal_cdf
from capacity.types import FloatArray

SLOT_EXACT_MAX = 32
"""The most slots whose busy-slot distribution `analytic_latency` sums term by term."""
SLOT_STRETCH = 1.05
"""The step in busy slots over which `analytic_latency` takes the holding time's elasticity."""
SLOT_CV2 = 0.0
"""The squared coefficient of variation of a slot's holding time: 0, a request's prompt and
output fixed (the workload's lengths): the slot wait is M/D/c's, half of M/M/c's
(Allen-Cunneen's (1 + cv^2) / 2)."""


def slot_wait(lam_ms: npt.ArrayLike, busy: npt.ArrayLike, slots: npt.ArrayLike,
              full_ms: npt.ArrayLike, elasticity: npt.ArrayLike,
              below: npt.ArrayLike | None = None) -> tuple[FloatArray, FloatArray]:
    """(mean wait, probability of waiting) for a free slot, ms: requests that arrive at random
    (Poisson, `lam_ms` per ms) hold one of `slots` (c) for their prefill and decode; one that
    finds every slot busy waits for one, first come first served (docs/method.md, queueing:
    the event model's queue). A slot's holding time D(n) grows with the n requests decoding beside it
    (the decode step grows with the batch), so the busy slots are a birth-death process with
    births lambda and deaths n / D(n), D(c) once every slot is busy:
    - below c, log pi(n) = sum log(lambda D(k) / k) has its mode at the `busy` slots a
      (lambda D(a) = a) and curvature (1 - eps) / a, eps = d ln D / d ln n (`elasticity`):
      a normal of variance sigma^2 = a / (1 - eps) (Poisson's a when D is fixed);
    - at and above c the queue grows while r = lambda D(c) / c < 1: pi(c + j) = pi(c) r^j;
    so P = 1 / (1 + sigma (1 - r) Phi(beta) / phi(beta)), beta = (c - a) / sigma (Halfin and
    Whitt's limit of Erlang C where eps = 0), and the wait of one that waits is exponential
    with mean D(c) / (c (1 - r)) (M/M/c), times (1 + cv^2) / 2 for holding times of a fixed
    length (`SLOT_CV2`, Allen and Cunneen): W = P x D(c) / (c (1 - r)) x (1 + cv^2) / 2.
    Inf where r >= 1 (every slot busy cannot keep up: the load sits past the fold where the
    batch's own slowdown outruns it); 0 where c lies 8 sigma above a. `below` (where given,
    not NaN): pi(0..c - 1) / pi(c) summed exactly (`analytic_latency` does so for at most
    `SLOT_EXACT_MAX` slots, where the normal is coarse: Erlang C itself where D is fixed),
    P = 1 / (1 + (1 - r) below).
    Example: a = 3.07 of 4 slots, D fixed at 3.4 s (eps 0, r = 0.7675): sigma 1.752, beta
    0.531, P = 1 / (1 + 1.752 x 0.2325 x 2.027) = 0.548 (Erlang C: 0.539), W = 0.548 x 3.4 s /
    (4 x 0.2325) x 0.5 = 1.00 s. Unit: ms. Source: Kleinrock, Queueing Systems vol. 1,
    section 3.5 (birth-death queues); Halfin and Whitt (1981); Allen (1990) for
    Allen-Cunneen."""
    lam = np.asarray(lam_ms, dtype=np.float64)
    a = np.asarray(busy, dtype=np.float64)
    c = np.asarray(slots, dtype=np.float64)
    d_c = np.asarray(full_ms, dtype=np.float64)
    eps = np.clip(np.asarray(elasticity, dtype=np.float64), 0.0, 0.999)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        sigma = np.sqrt(np.maximum(a, 1e-12) / (1.0 - eps))
        beta = (c - a) / sigma
        r = lam * d_c / c
        near = (beta < 8.0) & (r < 1.0)
        b = np.where(near, beta, 0.0)
        mills = normal_cdf(b) * math.sqrt(2.0 * math.pi) * np.exp(b * b / 2.0)  # Phi / phi
        p = np.where(near, 1.0 / (1.0 + sigma * (1.0 - r) * mills), 0.0)
        if below is not None:
            exact = np.asarray(below, dtype=np.float64)
            p = np.where(np.isnan(exact), p, 1.0 / (1.0 + (1.0 - r) * np.nan_to_num(exact)))
        p = np.where(r >= 1.0, 1.0, p)
        w = np.where(r < 1.0, p * d_c / (c * np.where(r < 1.0, 1.0 - r, 1.0))
                     * (1.0 + SLOT_CV2) / 2.0, np.inf)
    return np.asarray(np.where(p > 0, w, 0.0), dtype=np.float64), np.asarray(p, dtype=np.float64)


def slot_queue(held_ms: Callable[[FloatArray], FloatArray], lam_ms: npt.ArrayLike,
               concurrency: npt.ArrayLike, slots: npt.ArrayLike, *,
               subset: Callable[[npt.NDArray[np.int64]], Callable[[FloatArray], FloatArray]]
               ) -> tuple[FloatArray, FloatArray]:
    """(mean wait, probability of waiting) for a free slot, ms, of configurations at arrival
    rate `lam_ms` (per ms) with `concurrency` requests in their slots: `held_ms(n)` a slot's
    holding time with n decoding (its prefill and decode; its wait for the prefill left out:
    where prompts saturate the GPU the slot limit moves that one prefill line, it does not
    add one). The busy slots a = lambda D(C), D's elasticity over `SLOT_STRETCH`, D(c) with
    every slot busy, and for at most `SLOT_EXACT_MAX` slots pi(n) / pi(c) =
    prod_(k = n + 1..c) k / (lambda D(k)) summed exactly where c lies within 8 sigma of a
    (`subset(rows)`: the holding time of those rows alone), go to `slot_wait`. No wait (0, 0)
    where the busy slots reach the slots or the concurrency is not finite: the caller's slot
    and memory checks reject those. Unit: ms."""
    lam = np.asarray(lam_ms, dtype=np.float64)
    c = np.asarray(concurrency, dtype=np.float64)
    cs = np.broadcast_to(np.asarray(slots, dtype=np.float64), np.shape(c))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        live = np.isfinite(c) & (c > 0)
        busy = np.where(live, lam * held_ms(np.where(live, c, 1.0)), 0.0)
        base = held_ms(np.maximum(busy, 1.0))
        eps = np.where(live, np.log(held_ms(np.maximum(busy, 1.0) * SLOT_STRETCH) / base)
                       / math.log(SLOT_STRETCH), 0.0)
        reach = 8.0 * np.sqrt(np.maximum(busy, 1e-12) / (1.0 - np.clip(np.nan_to_num(eps),
                                                                          0.0, 0.999))) + 1.0
        few = np.flatnonzero(live & (cs <= SLOT_EXACT_MAX) & (busy < cs) & (cs - busy < reach))
        below = None
        if few.size:   # one call over k = 1..top for those rows: log(lambda D(k) / k)
            c_f = np.broadcast_to(cs, np.shape(c))[few] if np.ndim(c) else cs
            lam_f = np.broadcast_to(lam, np.shape(c))[few] if np.ndim(c) else lam
            top = int(np.max(c_f))
            held_f = subset(few) if np.ndim(c) else held_ms
            k = np.arange(1.0, top + 1.0).reshape((top,) + (1,) * np.ndim(c_f))
            inside = k <= c_f                       # k = 1..c of each row
            logs = np.where(inside, np.log(np.maximum(lam_f * held_f(np.minimum(k, c_f)),
                                                      1e-300) / k), 0.0)
            # log pi(c) - log pi(n) = the sum of logs over k = n + 1..c, n = 0..top - 1
            tail = np.cumsum(logs[::-1], axis=0)[::-1]
            terms = np.where(inside, np.exp(-tail), 0.0)   # n = k - 1 < c
            below = np.full(np.shape(c), np.nan)
            if np.ndim(c):
                below[few] = terms.sum(axis=0)
            else:
                below = terms.sum(axis=0)
        w, p = slot_wait(lam, busy, cs, held_ms(cs), np.nan_to_num(eps), below)
    reached = ~live | (busy >= cs)
    return (np.asarray(np.where(reached, 0.0, w), dtype=np.float64),
            np.asarray(np.where(reached, 0.0, p), dtype=np.float64))
