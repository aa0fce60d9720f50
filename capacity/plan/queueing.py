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
  at the end of the step that prefills its last chunk. This closed form lasts a mixed step the
  decode step plus the chunks' prefill time, `step = t_step(b) + sum of F6(done + n) - F6(done)`,
  while the event model and the simulated engine take it as one forward pass that reads the
  weights once (`capacity.model.roofline.mixed_step_time_ms`, since 2026-12-01): the closed
  form is the slower of the two where a chunk rides in a bandwidth-bound step (issue 32 keeps
  them to be made one);
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
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capacity.errors import InputError
from capacity.model.roofline import StepModel as StepModel  # re-exported: the one F4 step
from capacity.model.workload import concurrency_fixed_point
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


def analytic_latency(*, rate_per_s: npt.ArrayLike, step: StepModel, prefill_ms: npt.ArrayLike,
                     output_tokens: int, quantile: float = DEFAULT_SLO_QUANTILE,
                     concurrency: npt.ArrayLike | None = None,
                     limit: npt.ArrayLike = np.inf,
                     chunk_tokens: npt.ArrayLike | None = None,
                     prompt_tokens: int | None = None,
                     tpot_quantile: bool = True) -> AnalyticLatency:
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
    `prompt_tokens` P given; vLLM V1, llama.cpp): a step prefills up to B - C prompt tokens
    beside the C decode tokens and lasts s + the chunk's prefill time, so
    - a prompt's own prefill spreads over n = ceil(P / (B - C)) steps: it takes t + n s;
    - prompts are served first come first served, each costing the GPU t' = t + s P / (B - C)
      (its prefill and its share of the steps it rides on): E[TTFT] = t + n s + s/2 + W',
      W' the M/D/1 wait at rho' = lambda t' (no batching factor: a prompt's first token does not
      wait for its batch-mates); the q-quantile is t + n s + q s + W'_q;
    - TPOT keeps the same stall share and spread: the chunks carry the same prefill time (the
      mixed step is the decode step plus the chunk's prefill), and a request that decodes while
      a prompt is prefilled waits for all of its chunks, one step at a time.
    `tpot_quantile` False leaves the TPOT percentile out (`tpot_q_ms` is NaN where the load is
    not saturated), for callers that need only the concurrency, the means or the duration, or
    that ask `gamma_quantile_at_most` of `decode_mean_ms` and `decode_var_ms2`: the gamma
    quantile is a good part of a call.
    Unit: ms (TTFT, TPOT), requests (C). Source: docs/method.md, queueing; Kleinrock, Queueing Systems
    vol. 1, sections 5.6-5.8 (M/G/1 waiting-time moments and busy periods).
    The slot queue (C above the slots) is not modelled here; the caller rejects that case.
    """
    lam_ms = np.asarray(rate_per_s, dtype=np.float64) / 1e3
    t = np.asarray(prefill_ms, dtype=np.float64)
    rho = lam_ms * t
    chunked = chunk_tokens is not None
    if chunked and (prompt_tokens is None or prompt_tokens < 1):
        raise InputError("chunked prefill in the analytic path needs the prompt length")
    budget = np.asarray(chunk_tokens if chunked else np.inf, dtype=np.float64)
    prompt = float(prompt_tokens or 1)

    def chunking(c: FloatArray, s: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Mixed chunked prefill at concurrency c: (n s, t' = t + s P / (B - C))."""
        per_step = np.maximum(budget - c, 1.0)
        n_steps = np.ceil(prompt / per_step)
        return (np.asarray(n_steps * s, dtype=np.float64),
                np.asarray(t + s * prompt / per_step, dtype=np.float64))
    ok_p = rho < 1.0
    one_m = np.where(ok_p, 1.0 - rho, 1.0)
    wq = np.where(ok_p, rho * t / (2.0 * one_m), np.inf)
    batching = np.where(ok_p, (1.0 + 2.0 * rho) / (1.0 + rho), np.inf)
    n_dec = max(output_tokens - 1, 0)

    def chunk_wait(c: FloatArray, s: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Mixed chunked prefill: (own steps n s, mean wait W', rho')."""
        own, t_prime = chunking(c, s)
        rho_p = lam_ms * t_prime
        ok = rho_p < 1.0
        w = np.where(ok, rho_p * t_prime / (2.0 * np.where(ok, 1.0 - rho_p, 1.0)), np.inf)
        return own, np.asarray(w, dtype=np.float64), np.asarray(rho_p, dtype=np.float64)

    def wait_ms(s: FloatArray, c: FloatArray | None = None) -> FloatArray:
        """Mean TTFT minus one prompt's prefill: residual period + the batch-mates' prefill
        (chunked: its own steps + half a step + the prompts ahead)."""
        if chunked:
            assert c is not None
            own, w, _ = chunk_wait(c, s)
            return np.asarray(own + 0.5 * s + w, dtype=np.float64)
        return np.asarray(batching * (0.5 * s + wq), dtype=np.float64)

    # the parts of decode_ms that do not depend on the step (computed once, not per iteration)
    idle_share, rho_t, one_m_rho2 = 1.0 - rho, rho * t, 1.0 - rho * rho

    def decode_ms(s: FloatArray, with_var: bool = True) -> tuple[FloatArray, FloatArray]:
        """Mean and variance of a request's decode time (ms); the variance only `with_var`
        (else NaN: the fixed point's duration needs the mean alone)."""
        with np.errstate(invalid="ignore"):
            lam_x = np.where(ok_p, lam_ms * (idle_share * s + rho_t) / one_m_rho2, np.inf)
            backlog = rho_t * (1.0 + lam_x) if n_dec else 0.0
            x = n_dec * s + backlog
            mean = np.where(ok_p, x / one_m, np.inf)
            if not with_var:
                return np.asarray(mean, dtype=np.float64), np.full(np.shape(mean), np.nan)
            var_backlog = t * t * (rho * (1.0 + lam_x) + rho * rho * lam_x) if n_dec else 0.0
            var = np.where(ok_p, var_backlog / one_m ** 2 + x * lam_ms * t * t / one_m ** 3,
                           np.inf)
        return np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)

    def duration_at(c: FloatArray, s: FloatArray, mean: FloatArray) -> FloatArray:
        """A request's time in the server (s) at concurrency c, step s, decode mean `mean`."""
        tpot = mean / max(n_dec, 1)
        return np.asarray((t + wait_ms(s, c) + output_tokens * tpot) / 1e3, dtype=np.float64)

    def duration(c: FloatArray) -> FloatArray:
        s = step.step_ms(c)
        return duration_at(c, s, decode_ms(s, with_var=False)[0])

    lam = lam_ms * 1e3
    if concurrency is None:
        fp = concurrency_fixed_point(np.where(ok_p, lam, 0.0), duration, limit=limit)
        c = fp.concurrency
        converged = fp.converged | (lam == 0)
        fp_duration: FloatArray | None = fp.duration_s  # duration(c) at its last iterate
    else:
        c = np.broadcast_to(np.asarray(concurrency, dtype=np.float64), lam.shape).copy()
        converged = np.ones(c.shape, dtype=bool)
        fp_duration = None
    s = step.step_ms(c)
    dec_mean, dec_var = decode_ms(s)
    dur = fp_duration if fp_duration is not None else duration_at(c, s, dec_mean)
    tpot = dec_mean / max(n_dec, 1)
    tpot_q = (gamma_quantile(dec_mean, dec_var, quantile) / max(n_dec, 1) if tpot_quantile
              else np.full(np.shape(dec_mean), np.nan))
    ttft_mean = t + wait_ms(s, c)
    if chunked:
        own, w_c, rho_c = chunk_wait(c, s)
        ttft_q = t + own + quantile * s + wait_quantile_ms(w_c, rho_c, quantile)
        ok_p = ok_p & (rho_c < 1.0)
    else:
        ttft_q = t + batching * (quantile * s + wait_quantile_ms(wq, rho, quantile))
    gpu_ms_per_request = t + n_dec * s / np.maximum(c, 1.0)
    util = lam_ms * gpu_ms_per_request
    saturated = ~ok_p | (util >= 1.0) | ~converged
    inf = np.inf
    return AnalyticLatency(
        rate_per_s=lam, concurrency=c, step_ms=s, prefill_share=rho, utilization=util,
        ttft_mean_ms=np.asarray(np.where(saturated, inf, ttft_mean), dtype=np.float64),
        ttft_q_ms=np.asarray(np.where(saturated, inf, ttft_q), dtype=np.float64),
        tpot_ms=np.asarray(np.where(saturated, inf, tpot), dtype=np.float64),
        tpot_q_ms=np.asarray(np.where(saturated, inf, tpot_q), dtype=np.float64),
        duration_s=np.asarray(np.where(saturated, inf, dur), dtype=np.float64),
        saturated=np.asarray(saturated), decode_mean_ms=dec_mean, decode_var_ms2=dec_var,
    )
