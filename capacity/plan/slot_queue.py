"""The wait for a free slot (docs/method.md, queueing): requests that arrive at random hold one
of a replica's slots (min(C_vram, max_num_seqs)) for their prefill and decode, and one that
finds every slot busy waits for one, first come first served, as the event model's requests do.

`slot_wait` is the closed form over arrays of configurations: the busy slots as a birth-death
process whose holding time grows with the batch, summed exactly for a few slots and as a
normal about their mode for many (their spread widened by the prefills that stall every
request in flight at once), a geometric queue above the slots, and Allen-Cunneen's wait.
`slot_queue` takes a configuration's holding time as a function of the batch
(`queueing.analytic_latency` passes its own) and gives the wait's mean and the probability
of waiting; `with_slot_wait_quantile` adds the wait to a TTFT percentile.
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
SLOT_CV2 = 0.5
"""Allen-Cunneen's squared coefficient of variation of a slot's holding time, (1 + cv^2) / 2
times M/M/c's wait. A request's own prompt and output are fixed (cv^2 0, M/D/c), but the
requests in flight stretch together: every prefill stalls every slot, so a full pool drains
later than independent fixed holding times would. 0.5 is fitted to the event model the slot
wait stands in for, over 20 plans of four engines (docs/method.md, "The slot queue"; TTFT
p90 of the Planner's headline against its event-model check, median |error| 10.6 % at 0.5,
14.7 % at 0 (M/D/c; llama.cpp's plans 28-30 % low) and at 1 (M/M/c; up to 36 % high));
tests/test_slot_queue.py holds eight of them."""


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
      (lambda D(a) = a) and curvature (1 - eps) / a, eps = d ln D / d ln n (`elasticity`;
      `slot_queue` passes it with the stalls' spread): a normal of variance sigma^2 =
      a / (1 - eps) (Poisson's a when D is fixed);
    - at and above c the queue grows while r = lambda D(c) / c < 1: pi(c + j) = pi(c) r^j;
    so P = 1 / (1 + sigma (1 - r) Phi(beta) / phi(beta)), beta = (c - a) / sigma (Halfin and
    Whitt's limit of Erlang C where eps = 0), and the wait of one that waits is exponential
    with mean D(c) / (c (1 - r)) (M/M/c), times (1 + cv^2) / 2 (Allen and Cunneen; `SLOT_CV2`
    0.5: fixed lengths, holding times that stretch together): W = P x D(c) / (c (1 - r)) x
    (1 + cv^2) / 2.
    Inf where r >= 1 (every slot busy cannot keep up: the load sits past the fold where the
    batch's own slowdown outruns it); 0 where c lies 8 sigma above a. `below` (where given,
    not NaN): pi(0..c - 1) / pi(c) summed exactly (`analytic_latency` does so for at most
    `SLOT_EXACT_MAX` slots, where the normal is coarse: Erlang C itself where D is fixed),
    P = 1 / (1 + (1 - r) below).
    Example: a = 3.07 of 4 slots, D fixed at 3.4 s (eps 0, r = 0.7675): sigma 1.752, beta
    0.531, P = 1 / (1 + 1.752 x 0.2325 x 2.027) = 0.548 (Erlang C: 0.539), W = 0.548 x 3.4 s /
    (4 x 0.2325) x 0.75 = 1.50 s. Unit: ms. Source: Kleinrock, Queueing Systems vol. 1,
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
               subset: Callable[[npt.NDArray[np.int64]], Callable[[FloatArray], FloatArray]],
               stall_share: npt.ArrayLike = 0.0) -> tuple[FloatArray, FloatArray]:
    """(mean wait, probability of waiting) for a free slot, ms, of configurations at arrival
    rate `lam_ms` (per ms) with `concurrency` requests in their slots: `held_ms(n)` a slot's
    holding time with n decoding (its prefill and decode; its wait for the prefill left out:
    where prompts saturate the GPU the slot limit moves that one prefill line, it does not
    add one). The busy slots a = lambda D(C), D's elasticity over `SLOT_STRETCH`, D(c) with
    every slot busy, and for at most `SLOT_EXACT_MAX` slots pi(n) / pi(c) =
    prod_(k = n + 1..c) k / (lambda D(k)) summed exactly where c lies within 8 sigma of a
    (`subset(rows)`: the holding time of those rows alone), go to `slot_wait`.
    `stall_share` r (lambda x the stall a prompt's prefill puts on every decoding request,
    `analytic_latency`'s prefill share): the requests in flight progress together and each
    arrival's prefill stalls them all, so a burst of arrivals stretches every holding time
    at once. The busy slots are then N = A(D0 + r N / lambda), A Poisson arrivals in the
    window a request holds its slot: linearised, N's variance is a / (1 - r)^2, not a. With
    the batch's elasticity eps the spread is a / ((1 - eps)(1 - r)^2), taken as an
    elasticity eps' = 1 - (1 - eps)(1 - r)^2 (the normal's, and in the exact sum D(k)
    (k / a)^(eps' - eps)). Against the event model (the chapter's profile on an RTX 3090,
    Qwen3-8B, 1,000- and 1,800-token prompts, r 0.29 and 0.53): the busy slots' variance is
    2.2 and 6.2 times their mean, where a / (1 - eps) alone gives 1.6 and 1.4. No wait (0, 0)
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
        r = np.clip(np.broadcast_to(np.asarray(stall_share, dtype=np.float64), np.shape(c)),
                    0.0, 0.999)
        eps0 = np.clip(np.nan_to_num(eps), 0.0, 0.999)
        spread = 1.0 - (1.0 - eps0) * (1.0 - r) ** 2   # eps'
        stretch = spread - eps0                        # what the stalls add to eps
        eps = np.where(live, spread, eps)
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
            st_f = np.broadcast_to(stretch, np.shape(c))[few] if np.ndim(c) else stretch
            a_f = np.broadcast_to(busy, np.shape(c))[few] if np.ndim(c) else busy
            logs = np.where(inside, np.log(np.maximum(lam_f * held_f(np.minimum(k, c_f))
                                                      * (np.minimum(k, c_f) / a_f) ** st_f,
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


SLOT_QUANTILE_STEPS = 32
"""Bisection steps of `with_slot_wait_quantile` (the bracket, at most a few minutes, shrinks
2^32-fold: below a microsecond)."""


def with_slot_wait_quantile(ttft_q_ms: npt.ArrayLike, ttft_mean_ms: npt.ArrayLike,
                            wait_ms: npt.ArrayLike, p_wait: npt.ArrayLike, q: float
                            ) -> FloatArray:
    """The q-quantile of TTFT (ms) once a request may wait for a slot first: T = Y + S, Y the
    TTFT without the slot wait (its q-quantile y_q and mean y_m), S the slot wait, 0 with
    probability 1 - P and exponential of mean W / P otherwise (`slot_wait`). Y's tail above
    its mean is taken as exponential, P(Y > x) = (1 - q) e^(-(x - y_q) / theta), theta =
    (y_q - y_m) / (ln(1 / (1 - q)) - 1) (an exponential's quantile less its mean; none at
    or below q = 1 - 1/e, where that is not positive: the median), and a request that waits
    is taken at Y's mean (at most y_q): the least x >= y_q with
    (1 - P)(1 - q) e^(-(x - y_q) / theta) + P e^(-(x - y_m) / (W / P)) <= 1 - q.
    Where P is small the quantile stays y_q; adding the two quantiles (y_q + S's own) would
    leave out a wait that only some 1 - q of requests see, and count one that all see twice.
    Example: y_q 400 ms, y_m 300 ms, P 0.11, W 130 ms (1,182 ms once waiting), p90: theta =
    100 / 1.3026 = 76.8 ms; at x = 400 the sum is 0.089 + 0.11 e^(-100 / 1182) = 0.190, so x
    grows to where it is 0.1: 557 ms (0.0115 + 0.0885); y_q + S's own p90 would read 400 +
    1182 x ln(1.1) = 513 ms. Unit: ms."""
    yq, ym, w, p = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (
        ttft_q_ms, ttft_mean_ms, wait_ms, p_wait)))
    ym = np.minimum(ym, yq)
    tail = 1.0 - q
    out = np.where(np.isfinite(w), yq, np.inf)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        live = np.isfinite(yq) & np.isfinite(w) & (p > 0) & (w > 0)
        idx = np.flatnonzero(live)   # the rows a slot wait reaches (often few)
        if not idx.size:
            return np.asarray(out, dtype=np.float64)
        yq_, ym_, p_ = yq.ravel()[idx], ym.ravel()[idx], p.ravel()[idx]
        wc = w.ravel()[idx] / p_
        gap = math.log(1.0 / tail) - 1.0   # an exponential's quantile less its mean, / theta
        theta = (np.maximum(yq_ - ym_, 1e-9) / gap if gap > 0   # q above 1 - 1/e (p90, p99)
                 else np.full(yq_.shape, 1e-9))                  # p50: Y's tail taken as none

        def excess(x: FloatArray) -> FloatArray:
            return np.asarray((1.0 - p_) * tail * np.exp(-(x - yq_) / theta)
                              + p_ * np.exp(-(x - ym_) / wc) - tail, dtype=np.float64)
        lo = yq_.copy()
        hi = ym_ + wc * math.log(1.0 / tail) + 2.0 * (yq_ - ym_) + 1.0
        above = excess(lo) > 0
        for _ in range(SLOT_QUANTILE_STEPS):
            mid = 0.5 * (lo + hi)
            up = excess(mid) > 0
            lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
        flat = out.ravel().copy()
        flat[idx] = np.where(above, hi, yq_)
    return np.asarray(flat.reshape(out.shape), dtype=np.float64)
