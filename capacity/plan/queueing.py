"""Load and queueing (docs/method.md, queueing): continuous batching under Poisson arrivals or closed-loop
concurrency, as a seeded discrete-event model and as a vectorized analytic approximation.

Model of one replica (vLLM-style continuous batching):
- `slots = min(C_vram, max_num_seqs)` requests decode together; a request that arrives when every
  slot is busy waits (FCFS) for one to free;
- admission happens at scheduling points (step boundaries): every waiting request that finds a
  free slot is admitted there, and an admitted request is prefilled (F6) before it decodes;
- without chunked prefill, every prompt admitted at one scheduling point is prefilled in one
  batch (one forward pass, as vLLM's scheduler and `capacity.sim.scheduler` do): the batch takes the
  sum of their prefill times, holds the GPU and pauses decoding (prefill-first scheduling), and
  all of its prompts get their first token when it ends, not one after another;
- with a chunked-prefill token budget and mixed steps (vLLM V1, llama.cpp) each step carries
  the decoding requests plus up to `budget - batch` prompt tokens of the admitted prompts (in
  admission order; the budget caps the tokens prefilled per step), a prompt's first token comes
  at the end of the step that prefills its last chunk. A mixed step is one forward pass that
  reads the weights once (`capacity.model.roofline.mixed_step_time_ms`): the chunks' prefill
  time joins the step's arithmetic, so a chunk adds `mixed_step_extra_ms` to the decode step,
  little where the step is bandwidth-bound; the closed form, the event model and the
  simulated engine all take it so (issue 32);
- with a budget and no mixing (SGLang) a prefill batch carries at most `budget` prompt tokens
  (its last prompt may be cut and continues in the next batch) and decoding waits;
- the scheduling comes from an engine profile (`capacity.catalog.engines`, data/engines.toml):
  `service_from_scenario(..., engine=...)` sets the slots, the budget and the mixing; with KV
  admitted by the tokens held (vLLM, SGLang) the slots are the requests whose prompt + output
  fit the KV pool (no preemption is modelled: the pool holds every admitted request to its
  end) and the decode step is taken at the mean context they hold (prompt + output / 2);
- a decode step for `b` requests takes `t_step(b)` from F4 (with TP communication, F10); the
  prefill produces the first token, and `output - 1` decode steps follow.
Outputs: TTFT and TPOT percentiles (p50/p90/p99, numpy's linear interpolation), queue time
(arrival to slot), goodput (requests/s meeting every SLO) and the saturation rate. Past the slots,
TTFT rises linearly with the queue while throughput flattens (the chapter's observation).

This module holds the closed forms: `analytic_latency` gives these quantities over arrays of
configurations, for the planner's search. The same model run request by request, seeded, is
`capacity.plan.events` (the discrete-event model); per-request workloads (lengths, bursts,
prefix hits) are `capacity.plan.traffic_queue`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import numpy.typing as npt

from capacity.errors import InputError
from capacity.model.roofline import StepModel as StepModel  # re-exported: the one F4 step
from capacity.model.workload import concurrency_fixed_point
from capacity.plan.slot_queue import slot_queue, with_slot_wait_quantile
from capacity.stats import gamma_quantile as gamma_quantile  # re-exported: the F-queue quantile
from capacity.types import BoolArray, FloatArray

DEFAULT_MAX_NUM_SEQS = 256
"""vLLM's default `max_num_seqs` (sequences decoded together per replica)."""
DEFAULT_SLO_QUANTILE = 0.9
"""The percentile SLOs are checked at (p90), unless told otherwise."""
QUANTILES = (0.5, 0.9, 0.99)


def md1_mean_wait_ms(rho: float, service_ms: float) -> float:
    """Mean wait in queue of M/D/1 (Pollaczek-Khinchine, deterministic service), in ms.

    W_q = rho x S / (2 (1 - rho)), rho = lambda x S < 1; infinite otherwise.
    Source: Kleinrock, Queueing Systems vol. 1 (1975), eq. 5.73 with Var(S) = 0.
    rho 0.5, S 100 ms -> 50 ms.
    """
    if rho < 0 or service_ms < 0:
        raise InputError("utilization and service time must be >= 0")
    if rho >= 1:
        return math.inf
    return rho * service_ms / (2.0 * (1.0 - rho))


def wait_quantile_ms(mean_wait_ms: npt.ArrayLike, rho: npt.ArrayLike, q: float) -> FloatArray:
    """q-quantile of the queueing wait under the exponential-tail approximation, in ms.

    P(W > t) ~ rho x exp(-t rho / E[W]) (exact for M/M/1; the heavy-traffic form for M/G/1),
    so t_q = E[W] / rho x ln(rho / (1 - q)) when rho > 1 - q, else 0 (most requests never wait).
    Source: Kingman (1961) heavy-traffic approximation; Kleinrock vol. 2 section 2.
    """
    w = np.asarray(mean_wait_ms, dtype=np.float64)
    r = np.asarray(rho, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(r > 1.0 - q, w / r * np.log(np.maximum(r, 1e-300) / (1.0 - q)), 0.0)
    return np.asarray(np.where(r >= 1.0, np.inf, t), dtype=np.float64)


def mixture_quantile_ms(offsets_ms: npt.ArrayLike, weights: npt.ArrayLike,
                        mean_wait_ms: npt.ArrayLike, rho: npt.ArrayLike, q: float,
                        scale: npt.ArrayLike = 1.0) -> FloatArray:
    """q-quantile (ms) over kinds of request that share one queueing wait, in ms: kind k (a
    share `weights[..., k]` of the requests, the same for every row or each row's own; its own
    time `offsets_ms[..., k]`) takes
    o_k + scale x W, W the wait under `wait_quantile_ms`'s exponential tail (P(W > y) =
    rho exp(-y / theta), theta = E[W] / rho; none where rho is 0). One kind: o + scale x
    `wait_quantile_ms`(E[W], rho, q), exactly the one-request quantile. Several: the least x
    with T(x) = sum_k w_k P(o_k + scale W > x) <= 1 - q. Between two offsets (sorted,
    o_(j) <= x < o_(j+1)) the kinds above x count whole and the ones below share the wait's
    one exponential, T(x) = A_j + rho sum_(i <= j) w_i e^(-(x - o_i) / (scale theta)), so
    each segment's root is closed-form, x = o_(j) + scale theta ln(rho S_j / (1 - q - A_j)),
    S_j = sum_(i <= j) w_i e^((o_i - o_(j)) / (scale theta)); the quantile is o_(j) where
    T(o_(j)) <= 1 - q already, else the first root inside its segment. inf where rho >= 1.
    Example: 10 % of requests at 354 ms and 90 % at 94 ms, rho 0.8, E[W] 80 ms (theta 100
    ms), p90: T(354) = 0.08 + 0.72 e^-2.6 = 0.1335 > 0.1, so x = 354 + 100 ln(0.1335 / 0.1)
    = 382.9 ms, where the slow kind alone would add the wait's own p90: 354 + 100 ln(0.8 /
    0.1) = 561.9 ms; with rho 0.5 and E[W] 50 ms, T(354) = 0.05 + 0.45 e^-2.6 = 0.083:
    x = 354 ms.
    Source: docs/method.md, "Conversations in the planner" (the TTFT percentile over kinds)."""
    o = np.asarray(offsets_ms, dtype=np.float64)
    w_mean = np.asarray(mean_wait_ms, dtype=np.float64)
    r = np.asarray(rho, dtype=np.float64)
    f = np.asarray(scale, dtype=np.float64)
    if o.shape[-1] == 1:
        return np.asarray(o[..., 0] + f * wait_quantile_ms(w_mean, r, q), dtype=np.float64)
    shape = o.shape[:-1]
    live = np.broadcast_to(r < 1.0, shape) & np.all(np.isfinite(o), axis=-1)
    r_l = np.broadcast_to(np.where(live, r, 0.0), shape)[..., None]   # saturated rows: inf
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        tail = np.where(r_l > 0, np.broadcast_to(np.where(live, f * w_mean, 0.0), shape)[
            ..., None] / np.where(r_l > 0, r_l, 1.0), 0.0)   # scale x theta, ms
        order = np.argsort(np.where(live[..., None], o, 0.0), axis=-1, kind="stable")
        os_ = np.take_along_axis(np.where(live[..., None], o, 0.0), order, axis=-1)
        ws = np.take_along_axis(np.broadcast_to(np.asarray(weights, dtype=np.float64),
                                                o.shape), order, axis=-1)
        above = np.sum(ws, axis=-1, keepdims=True) - np.cumsum(ws, axis=-1)   # A_j
        # S_j: the kinds at or below o_(j), each weighed by its wait's decay since its own time
        gap = os_[..., None, :] - os_[..., :, None]            # [j, i] = o_i - o_(j)
        decay = np.where(tail[..., None] > 0, np.exp(gap / np.where(tail[..., None] > 0,
                                                                    tail[..., None], 1.0)),
                         (gap >= 0).astype(np.float64))
        k = o.shape[-1]
        below = np.tril(np.ones((k, k)))                        # i <= j
        s_j = np.sum(decay * below * ws[..., None, :], axis=-1)
        at_o = above + np.where(tail > 0, r_l * s_j, 0.0)       # T(o_(j)), past its atom
        room = 1.0 - q - above
        root = os_ + tail * np.log(r_l * s_j / np.where(room > 0, room, 1.0))
        nxt = np.concatenate([os_[..., 1:], np.full((*shape, 1), np.inf)], axis=-1)
        cand = np.where(at_o <= 1.0 - q, os_,
                        np.where((room > 0) & (tail > 0) & (root < nxt), root, np.inf))
    return np.asarray(np.where(live, np.min(cand, axis=-1), np.inf), dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# Analytic path (vectorized)


@dataclass(frozen=True, kw_only=True)
class AnalyticLatency:
    """Predicted load behaviour per configuration (arrays), at one arrival rate."""

    rate_per_s: FloatArray
    concurrency: FloatArray
    step_ms: FloatArray
    prefill_share: FloatArray
    utilization: FloatArray
    ttft_mean_ms: FloatArray
    ttft_q_ms: FloatArray
    tpot_ms: FloatArray
    tpot_q_ms: FloatArray
    duration_s: FloatArray
    saturated: BoolArray
    decode_mean_ms: FloatArray
    """Mean of a request's decode time (its output - 1 steps and the prefills they wait for),
    ms: `tpot_ms` x (output - 1) where the load is not saturated (not set to inf where it is)."""
    decode_var_ms2: FloatArray
    """Its variance, ms^2: `tpot_q_ms` is the gamma quantile of this mean and variance over
    (output - 1) (`gamma_quantile`; `gamma_quantile_at_most` asks whether it is within a
    target without computing it)."""


def mixed_step_extra_ms(bandwidth_ms: npt.ArrayLike, compute_ms: npt.ArrayLike,
                        prefill_ms: npt.ArrayLike, prefill_comm_ms: npt.ArrayLike = 0.0,
                        comm_added_ms: npt.ArrayLike = 0.0) -> FloatArray:
    """What prompt chunks of `prefill_ms` (F6 time) add to a decode step, in ms, vectorised.

    The mixed step is one forward pass (`roofline.mixed_step_time_ms`: t0 + max(bandwidth,
    compute + prefill less its all-reduces) + the pass's all-reduces + serial, the weights
    read once), so a chunk adds max(bandwidth, compute + prefill - `prefill_comm_ms`) -
    max(bandwidth, compute) + `comm_added_ms` to the plain step: nothing but its share of the
    pass's all-reduce (`comm_added_ms`: F10 at the pass's tokens less F10 at the decode
    batch's) while the chunk's arithmetic hides under the step's memory time, the chunk's
    whole arithmetic once the step is compute-bound. `prefill_comm_ms`: the all-reduces F6
    counts inside `prefill_ms` (0 without TP). Example: bandwidth 10 ms, compute 2 ms, no
    TP: a 5 ms chunk adds 0 ms, a 20 ms chunk 12 ms. Source: docs/method.md, queueing;
    Agrawal et al., Sarathi-Serve (OSDI 2024), section 3.
    """
    bw = np.asarray(bandwidth_ms, dtype=np.float64)
    cp = np.asarray(compute_ms, dtype=np.float64)
    work = np.asarray(prefill_ms, dtype=np.float64) - np.asarray(prefill_comm_ms,
                                                                 dtype=np.float64)
    return np.asarray(np.maximum(bw, cp + work) - np.maximum(bw, cp)
                      + np.asarray(comm_added_ms, dtype=np.float64), dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class ChunkCost:
    """A prompt of P tokens under mixed chunked prefill at one concurrency (arrays, ms):
    what `chunk_cost` returns."""

    step_ms: FloatArray
    """s: the plain decode step at the concurrency (F4)."""
    own_ms: FloatArray
    """The prompt's time from its first chunk to its first token, alone: its m steps and what
    its chunks add to them, m s + `added_ms`."""
    added_ms: FloatArray
    """What the prompt's own chunks add to the steps they ride on (the budget's full chunks
    and the remainder, each `mixed_step_extra_ms`): a decoding request's stall per prompt."""
    full_added_ms: FloatArray
    """k extra(t / k): what the prompt adds where prompts fill every step's budget (>=
    `added_ms`: extra is convex and 0 at 0)."""
    service_ms: FloatArray
    """t': the prompt's share of the budget when every step is full, k (s + extra(t / k)),
    k = P / (B - C): the prompt queue's service time (>= t: a step is at least its
    arithmetic, so rho' < 1 keeps the prefill's arithmetic within the GPU's time)."""
    batched: FloatArray
    """How far one step batches whole prompts, 0..1: (B - C) / P - 1 clipped, 1 where two or
    more prompts fit beside the decodes (prompts that arrive during a step share the next and
    get their first tokens when it ends), 0 where a prompt fills a step or more (first come
    first served). 0 without chunking."""


def chunk_cost(*, step: StepModel, concurrency: FloatArray, prefill_ms: FloatArray,
               budget_tokens: FloatArray, prompt_tokens: npt.ArrayLike) -> ChunkCost:
    """A prompt's costs under mixed chunked prefill, each step one forward pass (ms).

    Per step the budget leaves B - C prompt tokens beside the C decode tokens (at least 1);
    k = P / (B - C); a prompt alone is cut into floor(k) full chunks of x = t / k (F6 time t
    split by tokens) and a remainder of t - floor(k) x, each adding
    extra(x) = `mixed_step_extra_ms` (from `StepModel.parts` at C) to the plain step s, so it
    takes m = ceil(k) steps; with TP each chunk's share of the prompt's all-reduces (F6's
    F10 at P, split by tokens like t) leaves its arithmetic and the pass all-reduces the
    decode and chunk tokens at once (`mixed_step_extra_ms`). Where the budget is infinite (a
    configuration without chunking in a chunked call) the prompt is prefilled whole: own =
    added = service = t.
    Example: s 10 ms (bandwidth 9, compute 3), B - C = 512, P = 1280, t = 30 ms: k = 2.5,
    x = 12 ms adds 6 ms twice, the 6 ms remainder 0: added 12 ms, own 3 x 10 + 12 = 42 ms,
    service 2.5 x (10 + 6) = 40 ms, full_added 2.5 x 6 = 15 ms.
    Source: docs/method.md, queueing (Sarathi-Serve's mixed batches, one weight read).
    """
    p = step.parts(concurrency)
    s = np.asarray(p.step_ms, dtype=np.float64)
    t = np.asarray(prefill_ms, dtype=np.float64)
    prompt_tokens = np.asarray(prompt_tokens, dtype=np.float64)
    finite = np.isfinite(budget_tokens)
    per_step = np.where(finite, np.maximum(budget_tokens - concurrency, 1.0), 1.0)
    k = prompt_tokens / per_step
    whole = np.floor(k)
    x_full = t / k
    rest = t - whole * x_full
    # the prompt's all-reduces (F6 counts F10 at its length) split by tokens like t; each
    # pass all-reduces its decode and prompt tokens at once (`mixed_step_extra_ms`)
    decode = np.asarray(concurrency, dtype=np.float64) * np.asarray(step.verify_tokens)
    comm_t = np.minimum(step.comm_at_tokens(prompt_tokens), t)
    base = step.comm_at_tokens(decode)
    rest_tokens = prompt_tokens - whole * per_step
    extra_full = mixed_step_extra_ms(p.bandwidth_ms, p.compute_ms, x_full, comm_t / k,
                                     step.comm_at_tokens(decode + per_step) - base)
    added = whole * extra_full + mixed_step_extra_ms(
        p.bandwidth_ms, p.compute_ms, rest, comm_t - whole * comm_t / k,
        step.comm_at_tokens(decode + rest_tokens) - base)
    steps = np.ceil(k)
    return ChunkCost(
        step_ms=s,
        own_ms=np.asarray(np.where(finite, steps * s + added, t), dtype=np.float64),
        added_ms=np.asarray(np.where(finite, added, t), dtype=np.float64),
        service_ms=np.asarray(np.where(finite, k * (s + extra_full), t), dtype=np.float64),
        full_added_ms=np.asarray(np.where(finite, k * extra_full, t), dtype=np.float64),
        batched=np.asarray(np.where(finite, np.clip(1.0 / k - 1.0, 0.0, 1.0), 0.0),
                           dtype=np.float64))


def mixed_batches(lam_ms: FloatArray, step_ms: FloatArray, added_ms: FloatArray
                  ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(f, s', W, rho): the batched first token of mixed chunked prefill where a step's budget
    holds several whole prompts (vLLM V1 schedules every waiting prompt that fits into the next
    step): the periods are steps of s plus a the prompt's added time for each prompt in them,
    and the prompts that arrive during one step share the next, each getting its first token
    when that step ends. With rho = lambda a and N ~ Poisson(lambda L) prompts in a period
    after one of length L, E[L] = s / (1 - rho) and the length-biased period
    X = E[L^2] / E[L] = s / (1 - rho) + rho a / (1 - rho^2); a prompt waits the residual X / 2
    and then its step, s + a (its own, `ChunkCost.own_ms`) + a x lambda X (the batch-mates
    that arrived before and after it in its period), so
    E[TTFT] = own + (1 + 2 rho) X / 2 = own + f (s' / 2 + W) with f = (1 + 2 rho) / (1 + rho),
    s' = s (1 + rho) / (1 - rho) the decode part of the residual and W = rho a / (2 (1 - rho))
    the M/D/1 wait of a; the q-quantile is taken as own + f (q s' + W_q), as the batched path's.
    Example: lambda 4 /s, s 5 ms, a 50 ms: rho 0.2, f 1.1667, s' 7.5 ms, W 6.25 ms; the
    prompt's first token 1.1667 x (3.75 + 6.25) = 11.67 ms after its own 55 ms, where first
    come first served with t' = a gives 2.5 + 6.25 = 8.75 ms. Inf at rho >= 1. Unit: ms.
    Source: docs/method.md, queueing (the batched path's derivation with the decode step inside
    each period)."""
    rho = np.asarray(lam_ms * added_ms, dtype=np.float64)
    ok = rho < 1.0
    one_m = np.where(ok, 1.0 - rho, 1.0)
    f = np.where(ok, (1.0 + 2.0 * rho) / (1.0 + rho), np.inf)
    s_b = np.where(ok, step_ms * (1.0 + rho) / one_m, np.inf)
    return (np.asarray(f, dtype=np.float64), np.asarray(s_b, dtype=np.float64),
            _md1(rho, np.asarray(added_ms, dtype=np.float64)), rho)


def _blend(weight: FloatArray, batched: FloatArray, fcfs: FloatArray) -> FloatArray:
    """weight x batched + (1 - weight) x fcfs, each form alone at weight 1 and 0 (an infinite
    form never multiplies a zero weight into a NaN)."""
    with np.errstate(invalid="ignore"):
        mid = weight * batched + (1.0 - weight) * fcfs
    return np.asarray(np.where(weight >= 1.0, batched, np.where(weight > 0.0, mid, fcfs)),
                      dtype=np.float64)


def _md1(r: FloatArray, service: FloatArray) -> FloatArray:
    """The M/D/1 mean wait (ms) at load r of a service of `service` ms; inf at r >= 1."""
    ok = r < 1.0
    return np.asarray(np.where(ok, r * service / (2.0 * np.where(ok, 1.0 - r, 1.0)), np.inf),
                      dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class _Queue:
    """`analytic_latency`'s closed form for one set of configurations (its arrays one row per
    configuration, or scalars): the step and chunk costs at a concurrency, the decode time,
    the first token and a request's duration; `narrow` the same for some of its rows."""

    lam_ms: FloatArray
    t: FloatArray
    step: StepModel
    budget: FloatArray
    chunked: bool
    prompt: FloatArray
    output_tokens: int

    @property
    def n_dec(self) -> int:
        return max(self.output_tokens - 1, 0)

    @cached_property
    def rho(self) -> FloatArray:
        return np.asarray(self.lam_ms * self.t, dtype=np.float64)

    @cached_property
    def ok_p(self) -> BoolArray:
        return np.asarray(self.rho < 1.0)

    @cached_property
    def wq(self) -> FloatArray:
        return _md1(self.rho, self.t)

    @cached_property
    def batching(self) -> FloatArray:
        rho = self.rho
        return np.asarray(np.where(rho < 1.0, (1.0 + 2.0 * rho) / (1.0 + rho), np.inf))

    def costs(self, c: FloatArray) -> ChunkCost:
        return chunk_cost(step=self.step, concurrency=c, prefill_ms=self.t,
                          budget_tokens=self.budget, prompt_tokens=self.prompt)

    def decode_ms(self, s: FloatArray, stall: FloatArray,
                  with_var: bool = True) -> tuple[FloatArray, FloatArray]:
        """Mean and variance of a request's decode time (ms), every prompt prefilled while it
        decodes stalling it `stall` ms; the variance only `with_var` (else NaN: the fixed
        point's duration needs the mean alone)."""
        lam_ms, n_dec = self.lam_ms, self.n_dec
        r = lam_ms * stall
        ok = r < 1.0
        one_m = np.where(ok, 1.0 - r, 1.0)
        with np.errstate(invalid="ignore"):
            # the divisor only where r < 1: at r = 1 exactly (50 /s x 20 ms) it is 0
            lam_x = np.where(ok, lam_ms * ((1.0 - r) * s + r * stall)
                             / np.where(ok, 1.0 - r * r, 1.0), np.inf)
            backlog = r * stall * (1.0 + lam_x) if n_dec else 0.0
            x = n_dec * s + backlog
            mean = np.where(ok, x / one_m, np.inf)
            if not with_var:
                return np.asarray(mean, dtype=np.float64), np.full(np.shape(mean), np.nan)
            var_backlog = stall * stall * (r * (1.0 + lam_x) + r * r * lam_x) if n_dec else 0.0
            var = np.where(ok, var_backlog / one_m ** 2 + x * lam_ms * stall * stall / one_m ** 3,
                           np.inf)
        return np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)

    def first_token_ms(self, s: FloatArray, cc: ChunkCost | None) -> FloatArray:
        """Mean TTFT: the prefill, the residual period and the batch-mates' prefill (chunked:
        its own steps + half a step + the prompts ahead, first come first served, blended
        with `mixed_batches`' step shared by the prompts that arrived during the one before,
        by `ChunkCost.batched`)."""
        if cc is not None:   # the fixed point's hot path: `mixed_batches`' f (s'/2 + W) is
            # (1 + 2 rho) / (2 (1 - rho)) x (s + rho a / (1 + rho)), the M/D/1 wait rho t' /
            # (2 (1 - rho')); both inf past their loads
            r1 = self.lam_ms * cc.service_ms
            ra = self.lam_ms * cc.added_ms
            with np.errstate(divide="ignore", invalid="ignore"):
                fcfs = 0.5 * s + np.where(r1 < 1.0, r1 * cc.service_ms / (2.0 * (1.0 - r1)),
                                          np.inf)
                bat = np.where(ra < 1.0, (1.0 + 2.0 * ra) / (2.0 * (1.0 - ra))
                               * (s + ra * cc.added_ms / (1.0 + ra)), np.inf)
            return np.asarray(cc.own_ms + _blend(cc.batched, bat, fcfs), dtype=np.float64)
        return np.asarray(self.t + self.batching * (0.5 * s + self.wq), dtype=np.float64)

    def duration_at(self, s: FloatArray, cc: ChunkCost | None, mean: FloatArray) -> FloatArray:
        """A request's time in the server (s) at step s, chunk costs cc, decode mean `mean`."""
        tpot = mean / max(self.n_dec, 1)
        return np.asarray((self.first_token_ms(s, cc) + self.output_tokens * tpot) / 1e3,
                          dtype=np.float64)

    def at(self, c: FloatArray) -> tuple[FloatArray, ChunkCost | None, FloatArray]:
        """The step, the chunk costs (chunked) and the stall per prompt at concurrency c."""
        if self.chunked:
            cc = self.costs(c)
            busy = np.minimum(self.lam_ms * cc.service_ms, 1.0)  # rho': the budget shared
            return cc.step_ms, cc, np.asarray((1.0 - busy) * cc.added_ms
                                              + busy * cc.full_added_ms, dtype=np.float64)
        return self.step.step_ms(c), None, self.t

    def duration(self, c: FloatArray) -> FloatArray:
        s, cc, stall = self.at(c)
        return self.duration_at(s, cc, self.decode_ms(s, stall, with_var=False)[0])

    def held_ms(self, x: npt.ArrayLike) -> FloatArray:
        """A slot's holding time with x decoding (ms, `slot_queue`): the request's prefill and
        decode, its wait for the prefill left out."""
        s, cc, stall = self.at(np.asarray(x, dtype=np.float64))
        dec = self.decode_ms(s, stall, with_var=False)[0]
        own = cc.own_ms if cc is not None else self.t
        return np.asarray(own + self.output_tokens * dec / max(self.n_dec, 1), dtype=np.float64)

    def rows(self, rows: npt.NDArray[np.int64]) -> _Queue:
        """The configurations at `rows` alone (each row's figures are its own)."""
        n = np.broadcast(self.lam_ms, self.t, self.budget, self.prompt).shape

        def pick(x: FloatArray) -> FloatArray:
            return x[rows] if np.shape(x) == n else x
        return replace(self, lam_ms=pick(self.lam_ms), t=pick(self.t),
                       step=self.step.select(rows), budget=pick(self.budget),
                       prompt=pick(self.prompt))

    def narrow(self, rows: npt.NDArray[np.int64]) -> Callable[[FloatArray], FloatArray]:
        """`duration` of the configurations at `rows` alone (the fixed point's last iterations
        run only the rows still moving)."""
        return self.rows(rows).duration


def analytic_latency(*, rate_per_s: npt.ArrayLike, step: StepModel, prefill_ms: npt.ArrayLike,
                     output_tokens: int, quantile: float = DEFAULT_SLO_QUANTILE,
                     concurrency: npt.ArrayLike | None = None,
                     limit: npt.ArrayLike = np.inf,
                     chunk_tokens: npt.ArrayLike | None = None,
                     prompt_tokens: npt.ArrayLike | None = None,
                     tpot_quantile: bool = True, ttft_quantile: bool = True,
                     kind_prefill_ms: npt.ArrayLike | None = None,
                     kind_prompt_tokens: npt.ArrayLike | None = None,
                     kind_weights: Sequence[float] = (1.0,),
                     slots: npt.ArrayLike | None = None,
                     ahead: npt.ArrayLike = 0.0) -> AnalyticLatency:
    """TTFT, TPOT and concurrency of one replica under Poisson arrivals, in closed form.

    Prefill-first continuous batching with batched prefill (the discrete-event model without
    chunking, and the simulated endpoint): the GPU alternates decode steps (s) and prefill
    batches; a batch holds every prompt that arrived during the period before it and lasts t per
    prompt, and each of its prompts gets its first token when the whole batch ends.
    - prefill share of the GPU rho = lambda t (t = prefill time of one prompt);
    - a request arriving during a period of length L waits its residual R, then its batch:
      itself plus the arrivals during the period before and after it, so
      E[TTFT] = t + E[R] + rho (E[A] + E[R]) = t + (1 + 2 rho) X / 2, with X = E[L^2] / E[L]
      the length-biased period; batch sizes are Poisson in the previous period's length, so
      X = (1 - rho) s + rho t (1 + lambda X), i.e. X = ((1 - rho) s + rho t) / (1 - rho^2).
      Equivalently E[TTFT] = t + f (s/2 + W) with W = rho t / (2 (1 - rho)) the M/D/1 wait of
      serial prefill and f = (1 + 2 rho) / (1 + rho) the batching factor; the q-quantile is
      t + f (s q + W_q), W_q from the exponential tail (`wait_quantile_ms`);
    - decoding pauses for every prefill, so a request's decode lasts the busy period started by
      its own (output - 1) steps T0 plus the batch prefilled right after its first token
      (B = t x Poisson(rho K), K = 1 + Poisson(lambda X) its own batch): mean
      (T0 + E[B]) / (1 - rho), variance Var(B) / (1 - rho)^2 + (T0 + E[B]) lambda t^2 /
      (1 - rho)^3 (M/G/1 busy period); TPOT = that time / (output - 1), its quantile from a
      moment-matched gamma;
    - concurrency C = lambda x (TTFT + output x TPOT(C)), a fixed point (F9), unless
      `concurrency` is given; s = t_step(C) (F4);
    - saturated where rho >= 1, the GPU time per request exceeds 1 / lambda, or no fixed point.
    Idle time (no request running) is ignored: at light load it overstates the wait by s/2 at
    most.
    With mixed chunked prefill (`chunk_tokens`, the engine's token budget B, and
    `prompt_tokens` P given; vLLM V1, llama.cpp): a step carries the C decode tokens and up to
    B - C prompt tokens in one forward pass, the weights read once, as the event model's and
    the simulated engine's mixed step (`roofline.mixed_step_time_ms`): a chunk of prefill time
    x adds extra(x) = max(bandwidth, compute + x) - max(bandwidth, compute) to the step s
    (`mixed_step_extra_ms`, the step's parts from `StepModel.parts`), not x. With the costs
    of `chunk_cost` (own, added a, full-step a_f, service t'):
    - a prompt alone takes own = m s + a (m = ceil(P / (B - C)) steps, a what its chunks add);
    - prompts are served first come first served, each holding the budget for P / (B - C)
      full steps, t' = k (s + extra(t / k)): E[TTFT] = own + s/2 + W', W' the M/D/1 wait at
      rho' = lambda t' (no batching factor: a prompt's first token does not wait for its
      batch-mates); the q-quantile is own + q s + W'_q;
    - where a step holds two or more whole prompts ((B - C) / P >= 2) the prompts that arrive
      during a step share the next: E[TTFT] = own + f (s'/2 + W_a), q-quantile own +
      f (q s' + W_a,q) (`mixed_batches`: rho = lambda a, s' = s (1 + rho) / (1 - rho));
      between one and two prompts a step the two are blended by `ChunkCost.batched`;
    - TPOT: decoding does not pause; each prompt prefilled while a request decodes lengthens
      the steps it rides on by a' = (1 - rho') a + rho' a_f (its chunks ride alone, or, with
      the probability rho' that the budget is in use (Poisson arrivals see time averages),
      in steps other prompts fill), so the decode time is the busy-period form above with a'
      in place of t (stall share lambda a', `prefill_share`);
    - the GPU time per request (utilisation) counts a' beside its share of the decode steps;
      saturated also where rho' >= 1 (the prompts' chunks outrun the budget).
    - an engine that schedules one step ahead (`ahead` 1 per configuration, vLLM since
      0.14.0, SGLang since 0.4.0: `EngineProfile.schedules_ahead`) has fixed the next
      step's batch when a request arrives: one that finds the engine busy (probability
      1 - exp(-C), Poisson requests in the system) waits that step, s; where prompts share
      a step and some arrived during the step before (probability r = 1 - exp(-lambda s'),
      s' the batched steps' period below), that step carries their chunks, a (`added_ms`),
      which no longer share the request's own (first come first served they were ahead of
      it in W' anyway): E[TTFT] gains (1 - exp(-C)) s + b r a (`ChunkCost.batched` b),
      and the batched quantile runs over each kind with a added (a share r) and without
      (`mixture_quantile_ms`), the whole quantile then (1 - exp(-C)) s more (the event
      model: `events.run_trace`; docs/method.md, "Scheduled one step ahead"). With batched
      prefill (SGLang) a busy engine has fixed a decode step after each batch, so the
      prompts that arrived during it wait that step: E[TTFT] and its quantile gain
      (1 - exp(-C)) s (the prompts that arrived during the period before were ahead of the
      request either way).
    Where the steps are compute-bound extra(x) = x, a = a' = t, and this is the earlier
    closed form (a step = the decode step + the chunk's prefill). Against the event model
    with vLLM's budget (Llama-3.1-70B on 4 H100s with 64-token prompts, Qwen3-14B on an A100
    with 300, Qwen3-8B on an L40S with 1,024; 5 to 80 % of saturation, seeded runs of 3,000
    requests, when this was written): mean TPOT within 3 %, p90 TPOT within 8 %, mean TTFT
    within 5 % up to a quarter of saturation; past half of it TTFT is optimistic (p90 15-30 %
    low at 70-80 %: other prompts' chunks lengthen a prompt's own steps, which `own` leaves
    out). tests/test_queueing.py holds the first two cases at 5 % and 25 %.
    Where requests differ (a conversation's turns, a shared prefix's hits and misses)
    `kind_prefill_ms` and `kind_prompt_tokens` are the prefill and new tokens of each kind of
    request (`prefix.request_kinds`; one column per kind, each kind's share of the requests in
    `kind_weights`): the TTFT quantile runs over them (`mixture_quantile_ms`: kind k takes
    own_k + q s + W' chunked, t_k + f (q s + W) batched, the wait shared); the mean and the
    load are the mean request's. One kind: own + q s + W'_q, t + f (q s + W_q).
    `ttft_quantile` False leaves the TTFT percentile out (`ttft_q_ms` is NaN where the load is
    not saturated), for callers that read only the concurrency or the duration.
    `tpot_quantile` False leaves the TPOT percentile out (`tpot_q_ms` is NaN where the load is
    not saturated), for callers that need only the concurrency, the means or the duration, or
    that ask `gamma_quantile_at_most` of `decode_mean_ms` and `decode_var_ms2`: the gamma
    quantile is a good part of a call.
    Unit: ms (TTFT, TPOT), requests (C). Source: docs/method.md, queueing; Kleinrock, Queueing Systems
    vol. 1, sections 5.6-5.8 (M/G/1 waiting-time moments and busy periods).
    With `slots` (min(C_vram, max_num_seqs) per configuration) TTFT also waits for a free slot
    (`slot_wait`: each slot held for the request's prefill and decode, D(n) with n decoding,
    its wait for the prefill left out (the one prefill line it would queue in anyway: where
    prompts saturate the GPU the slot limit moves that queue, it does not add one), lambda x
    that time busy, D's elasticity over `SLOT_STRETCH` and D(c) with every slot busy; its mean
    joins the mean TTFT and its exponential tail's q-quantile the TTFT quantile),
    which the concurrency's fixed point leaves out (C counts the requests in the slots). Where
    the busy slots reach the slots no wait is added: the caller rejects C above the slots, as
    without `slots`.
    """
    lam_ms = np.asarray(rate_per_s, dtype=np.float64) / 1e3
    t = np.asarray(prefill_ms, dtype=np.float64)
    chunked = chunk_tokens is not None
    prompt = np.asarray(1.0 if prompt_tokens is None else prompt_tokens, dtype=np.float64)
    if chunked and (prompt_tokens is None or not np.all(prompt >= 1)):
        raise InputError("chunked prefill in the analytic path needs the prompt length")
    budget = np.asarray(chunk_tokens if chunked else np.inf, dtype=np.float64)
    n_dec = max(output_tokens - 1, 0)
    m = _Queue(lam_ms=lam_ms, t=t, step=step, budget=budget, chunked=chunked, prompt=prompt,
               output_tokens=output_tokens)
    rho, ok_p, wq, batching, md1 = m.rho, m.ok_p, m.wq, m.batching, _md1
    at, decode_ms, first_token_ms, duration_at = m.at, m.decode_ms, m.first_token_ms, m.duration_at

    lam = lam_ms * 1e3
    if concurrency is None:
        # batched prefill: rho >= 1 saturates whatever C is (no fixed point to look for)
        fp = concurrency_fixed_point(lam if chunked else np.where(ok_p, lam, 0.0), m.duration,
                                     limit=limit, narrow=m.narrow, accelerate=True)
        c = fp.concurrency
        converged = fp.converged | (lam == 0)
        fp_duration: FloatArray | None = fp.duration_s  # duration(c) at its last iterate
    else:
        c = np.broadcast_to(np.asarray(concurrency, dtype=np.float64), lam.shape).copy()
        converged = np.ones(c.shape, dtype=bool)
        fp_duration = None
    s, cc, stall = at(c)
    dec_mean, dec_var = decode_ms(s, stall)
    dur = fp_duration if fp_duration is not None else duration_at(s, cc, dec_mean)
    tpot = dec_mean / max(n_dec, 1)
    tpot_q = (gamma_quantile(dec_mean, dec_var, quantile) / max(n_dec, 1) if tpot_quantile
              else np.full(np.shape(dec_mean), np.nan))
    ttft_mean = first_token_ms(s, cc)
    kinds = None if kind_prefill_ms is None else np.asarray(kind_prefill_ms, dtype=np.float64)
    if cc is not None:
        rho_c = lam_ms * cc.service_ms
        w_c = md1(rho_c, cc.service_ms)
        if not ttft_quantile:
            own = np.full((*np.shape(s), 1), np.nan)   # a NaN percentile
        elif kinds is None:
            own = cc.own_ms[..., None]
        else:
            toks = np.broadcast_to(np.asarray(
                kind_prompt_tokens if kind_prompt_tokens is not None else prompt[..., None],
                dtype=np.float64), kinds.shape)
            own = np.stack([chunk_cost(step=step, concurrency=c, prefill_ms=kinds[..., k],
                                       budget_tokens=budget, prompt_tokens=toks[..., k]).own_ms
                            for k in range(kinds.shape[-1])], axis=-1)
        fcfs_q = (own[..., 0] + quantile * s + wait_quantile_ms(w_c, rho_c, quantile)
                  if own.shape[-1] == 1 else
                  mixture_quantile_ms(own + (quantile * s)[..., None], kind_weights, w_c, rho_c,
                                      quantile))
        f_b, s_b, w_b, rho_b = mixed_batches(lam_ms, s, cc.added_ms)
        # scheduled one step ahead: a request that finds the engine busy waits the step
        # already fixed; where prompts share steps, that step holds the chunks of the prompts
        # that arrived during the step before (probability r), which no longer share the
        # request's own (first come first served they were ahead of it in W' anyway)
        on = np.broadcast_to(np.asarray(ahead, dtype=np.float64), np.shape(s))
        with np.errstate(invalid="ignore"):   # inf x 0 where nothing batches
            busy, r = -np.expm1(-c), on * np.nan_to_num(-np.expm1(-lam_ms * s_b))
            bat_off = own + (f_b * quantile * s_b)[..., None]
            # one column: the mean request (or no percentile asked for)
            bat_w: npt.ArrayLike = kind_weights if own.shape[-1] > 1 else (1.0,)
            if np.any(r > 0):   # each kind with and without those chunks ahead of it
                bat_off = np.concatenate([bat_off, bat_off + cc.added_ms[..., None]], axis=-1)
                weights = np.asarray(bat_w, dtype=np.float64)
                bat_w = np.concatenate([weights * (1.0 - r)[..., None],
                                        weights * r[..., None]], axis=-1)
            bat_q = mixture_quantile_ms(bat_off, bat_w, w_b, rho_b, quantile, scale=f_b)
            ttft_q = _blend(cc.batched, bat_q, fcfs_q) + on * busy * s
        ttft_mean = ttft_mean + on * (busy * s + cc.batched * r * cc.added_ms)
        share = lam_ms * stall
        ok_p = (rho_c < 1.0) & (share < 1.0)
        gpu_ms_per_request = stall + n_dec * s / np.maximum(c, 1.0)
    else:
        own = (np.full((*np.shape(s), 1), np.nan) if not ttft_quantile else
               np.broadcast_to(t, np.shape(s))[..., None] if kinds is None else kinds)
        ttft_q = (own[..., 0] + batching * (quantile * s + wait_quantile_ms(wq, rho, quantile))
                  if own.shape[-1] == 1 else
                  mixture_quantile_ms(own + (batching * quantile * s)[..., None], kind_weights,
                                      wq, rho, quantile, scale=batching))
        # scheduled one step ahead: the prompts that reach a busy engine during a batch wait
        # the decode step already fixed after it (the event model: `events.run_trace`)
        gain = np.asarray(ahead, dtype=np.float64) * -np.expm1(-c) * s
        ttft_mean = ttft_mean + gain
        ttft_q = ttft_q + gain
        share = rho
        gpu_ms_per_request = t + n_dec * s / np.maximum(c, 1.0)
    if slots is not None:   # the wait for a free slot (docs/method.md, queueing), before prefill
        w_slot, p_slot = slot_queue(m.held_ms, lam_ms, c, slots,
                                    subset=lambda rows: m.rows(rows).held_ms,
                                    stall_share=share)
        ttft_q = with_slot_wait_quantile(ttft_q, ttft_mean, w_slot, p_slot, quantile)
        ttft_mean = ttft_mean + w_slot
    util = lam_ms * gpu_ms_per_request
    saturated = ~ok_p | (util >= 1.0) | ~converged
    inf = np.inf
    return AnalyticLatency(
        rate_per_s=lam, concurrency=c, step_ms=s, prefill_share=np.asarray(share),
        utilization=util,
        ttft_mean_ms=np.asarray(np.where(saturated, inf, ttft_mean), dtype=np.float64),
        ttft_q_ms=np.asarray(np.where(saturated, inf, ttft_q), dtype=np.float64),
        tpot_ms=np.asarray(np.where(saturated, inf, tpot), dtype=np.float64),
        tpot_q_ms=np.asarray(np.where(saturated, inf, tpot_q), dtype=np.float64),
        duration_s=np.asarray(np.where(saturated, inf, dur), dtype=np.float64),
        saturated=np.asarray(saturated), decode_mean_ms=dec_mean, decode_var_ms2=dec_var,
    )
