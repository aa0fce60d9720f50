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
  at the end of the step that prefills its last chunk, and the step lasts the decode step plus
  the chunks' prefill time: `step = t_step(b) + sum of F6(done + n) - F6(done)` (the same
  formula as the simulated engine, `capacity.sim.scheduler.SimPhysics.mixed_step_s`);
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

The discrete-event model jumps from event to event (arrival, completion, prefill batch or chunk),
not from step to step, so thousands of requests take milliseconds. The analytic path (`analytic_latency`)
gives the same quantities in closed form over arrays of configurations, for the planner's search.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import gammaincinv

from capacity.catalog.engines import DEFAULT_ENGINE, EngineProfile, engine_profile
from capacity.errors import InputError
from capacity.model.kv import kv_request_bytes
from capacity.model.prefix import cached_prefill_s
from capacity.model.roofline import StepModel as StepModel  # re-exported: the one F4 step
from capacity.model.roofline import step_time_ms
from capacity.model.scenario import Scenario, decode_model, evaluate
from capacity.model.traffic import Arrivals, LengthDist, Traffic, TrafficSample
from capacity.model.workload import concurrency_fixed_point
from capacity.types import BoolArray, FloatArray, IntArray, Note

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


def gamma_quantile(mean: npt.ArrayLike, var: npt.ArrayLike, q: float) -> FloatArray:
    """q-quantile of a gamma distribution with this mean and variance (moment match).

    shape k = mean^2 / var, scale = var / mean; a zero variance gives the mean itself.
    """
    m = np.asarray(mean, dtype=np.float64)
    v = np.asarray(var, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(v > 0, m * m / np.where(v > 0, v, 1.0), np.inf)
        scale = np.where(m > 0, v / np.where(m > 0, m, 1.0), 0.0)
        finite = np.isfinite(k) & (k > 0) & np.isfinite(m)
        x = np.where(finite, gammaincinv(np.where(finite, k, 1.0), q) * scale, m)
    return np.asarray(x, dtype=np.float64)


def analytic_latency(*, rate_per_s: npt.ArrayLike, step: StepModel, prefill_ms: npt.ArrayLike,
                     output_tokens: int, quantile: float = DEFAULT_SLO_QUANTILE,
                     concurrency: npt.ArrayLike | None = None,
                     limit: npt.ArrayLike = np.inf,
                     chunk_tokens: npt.ArrayLike | None = None,
                     prompt_tokens: int | None = None) -> AnalyticLatency:
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

    def decode_ms(s: FloatArray) -> tuple[FloatArray, FloatArray]:
        with np.errstate(invalid="ignore"):
            lam_x = np.where(ok_p, lam_ms * ((1.0 - rho) * s + rho * t) / (1.0 - rho * rho),
                             np.inf)
            backlog = rho * t * (1.0 + lam_x) if n_dec else 0.0
            var_backlog = t * t * (rho * (1.0 + lam_x) + rho * rho * lam_x) if n_dec else 0.0
            x = n_dec * s + backlog
            mean = np.where(ok_p, x / one_m, np.inf)
            var = np.where(ok_p, var_backlog / one_m ** 2 + x * lam_ms * t * t / one_m ** 3,
                           np.inf)
        return np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)

    def duration(c: FloatArray) -> FloatArray:
        s = step.step_ms(c)
        mean, _ = decode_ms(s)
        tpot = mean / max(n_dec, 1)
        return np.asarray((t + wait_ms(s, c) + output_tokens * tpot) / 1e3, dtype=np.float64)

    lam = lam_ms * 1e3
    if concurrency is None:
        fp = concurrency_fixed_point(np.where(ok_p, lam, 0.0), duration, limit=limit)
        c = fp.concurrency
        converged = fp.converged | (lam == 0)
    else:
        c = np.broadcast_to(np.asarray(concurrency, dtype=np.float64), lam.shape).copy()
        converged = np.ones(c.shape, dtype=bool)
    s = step.step_ms(c)
    dec_mean, dec_var = decode_ms(s)
    tpot = dec_mean / max(n_dec, 1)
    tpot_q = gamma_quantile(dec_mean, dec_var, quantile) / max(n_dec, 1)
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
        duration_s=np.asarray(np.where(saturated, inf, duration(c)), dtype=np.float64),
        saturated=np.asarray(saturated),
    )


# ---------------------------------------------------------------------------------------------
# Discrete-event model (one configuration)


@dataclass(frozen=True, kw_only=True)
class ServiceModel:
    """Timings of one replica: step terms for every batch size 0..slots, and prefill."""

    slots: int
    bandwidth_ms: FloatArray
    compute_ms: FloatArray
    comm_ms: FloatArray
    overhead_ms: float
    prefill_ms: float
    prompt_tokens: int
    output_tokens: int
    chunk_tokens: int | None = None
    """Tokens one step may carry (the engine's token budget); None = whole prompts."""
    mixed: bool = True
    """With a budget: decode tokens and prompt chunks share a step (vLLM, llama.cpp); False: a
    prefill batch of at most the budget pauses decoding (SGLang)."""
    prefill_cum_ms: FloatArray | None = None
    """F6 prefill time (ms) of a prompt's first k tokens, k = 0..prompt_tokens (chunk times are
    differences of it); None = linear, k x prefill_ms / prompt_tokens."""
    engine: str = "chapter"
    """The engine profile these timings and this scheduling come from (a label)."""
    serial_ms: FloatArray | None = None
    """What the step adds to the overlap of its terms, per batch 0..slots (`DecodeStep.serial_ms`:
    the operator method's groups run one after another, and per-sequence overhead); None: 0."""

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise InputError("no request fits in memory (0 slots): use a bigger GPU, more "
                             "GPUs, a shorter context or a smaller KV precision")
        if self.output_tokens < 1 or self.prompt_tokens < 1:
            raise InputError("prompt and output must be >= 1 token")
        if self.chunk_tokens is not None and self.mixed and self.chunk_tokens <= self.slots:
            raise InputError(f"chunked-prefill budget of {self.chunk_tokens} tokens must exceed "
                             f"the {self.slots} decode slots (vLLM's max_num_batched_tokens)")
        if self.chunk_tokens is not None and self.chunk_tokens < 1:
            raise InputError(f"chunked-prefill budget must be >= 1 token, got {self.chunk_tokens}")
        if self.prefill_cum_ms is not None and len(self.prefill_cum_ms) != self.prompt_tokens + 1:
            raise InputError("prefill_cum_ms needs one time per prompt length 0..prompt_tokens")
        if self.prefill_ms < 0:
            raise InputError("prefill time must be >= 0 ms")

    @property
    def step_ms(self) -> FloatArray:
        """Decode step time (ms) for 0..slots sequences (F4's combination of the terms)."""
        return step_time_ms(bandwidth_ms=self.bandwidth_ms, compute_ms=self.compute_ms,
                            comm_ms=self.comm_ms, overhead_ms=self.overhead_ms) + self._serial()

    def _serial(self) -> FloatArray:
        return (np.zeros_like(self.bandwidth_ms) if self.serial_ms is None
                else np.asarray(self.serial_ms, dtype=np.float64))

    def chunk_ms(self, done_tokens: int, chunk_tokens: int) -> float:
        """Prefill time (ms) of prompt tokens done..done+chunk: F6 at the end minus F6 at the
        start, so a prompt's chunks add up to its whole prefill."""
        if self.prefill_cum_ms is None:
            return chunk_tokens * self.prefill_ms / self.prompt_tokens
        return float(self.prefill_cum_ms[done_tokens + chunk_tokens]
                     - self.prefill_cum_ms[done_tokens])

    def mixed_step_ms(self, batch: int, chunks: Sequence[tuple[int, int]]) -> float:
        """A mixed step: `batch` decode tokens plus prompt `chunks` ((done, tokens) each), in ms.

        t_step(b) (F4; 0 without decoding requests) + the chunks' prefill times (`chunk_ms`):
        kernels run one after another within the step; docs/method.md, "Engine profiles", and
        `capacity.sim.scheduler.SimPhysics.mixed_step_s` (the same formula) give the source.
        """
        base = float(self.step_ms[batch]) if batch else 0.0
        return base + sum(self.chunk_ms(d, n) for d, n in chunks)

    @property
    def saturation_rate_per_s(self) -> float:
        """Arrival rate (req/s) above which the queue grows without bound.

        Full slots: each request costs the GPU t_prefill + output x t_step(slots) / slots; a
        chunked prompt costs the same prefill time, only spread over steps.
        """
        b = self.slots
        decode_ms = (self.output_tokens - 1) * float(self.step_ms[b]) / b
        return 1e3 / (self.prefill_ms + decode_ms)


def service_from_scenario(s: Scenario, *, output_tokens: int,
                          max_num_seqs: int | None = None,
                          chunk_tokens: int | None = None,
                          engine: str | EngineProfile = DEFAULT_ENGINE) -> ServiceModel:
    """One replica of `s` as a ServiceModel: slots from F3 and max_num_seqs, steps from F4 (with
    TP communication), prefill from F6 with attention, through `scenario.evaluate` (the same
    numbers as the Explorer), scheduled as the engine profile says (`engine`, default the
    chapter's; `max_num_seqs` and `chunk_tokens` override its max_seqs and token budget)."""
    prof = engine_profile(engine) if isinstance(engine, str) else engine
    prof = prof.for_gpu(s.gpu.key, s.vram_gb).with_max_seqs(max_num_seqs)
    budget = chunk_tokens if chunk_tokens is not None else prof.token_budget_tokens or None
    one = evaluate(s, [s.replicas])
    held = s.context_tokens
    if prof.kv_admission == "tokens":
        # the requests whose whole prompt + output fit the pool, in the engine's pages
        full = min(s.prompt + output_tokens, s.context_tokens)
        per_req = float(kv_request_bytes(s.model, float(full), s.kv_dtype, s.tp,
                                         prof.kv_block_tokens).paged_bytes)
        c_vram = int(max(float(one.vram.kv_budget_bytes), 0.0) // per_req)
        held = max(1, min(s.prompt + output_tokens // 2, s.context_tokens))
    else:
        c_vram = int(one.max_concurrency_vram) // s.replicas
    slots = min(c_vram, prof.max_seqs)
    if slots < 1:
        raise InputError(Note(f"{s.variant.key} on {s.gpu.name} (TP={s.tp}) holds no request "
                              f"of {s.context_tokens} tokens: use more or bigger GPUs, a shorter "
                              "context or FP8 KV", code="no_slot", model=s.variant.key,
                              gpu=s.gpu.name, tp=s.tp, context=s.context_tokens))
    b = np.arange(0, slots + 1, dtype=np.float64)
    ev = evaluate(s, b * s.replicas, None if held == s.context_tokens else float(held))
    cum = None
    if budget is not None:
        ks = np.arange(1, s.prompt + 1, dtype=np.float64)
        pre = evaluate(s.with_(prompt_tokens=None), [s.replicas], ks)
        cum = np.concatenate([[0.0], np.asarray(pre.ttft_s, dtype=np.float64).reshape(-1) * 1e3])
    return ServiceModel(
        slots=slots, bandwidth_ms=np.asarray(ev.decode.bandwidth_ms, dtype=np.float64),
        compute_ms=np.asarray(ev.decode.compute_ms, dtype=np.float64),
        comm_ms=np.asarray(ev.decode.comm_ms, dtype=np.float64),
        overhead_ms=s.step_overhead_ms, prefill_ms=float(one.ttft_s) * 1e3,
        prompt_tokens=s.prompt, output_tokens=output_tokens, chunk_tokens=budget,
        mixed=prof.mixed or not prof.chunked, prefill_cum_ms=cum, engine=prof.key,
        serial_ms=np.asarray(ev.decode.serial_ms, dtype=np.float64))


@dataclass(frozen=True, kw_only=True)
class LoadPoint:
    """TTFT and TPOT percentiles (ms) at one closed-loop concurrency (deployment total)."""

    concurrency: int
    ttft_ms: dict[float, float]
    tpot_ms: dict[float, float]


MAX_LOAD_REQUESTS = 4000
"""Requests one `closed_loop_load` point simulates at most (it runs at page speed)."""


def closed_loop_load(s: Scenario, *, engine: str, output_tokens: int,
                     concurrency: Sequence[int]) -> tuple[ServiceModel, list[LoadPoint]]:
    """TTFT/TPOT under the engine's scheduling at each total concurrency: one replica of `s`
    (`service_from_scenario`) in a closed loop of ceil(C / replicas) users with no think time,
    max(200, 4 C) requests (at most MAX_LOAD_REQUESTS), no warm-up left out."""
    svc = service_from_scenario(s, output_tokens=output_tokens, engine=engine)
    out = []
    for c in concurrency:
        per = max(1, math.ceil(c / s.replicas))
        n = min(max(200, 4 * per), MAX_LOAD_REQUESTS)
        q = simulate(svc, concurrency=per, n_requests=n, warmup_fraction=0.0)
        out.append(LoadPoint(concurrency=int(c), ttft_ms=q.ttft_ms, tpot_ms=q.tpot_ms))
    return svc, out


ARRIVALS: tuple[str, ...] = ("poisson", "constant")
"""How open-loop requests arrive: Poisson (exponential gaps, seeded) or evenly spaced."""


def arrival_times_ms(stages: Sequence[tuple[float, float]], *, kind: str = "poisson",
                     seed: int = 0, max_requests: int = MAX_LOAD_REQUESTS * 25) -> FloatArray:
    """Arrival times (ms from 0) of an open-loop load in stages of (rate req/s, duration s),
    one after the other: Poisson arrivals at each stage's rate (seeded), or evenly spaced
    ('constant'). InputError for a rate or duration <= 0, an unknown kind, or more than
    `max_requests` requests in all."""
    if kind not in ARRIVALS:
        raise InputError(f"arrivals must be one of {', '.join(ARRIVALS)}, got '{kind}'")
    if not stages:
        raise InputError("give at least one stage of rate:duration")
    for rate, dur in stages:
        if not (math.isfinite(rate) and rate > 0 and math.isfinite(dur) and dur > 0):
            raise InputError(f"a stage needs a rate > 0 req/s and a duration > 0 s, got "
                             f"{rate:g} req/s for {dur:g} s")
    total = sum(r * d for r, d in stages)
    if total > max_requests:
        raise InputError(f"the stages send {total:,.0f} requests; at most {max_requests:,}")
    rng = np.random.default_rng(seed)
    out: list[FloatArray] = []
    start = 0.0
    for rate, dur in stages:
        end = start + dur * 1e3
        if kind == "constant":
            t = start + np.arange(0.0, dur * rate) * (1e3 / rate)
        else:
            gaps = rng.exponential(1e3 / rate, size=int(rate * dur * 1.5 + 50))
            t = start + np.cumsum(gaps)
        out.append(t[t < end])
        start = end
    arr = np.concatenate(out) if out else np.zeros(0)
    if arr.size < 10:
        raise InputError(f"the stages send {arr.size} requests; give at least 10 (a higher "
                         "rate or a longer duration)")
    return np.asarray(arr, dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class OpenLoopPoint:
    """The event model of one open-loop load (the deployment's total rate): TTFT, the gaps
    between tokens (ITL, token-weighted as the bench measures them), TPOT and E2E, each as a
    mean and its p50/p90/p99, in ms; the output rate and whether the load outruns the
    replica."""

    rate_per_s: float
    stages: tuple[tuple[float, float], ...]
    arrivals: str
    requests: int
    ttft_mean_ms: float
    ttft_ms: dict[float, float]
    itl_mean_ms: float
    itl_ms: dict[float, float]
    tpot_ms: dict[float, float]
    e2e_mean_ms: float
    e2e_ms: dict[float, float]
    output_tok_s: float
    saturated: bool


def open_loop_load(s: Scenario, *, engine: str, output_tokens: int,
                   stages: Sequence[Sequence[tuple[float, float]]], kind: str = "poisson",
                   seed: int = 0) -> tuple[ServiceModel, list[OpenLoopPoint]]:
    """TTFT, ITL, TPOT and E2E under an open-loop load at the engine's scheduling: for each
    load (stages of total rate and duration), one replica of `s` fed 1/replicas of the rate
    (`service_from_scenario`, `arrival_times_ms`), the first 10 % of requests left out as
    warm-up. A load at or past the replica's saturation rate is marked saturated (its queue
    grows for as long as it lasts)."""
    svc = service_from_scenario(s, output_tokens=output_tokens, engine=engine)
    out = []
    for load in stages:
        per = [(r / s.replicas, d) for r, d in load]
        arr = arrival_times_ms(per, kind=kind, seed=seed)
        q = simulate(svc, arrivals_ms=arr.tolist(), itl=True)
        mean_rate = sum(r * d for r, d in load) / sum(d for _, d in load)
        assert q.itl_ms is not None and q.itl_mean_ms is not None
        out.append(OpenLoopPoint(
            rate_per_s=mean_rate, stages=tuple((float(r), float(d)) for r, d in load),
            arrivals=kind, requests=q.requests, ttft_mean_ms=q.mean_ttft_ms,
            ttft_ms=q.ttft_ms, itl_mean_ms=q.itl_mean_ms, itl_ms=q.itl_ms, tpot_ms=q.tpot_ms,
            e2e_mean_ms=q.mean_e2e_ms, e2e_ms=q.e2e_ms, output_tok_s=q.output_tok_s * s.replicas,
            saturated=max(r for r, _ in per) >= svc.saturation_rate_per_s))
    return svc, out


@dataclass(frozen=True, kw_only=True)
class QueueResult:
    """What the discrete-event model measured over the counted requests (after warm-up)."""

    requests: int
    rate_per_s: float | None
    concurrency: int | None
    ttft_ms: dict[float, float]
    tpot_ms: dict[float, float]
    queue_ms: dict[float, float]
    e2e_ms: dict[float, float]
    mean_queue_ms: float
    mean_ttft_ms: float
    throughput_req_s: float
    output_tok_s: float
    goodput_req_s: float
    slo_met_share: float
    mean_running: float
    saturation_rate_per_s: float
    saturated: bool
    slots: int
    itl_ms: dict[float, float] | None = None
    """Quantiles of the gaps between a request's tokens, token-weighted (the bench's ITL: a
    decode step, or a longer gap where prompts were processed in between); None unless
    `simulate(itl=True)`."""
    itl_mean_ms: float | None = None
    """The mean of those gaps, ms (the bench's `itl_mean_ms`); None unless `itl=True`."""
    mean_e2e_ms: float = math.nan
    """The mean end-to-end time of the counted requests, ms."""


@dataclass(frozen=True, kw_only=True)
class _Trace:
    arrival_ms: FloatArray
    admit_ms: FloatArray
    first_ms: FloatArray
    finish_ms: FloatArray
    gaps: _Gaps | None = None


class _Gaps:
    """Inter-token gaps (ms) as the event loop emits tokens: one value, how many tokens had
    it, and whose they were (for leaving the warm-up requests out)."""

    def __init__(self, n_requests: int) -> None:
        self.last_ms = np.full(n_requests, np.nan)
        self.value_ms: list[float] = []
        self.count: list[int] = []
        self.request: list[int] = []

    def add(self, i: int, gap_ms: float, count: int = 1) -> None:
        self.value_ms.append(gap_ms)
        self.count.append(count)
        self.request.append(i)

    def tokens(self, ids: Sequence[int], now_ms: float, step_ms: float | None = None,
               k: int = 1) -> None:
        """Each of `ids` got k tokens ending at `now_ms`, the last k - 1 of them `step_ms`
        apart (decode steps); the first gap runs from its previous token."""
        for i in ids:
            first_gap = now_ms - (k - 1) * (step_ms or 0.0) - float(self.last_ms[i])
            self.add(i, first_gap)
            if k > 1 and step_ms is not None:
                self.add(i, step_ms, k - 1)
            self.last_ms[i] = now_ms

    def kept(self, first_counted: int) -> tuple[FloatArray, FloatArray]:
        """(gap ms, tokens that had it) of requests numbered >= first_counted."""
        v = np.asarray(self.value_ms, dtype=np.float64)
        w = np.asarray(self.count, dtype=np.float64)
        keep = (np.asarray(self.request, dtype=np.int64) >= first_counted) & np.isfinite(v)
        return v[keep], w[keep]

    def mean(self, first_counted: int) -> float:
        """Token-weighted mean gap (ms) of requests numbered >= first_counted (NaN: none)."""
        return weighted_mean(*self.kept(first_counted))

    def quantiles(self, first_counted: int) -> dict[float, float]:
        """Token-weighted quantiles of the gaps of requests numbered >= first_counted."""
        return weighted_quantiles(*self.kept(first_counted))


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


def _run(svc: ServiceModel, arrivals: FloatArray | None, clients: int | None,
         n_requests: int, record_gaps: bool = False) -> _Trace:
    """The event loop. Open loop: `arrivals` (ms, sorted). Closed loop: `clients` users that
    send the next request as soon as the previous one finishes (no think time).
    `record_gaps`: also keep every inter-token gap (memory grows with the tokens)."""
    n = n_requests
    gaps = _Gaps(n) if record_gaps else None
    arrival = np.full(n, np.nan) if arrivals is None else arrivals.copy()
    admit = np.full(n, np.nan)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    out = svc.output_tokens
    chunk = svc.chunk_tokens
    steps = svc.step_ms
    waiting: deque[int] = deque()
    prefill_q: deque[int] = deque()      # admitted, prompt not done (FCFS)
    prompt_left: dict[int, int] = {}
    running: list[int] = []              # decoding: request ids
    remaining: list[int] = []            # decode tokens left per running request
    now = 0.0
    next_arrival = 0                     # index of the next open-loop arrival
    issued = 0
    if clients is not None:
        issued = min(clients, n)
        arrival[:issued] = 0.0
        waiting.extend(range(issued))
    per_step = (svc.chunk_tokens or svc.prompt_tokens) - (svc.slots if svc.mixed else 0)
    guard = 20 * n * (2 + svc.prompt_tokens // max(1, per_step))

    def first_tokens(ids: list[int]) -> None:
        """These prompts get their first token now; they decode on, or end at one token."""
        for i in ids:
            first[i] = now
            if gaps is not None:
                gaps.last_ms[i] = now
            if out > 1:
                running.append(i)
                remaining.append(out - 1)
            else:
                finished_now.append(i)

    for _ in range(guard):
        if arrivals is not None:
            while next_arrival < n and arrival[next_arrival] <= now:
                waiting.append(next_arrival)
                next_arrival += 1
        busy = len(running) + len(prefill_q)
        while waiting and busy < svc.slots:
            i = waiting.popleft()
            admit[i] = now
            prefill_q.append(i)
            prompt_left[i] = svc.prompt_tokens
            busy += 1
        if not running and not prefill_q:
            if arrivals is None or next_arrival >= n:
                break
            now = max(now, float(arrival[next_arrival]))
            continue
        finished_now: list[int] = []
        if prefill_q and svc.chunk_tokens is None:
            # one forward pass over every prompt admitted at this scheduling point: each of
            # them gets its first token when the whole batch's prefill ends
            batch_ids = list(prefill_q)
            prefill_q.clear()
            for i in batch_ids:
                del prompt_left[i]
            now += svc.prefill_ms * len(batch_ids)
            first_tokens(batch_ids)
        elif prefill_q and chunk is not None:
            # mixed: the decoding requests' tokens and prompt chunks share the budget; not
            # mixed (SGLang): a prefill batch of at most the budget, decoding waits
            b = len(running) if svc.mixed else 0
            budget = chunk - b
            used = 0
            done_prompts: list[int] = []
            pieces: list[tuple[int, int]] = []
            while prefill_q and used < budget:
                i = prefill_q[0]
                take = min(budget - used, prompt_left[i])
                pieces.append((svc.prompt_tokens - prompt_left[i], take))
                prompt_left[i] -= take
                used += take
                if prompt_left[i] == 0:
                    prefill_q.popleft()
                    del prompt_left[i]
                    done_prompts.append(i)   # first token at the end of this step
            now += svc.mixed_step_ms(b, pieces)
            if b:
                remaining = [r - 1 for r in remaining]
                if gaps is not None:
                    gaps.tokens(running, now)
            first_tokens(done_prompts)
        else:
            b = len(running)
            k = min(remaining)
            if arrivals is not None and next_arrival < n and busy < svc.slots:
                gap = float(arrival[next_arrival]) - now
                k = max(1, min(k, math.ceil(gap / steps[b]) if gap > 0 else 1))
            elif waiting and busy < svc.slots:
                k = 1
            now += k * float(steps[b])
            remaining = [r - k for r in remaining]
            if gaps is not None:
                gaps.tokens(running, now, float(steps[b]), k)
        keep_r: list[int] = []
        keep_m: list[int] = []
        for i, r in zip(running, remaining, strict=True):
            if r <= 0:
                finished_now.append(i)
            else:
                keep_r.append(i)
                keep_m.append(r)
        running, remaining = keep_r, keep_m
        for i in finished_now:
            finish[i] = now
            if clients is not None and issued < n:
                arrival[issued] = now
                waiting.append(issued)
                issued += 1
        if arrivals is None and issued >= n and not waiting and not running and not prefill_q:
            break
    else:  # pragma: no cover - the guard is generous; reaching it is a bug
        raise RuntimeError("queueing model did not finish within its step guard")
    return _Trace(arrival_ms=arrival, admit_ms=admit, first_ms=first, finish_ms=finish,
                  gaps=gaps)


def _quantiles(x: FloatArray) -> dict[float, float]:
    if x.size == 0:
        return {q: math.nan for q in QUANTILES}
    v = np.quantile(x, QUANTILES)
    return {q: float(v[j]) for j, q in enumerate(QUANTILES)}


def simulate(svc: ServiceModel, *, rate_per_s: float | None = None,
             concurrency: int | None = None, arrivals_ms: Sequence[float] | None = None,
             n_requests: int = 2000, seed: int = 0,
             slo_ttft_ms: float = math.inf, slo_tpot_ms: float = math.inf,
             warmup_fraction: float = 0.1, itl: bool = False) -> QueueResult:
    """Run the discrete-event model of one replica and summarize it.

    Give `rate_per_s` (Poisson arrivals, seeded), `concurrency` (closed loop, zero think
    time) or `arrivals_ms` (replay these arrival times, ms from any origin, in order; then
    `n_requests` is their count and `rate_per_s` in the result is their mean rate).
    The first `warmup_fraction` of requests (by arrival) are left out of the statistics.
    `itl`: also the quantiles of the inter-token gaps (`QueueResult.itl_ms`).
    Goodput = counted requests that meet both SLOs / the span from the first counted arrival to
    the last counted finish. Deterministic for a given seed.
    """
    if sum(x is not None for x in (rate_per_s, concurrency, arrivals_ms)) != 1:
        raise InputError("give one of: an arrival rate, a closed-loop concurrency, or a list "
                         "of arrival times")
    if arrivals_ms is not None:
        n_requests = len(arrivals_ms)
    if not 10 <= n_requests <= 1_000_000:
        raise InputError(f"simulate 10..1,000,000 requests, got {n_requests}")
    if not 0 <= warmup_fraction < 0.9:
        raise InputError("warm-up fraction must be in [0, 0.9)")
    arrivals = None
    if arrivals_ms is not None:
        arrivals = np.asarray(arrivals_ms, dtype=np.float64)
        if not np.all(np.isfinite(arrivals)) or np.any(np.diff(arrivals) < 0):
            raise InputError("arrival times must be finite and in increasing order")
        arrivals = arrivals - arrivals[0]
        span = float(arrivals[-1])
        rate_per_s = (n_requests - 1) / span * 1e3 if span > 0 else math.inf
    elif rate_per_s is not None:
        if not (math.isfinite(rate_per_s) and rate_per_s > 0):
            raise InputError(f"arrival rate must be > 0 requests/s, got {rate_per_s}")
        rng = np.random.default_rng(seed)
        arrivals = np.cumsum(rng.exponential(1e3 / rate_per_s, size=n_requests))
    elif concurrency is not None and concurrency < 1:
        raise InputError(f"closed-loop concurrency must be >= 1, got {concurrency}")
    tr = _run(svc, arrivals, concurrency, n_requests, record_gaps=itl)
    skip = int(n_requests * warmup_fraction)
    sl = slice(skip, None)
    arr, adm, fst, fin = tr.arrival_ms[sl], tr.admit_ms[sl], tr.first_ms[sl], tr.finish_ms[sl]
    ttft = fst - arr
    tpot = (fin - fst) / max(svc.output_tokens - 1, 1)
    queue = adm - arr
    e2e = fin - arr
    span_s = max((float(np.max(fin)) - float(np.min(arr))) / 1e3, 1e-9)
    ok = (ttft <= slo_ttft_ms) & (tpot <= slo_tpot_ms)
    sat_rate = svc.saturation_rate_per_s
    return QueueResult(
        requests=int(arr.size), rate_per_s=rate_per_s, concurrency=concurrency,
        ttft_ms=_quantiles(ttft), tpot_ms=_quantiles(tpot), queue_ms=_quantiles(queue),
        e2e_ms=_quantiles(e2e), mean_queue_ms=float(np.mean(queue)),
        mean_e2e_ms=float(np.mean(e2e)),
        mean_ttft_ms=float(np.mean(ttft)), throughput_req_s=arr.size / span_s,
        output_tok_s=arr.size * svc.output_tokens / span_s,
        goodput_req_s=float(np.sum(ok)) / span_s, slo_met_share=float(np.mean(ok)),
        mean_running=float(np.sum(e2e)) / 1e3 / span_s, saturation_rate_per_s=sat_rate,
        saturated=rate_per_s is not None and rate_per_s >= sat_rate, slots=svc.slots,
        itl_ms=tr.gaps.quantiles(skip) if tr.gaps is not None else None,
        itl_mean_ms=tr.gaps.mean(skip) if tr.gaps is not None else None,
    )


def closed_loop_as_run(svc: ServiceModel, *, concurrency: int, shares: Sequence[int]
                       ) -> dict[str, float]:
    """The event model of a closed-loop level as a bench run measures it: one closed loop of
    `concurrency` clients per pass, from an idle replica, with that pass's share of the
    level's requests (`capacity bench --passes`; one share: one pass), pooled as the bench
    pools them: TTFT p50 and p90 over every request (ms, linear interpolation, as the
    bench's), the token-weighted median and mean inter-token gap (ms), output tok/s over the
    sum of the passes' spans. Unlike `simulate`'s steady state, a short pass is mostly its opening
    burst of `concurrency` prompts, which all wait for one another's prefill. No warm-up is
    left out: the bench measures from the first request."""
    if concurrency < 1 or not shares or any(n < 1 for n in shares):
        raise InputError("a closed loop needs >= 1 client and >= 1 request in every pass")
    ttft: list[FloatArray] = []
    gap_v: list[FloatArray] = []
    gap_w: list[FloatArray] = []
    span_s = 0.0
    for n in shares:
        tr = _run(svc, None, concurrency, n, record_gaps=True)
        ttft.append(tr.first_ms - tr.arrival_ms)
        span_s += (float(np.max(tr.finish_ms)) - float(np.min(tr.arrival_ms))) / 1e3
        assert tr.gaps is not None
        v, w = tr.gaps.kept(0)
        gap_v.append(v)
        gap_w.append(w)
    t = np.concatenate(ttft)
    v, w = np.concatenate(gap_v), np.concatenate(gap_w)
    return {"ttft_p50_ms": float(np.quantile(t, 0.5)), "ttft_p90_ms": float(np.quantile(t, 0.9)),
            "itl_p50_ms": weighted_quantiles(v, w)[0.5], "itl_mean_ms": weighted_mean(v, w),
            "output_tok_s": sum(shares) * svc.output_tokens / max(span_s, 1e-9)}


def sweep(svc: ServiceModel, rates_per_s: Sequence[float], *, n_requests: int = 600,
          seed: int = 0, slo_ttft_ms: float = math.inf, slo_tpot_ms: float = math.inf
          ) -> list[QueueResult]:
    """`simulate` at each arrival rate (same seed), for TTFT-vs-load curves."""
    return [simulate(svc, rate_per_s=r, n_requests=n_requests, seed=seed,
                     slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms) for r in rates_per_s]


# ---------------------------------------------------------------------------------------------
# Per-request workloads (issue 12): lengths, bursts and prefix hits drawn from a Traffic


@dataclass(frozen=True, kw_only=True)
class TrafficService:
    """One replica for per-request workloads: slots (F3 at the scenario's context, capped by
    max_num_seqs), decode-step times over batch x context (F4 on a context grid, interpolated
    linearly in context), and the scenario, whose `cached_prefill_s` gives each prompt's prefill
    (F6 minus its cached prefix)."""

    scenario: Scenario
    slots: int
    context_grid_tokens: FloatArray
    step_grid_ms: FloatArray
    """Decode step (ms), shape (slots + 1, grid): row = batch size, column = mean context."""

    def step_ms(self, batch: int, mean_context_tokens: float) -> float:
        """F4 step time (ms) of `batch` sequences at this mean context (linear interpolation)."""
        return float(np.interp(mean_context_tokens, self.context_grid_tokens,
                               self.step_grid_ms[batch]))

    def prefill_ms(self, prompt_tokens: npt.ArrayLike, cached_tokens: npt.ArrayLike
                   ) -> FloatArray:
        """Prefill (ms) of each prompt with its cached prefix skipped (`model.prefix`)."""
        return np.asarray(cached_prefill_s(self.scenario, prompt_tokens, cached_tokens) * 1e3,
                          dtype=np.float64)


def traffic_service(s: Scenario, *, max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
                    max_context_tokens: float | None = None, grid_points: int = 48,
                    slots: int | None = None) -> TrafficService:
    """A TrafficService for one replica of `s` (the same physics as `capacity.sim`'s engine).
    The context grid spans 16 tokens to `max_context_tokens` (default: the scenario's context).
    `slots` (default: F3's C_vram capped by `max_num_seqs`) sets the requests decoded together,
    e.g. the planner's slots with a shared prefix held once."""
    if max_num_seqs < 1:
        raise InputError(f"max_num_seqs must be >= 1, got {max_num_seqs}")
    one = evaluate(s, [s.replicas])
    if slots is None:
        slots = min(int(one.max_concurrency_vram) // s.replicas, max_num_seqs)
    if slots < 1:
        raise InputError(f"{s.variant.key} on {s.gpu.name} (TP={s.tp}) holds no request of "
                         f"{s.context_tokens} tokens: use more or bigger GPUs, a shorter "
                         "context or FP8 KV")
    top = float(max_context_tokens or s.context_tokens)
    grid = np.unique(np.geomspace(16.0, max(top, 32.0), grid_points).round())
    b = np.arange(0, slots + 1, dtype=np.float64)
    ev = evaluate(s, (b * s.replicas)[:, None], grid[None, :])
    return TrafficService(scenario=s, slots=slots, context_grid_tokens=grid,
                          step_grid_ms=np.asarray(ev.decode.step_ms, dtype=np.float64))


def previous_turns(conversation_ids: IntArray) -> IntArray:
    """Index of each request's previous turn in its conversation (-1: none, or not a turn)."""
    conv = np.asarray(conversation_ids, dtype=np.int64)
    prev = np.full(conv.size, -1, dtype=np.int64)
    last: dict[int, int] = {}
    for i, c in enumerate(conv.tolist()):
        if c >= 0:
            prev[i] = last.get(c, -1)
            last[c] = i
    return prev


def _run_traffic(svc: TrafficService, arrival: FloatArray, prompt: IntArray, output: IntArray,
                 prefill: FloatArray, prev: IntArray | None = None,
                 prefill_miss: FloatArray | None = None) -> tuple[_Trace, FloatArray]:
    """The event loop for per-request lengths (prefill-first, batched prefill, no chunking: the
    simulated engine's scheduler). A decode step runs at the batch's mean context (prompt +
    tokens so far); k steps in a row are taken at once at their middle context.

    Conversations (`prev`: each request's previous turn, -1 none): a turn's history is cached
    only once its previous turn has finished (as the simulated engine's prefix cache does); a
    turn admitted before that is prefilled whole (`prefill_miss`). Returns the trace and the
    prefill (ms) each request had."""
    n = arrival.size
    used = prefill.copy()
    admit = np.full(n, np.nan)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    waiting: deque[int] = deque()
    running: list[int] = []
    remaining: list[int] = []
    ctx_sum = 0.0                       # sum over running of prompt + tokens emitted
    now = 0.0
    nxt = 0
    while True:
        while nxt < n and arrival[nxt] <= now:
            waiting.append(nxt)
            nxt += 1
        admitted: list[int] = []
        while waiting and len(running) + len(admitted) < svc.slots:
            i = waiting.popleft()
            admit[i] = now
            admitted.append(i)
            if prev is not None and prefill_miss is not None and prev[i] >= 0 \
                    and not finish[prev[i]] <= now:
                used[i] = prefill_miss[i]   # its previous turn is still running: no history
        if admitted:
            now += float(np.sum(used[admitted]))
            for i in admitted:
                first[i] = now
                if output[i] > 1:
                    running.append(i)
                    remaining.append(int(output[i]) - 1)
                    ctx_sum += float(prompt[i]) + 1.0
                else:
                    finish[i] = now
            continue
        if not running:
            if nxt >= n:
                break
            now = max(now, float(arrival[nxt]))
            continue
        b = len(running)
        k = min(remaining)
        s1 = svc.step_ms(b, ctx_sum / b)
        if nxt < n and b < svc.slots:
            gap = float(arrival[nxt]) - now
            k = max(1, min(k, math.ceil(gap / s1) if gap > 0 else 1))
        dt = k * svc.step_ms(b, ctx_sum / b + (k - 1) / 2.0) if k > 1 else s1
        now += dt
        ctx_sum += k * b
        keep_r: list[int] = []
        keep_m: list[int] = []
        for i, r in zip(running, remaining, strict=True):
            if r - k <= 0:
                finish[i] = now
                ctx_sum -= float(prompt[i]) + float(output[i])
            else:
                keep_r.append(i)
                keep_m.append(r - k)
        running, remaining = keep_r, keep_m
    return _Trace(arrival_ms=arrival, admit_ms=admit, first_ms=first, finish_ms=finish), used


@dataclass(frozen=True, kw_only=True)
class TrafficResult:
    """What the event model measured for a per-request workload (after warm-up), in ms."""

    requests: int
    rate_per_s: float
    ttft_ms: dict[float, float]
    tpot_ms: dict[float, float]
    queue_ms: dict[float, float]
    e2e_ms: dict[float, float]
    mean_prefill_ms: float
    throughput_req_s: float
    output_tok_s: float
    slo_met_share: float
    slots: int
    mean_queue_ms: float = math.nan
    mean_ttft_ms: float = math.nan
    goodput_req_s: float = math.nan
    """Counted requests meeting both SLOs per second of the counted span."""
    mean_running: float = math.nan
    """Mean requests in the replica (Little's law: total time in system / span)."""


def simulate_traffic(svc: TrafficService, sample: TrafficSample, *,
                     prefix_cache: bool = True, slo_ttft_ms: float = math.inf,
                     slo_tpot_ms: float = math.inf, warmup_fraction: float = 0.1
                     ) -> TrafficResult:
    """The discrete-event model of one replica on a per-request workload (`Traffic.sample`):
    each request's own arrival, prompt, output and cached prefix (skipped in prefill when
    `prefix_cache`; a conversation turn's history only once its previous turn has finished,
    as the simulated engine's cache). TPOT is (last token - first token) / (output - 1) per
    request with more than one output token. Deterministic: the sample carries the randomness."""
    if sample.size < 10:
        raise InputError(f"simulate at least 10 requests, got {sample.size}")
    if not 0 <= warmup_fraction < 0.9:
        raise InputError("warm-up fraction must be in [0, 0.9)")
    arrival = sample.arrival_ms - sample.arrival_ms[0]
    cached = sample.cached_tokens if prefix_cache else np.zeros_like(sample.cached_tokens)
    prefill = svc.prefill_ms(sample.prompt_tokens, cached)
    prev = previous_turns(sample.conversation_ids)
    miss = (svc.prefill_ms(sample.prompt_tokens, np.zeros_like(cached))
            if prefix_cache and np.any(prev >= 0) else None)
    tr, prefill = _run_traffic(svc, arrival, sample.prompt_tokens, sample.output_tokens,
                               prefill, prev, miss)
    skip = int(sample.size * warmup_fraction)
    sl = slice(skip, None)
    arr, adm, fst, fin = tr.arrival_ms[sl], tr.admit_ms[sl], tr.first_ms[sl], tr.finish_ms[sl]
    out = sample.output_tokens[sl]
    ttft = fst - arr
    multi = out > 1
    tpot = (fin[multi] - fst[multi]) / (out[multi] - 1)
    span_s = max((float(np.max(fin)) - float(np.min(arr))) / 1e3, 1e-9)
    tpot_all = np.where(multi, (fin - fst) / np.maximum(out - 1, 1), 0.0)
    ok = (ttft <= slo_ttft_ms) & (tpot_all <= slo_tpot_ms)
    total_span = float(arrival[-1]) / 1e3
    return TrafficResult(
        requests=int(arr.size),
        rate_per_s=(sample.size - 1) / total_span if total_span > 0 else math.inf,
        ttft_ms=_quantiles(ttft), tpot_ms=_quantiles(tpot), queue_ms=_quantiles(adm - arr),
        e2e_ms=_quantiles(fin - arr), mean_prefill_ms=float(np.mean(prefill)),
        throughput_req_s=arr.size / span_s, output_tok_s=float(np.sum(out)) / span_s,
        slo_met_share=float(np.mean(ok)), slots=svc.slots,
        mean_queue_ms=float(np.mean(adm - arr)), mean_ttft_ms=float(np.mean(ttft)),
        goodput_req_s=float(np.sum(ok)) / span_s,
        mean_running=float(np.sum(fin - arr)) / 1e3 / span_s)


def traffic_moments(s: Scenario, sample: TrafficSample, *, prefix_cache: bool = True
                    ) -> tuple[float, float, float]:
    """(mean prefill ms, mean output tokens, mean decode context tokens) of a per-request
    workload: what the analytic path takes in place of one prompt and one output length.
    The mean decode context weighs each request's mean context (prompt + output / 2) by its
    output tokens (the steps it spends in the batch)."""
    cached = sample.cached_tokens if prefix_cache else np.zeros_like(sample.cached_tokens)
    pre = cached_prefill_s(s, sample.prompt_tokens, cached) * 1e3
    out = sample.output_tokens.astype(np.float64)
    ctx = float(np.sum((sample.prompt_tokens + out / 2.0) * out) / np.sum(out))
    return float(np.mean(pre)), float(np.mean(out)), ctx


def gamma_delay_probability(rho: float, arrival_cv: float) -> float:
    """Probability that an arrival waits, for gamma inter-arrival times of this CV (GI/M/1):
    sigma solves sigma = (1 + (1 - sigma) / (k rho))^-k, k = 1 / CV^2 (the Laplace transform of
    the gamma inter-arrival at mu (1 - sigma)). Poisson (CV 1) gives sigma = rho; bursts raise it.
    Source: Kleinrock, Queueing Systems vol. 1 (1975), section 6.4 (G/M/m), docs/method.md
    "Workloads". rho 0.2, CV 2 -> 0.57."""
    if not 0 <= rho < 1:
        return 1.0 if rho >= 1 else 0.0
    if rho == 0:
        return 0.0
    k = 1.0 / (arrival_cv * arrival_cv)
    sig = rho
    for _ in range(500):
        nxt = (1.0 + (1.0 - sig) / (k * rho)) ** (-k)
        if abs(nxt - sig) < 1e-12:
            break
        sig = nxt
    return float(sig)


@dataclass(frozen=True, kw_only=True)
class TrafficEstimate:
    """The analytic fast path's percentiles for a per-request workload (ms)."""

    ttft_ms: dict[float, float]
    tpot_ms: dict[float, float]
    prefill_share: float
    delay_probability: float
    step_ms: float
    saturated: bool


def analytic_traffic(s: Scenario, sample: TrafficSample, *, arrival_cv: float = 1.0,
                     prefix_cache: bool = True, seed: int = 0) -> TrafficEstimate:
    """TTFT and TPOT percentiles of one replica on a per-request workload, without the event
    loop (docs/method.md, "Workloads"):

    - the batch step s and prefill share rho = lambda E[t] come from `analytic_latency` at the
      workload's moments (`traffic_moments`);
    - TTFT_i = t_i + f (U s + W_i): the request's own prefill (its cached prefix skipped), the
      batching factor f = (1 + 2 rho) / (1 + rho) (`analytic_latency`'s: prompts that arrive
      while one waits join its batch), a uniform residual step, and W_i the prefill backlog it
      finds, by Lindley's recursion over the sample's own arrivals and prefills (so bursts queue
      as they do on the engine; an earlier version drew W_i from the GI/M/1 delay probability
      and was 8-24 % low at CV 2). `arrival_cv` only sets the reported `delay_probability`
      (`gamma_delay_probability`);
    - TPOT_i = (n_i s(b_i) + P_i) / n_i over its n_i = output - 1 decode steps, where P_i is the
      prefill of every request whose prefill starts (its first token less its own prefill) after
      i's first token and before its last (so bursts, and the queue they leave, count) and b_i
      the requests decoding beside it at mid-decode: a fluid model, iterated to its smallest
      fixed point (at most 50 rounds; an earlier version counted the prefills of arrivals in
      four rounds and was 15-37 % low at CV 2).
    Random draws (U, the waits) use `seed`: deterministic.
    """
    pre, out_mean, ctx = traffic_moments(s, sample, prefix_cache=prefix_cache)
    kv = kv_request_bytes(s.model, ctx, s.kv_dtype, s.tp, s.block_size).exact_bytes
    step = decode_model(s, kv)
    arr = sample.arrival_ms - sample.arrival_ms[0]
    n = sample.size
    rate = (n - 1) / float(arr[-1]) * 1e3 if arr[-1] > 0 else math.inf
    base = analytic_latency(rate_per_s=rate, step=step, prefill_ms=pre,
                            output_tokens=max(1, round(out_mean)))
    cached = sample.cached_tokens if prefix_cache else np.zeros_like(sample.cached_tokens)
    t = cached_prefill_s(s, sample.prompt_tokens, cached) * 1e3
    rho = rate / 1e3 * float(np.mean(t))
    nan = {q: math.inf for q in QUANTILES}
    if bool(base.saturated) or rho >= 1:
        return TrafficEstimate(ttft_ms=nan, tpot_ms=nan, prefill_share=rho,
                               delay_probability=1.0, step_ms=float(base.step_ms), saturated=True)
    s_ms = float(base.step_ms)
    sig = gamma_delay_probability(rho, arrival_cv)
    f = (1.0 + 2.0 * rho) / (1.0 + rho)
    rng = np.random.default_rng(seed)
    # the prefill backlog each request finds, from the sample's own arrivals (Lindley's
    # recursion W_i = max(0, W_(i-1) + t_(i-1) - gap_i) as a running minimum): bursts queue
    # behind each other as they do on the engine, Poisson or not
    gaps = np.diff(arr, prepend=arr[0])
    walk = np.cumsum(np.concatenate([[0.0], t[:-1]]) - gaps)
    wait = walk - np.minimum.accumulate(np.minimum(walk, 0.0))
    ttft = t + f * (rng.random(n) * s_ms + wait)
    out = sample.output_tokens
    steps = np.maximum(out - 1, 1).astype(np.float64)
    first = arr + ttft
    dur = steps * s_ms
    # the prefills that stall a request's decoding: those that start (first token - own
    # prefill) after its first token and before its last, in the sample's order of starts;
    # iterated to the smallest fixed point (longer decodes take in more prefills)
    order = np.argsort(first - t, kind="stable")
    begins = (first - t)[order]
    cs = np.concatenate([[0.0], np.cumsum(t[order])])
    for _ in range(50):
        starts, ends = np.sort(first), np.sort(first + dur)
        mid = first + dur / 2.0
        batch = np.searchsorted(starts, mid, side="right") - np.searchsorted(ends, mid, side="right")
        lo = np.searchsorted(begins, first, side="right")
        hi = np.maximum(np.searchsorted(begins, first + dur, side="left"), lo)
        new = steps * step.step_ms(np.maximum(batch, 1)) + (cs[hi] - cs[lo])
        done = bool(np.max(np.abs(new - dur)) < 1e-3)
        dur = new
        if done:
            break
    multi = out > 1
    return TrafficEstimate(ttft_ms=_quantiles(ttft), tpot_ms=_quantiles((dur / steps)[multi]),
                           prefill_share=rho, delay_probability=sig, step_ms=s_ms,
                           saturated=False)


def simulate_prefix(svc: TrafficService, *, rate_per_s: float, prompt_tokens: int,
                    output_tokens: int, prefix_tokens: int, prefix_share: float,
                    n_requests: int = 2000, seed: int = 0, slo_ttft_ms: float = math.inf,
                    slo_tpot_ms: float = math.inf) -> QueueResult:
    """`simulate` (Poisson arrivals at `rate_per_s`, one prompt and output length: the same
    seeded arrivals) with a shared prefix: `prefix_share` of requests find the first
    `prefix_tokens` of their prompt cached and prefill the rest (F6 of the rest, `model.prefix`),
    the others prefill the whole prompt; per request, through the per-request event model
    (`simulate_traffic`: whole prompts prefilled in batches). The planner's `simulate_option`
    uses it when prefix caching is planned. Returns the `simulate` summary."""
    if not (math.isfinite(rate_per_s) and rate_per_s > 0):
        raise InputError(f"arrival rate must be > 0 requests/s, got {rate_per_s}")
    if prompt_tokens < 1 or output_tokens < 1:
        raise InputError("prompt and output must be >= 1 token")
    if not 10 <= n_requests <= 1_000_000:
        raise InputError(f"simulate 10..1,000,000 requests, got {n_requests}")
    hit = max(0, min(prefix_tokens, prompt_tokens - 1))
    traffic = Traffic(prompt=LengthDist.fixed(prompt_tokens - hit),
                      output=LengthDist.fixed(output_tokens),
                      arrivals=Arrivals(kind="poisson", rate_per_s=rate_per_s),
                      prefix_tokens=hit, prefix_share=prefix_share if hit else 0.0)
    res = simulate_traffic(svc, traffic.sample(n_requests, seed), slo_ttft_ms=slo_ttft_ms,
                           slo_tpot_ms=slo_tpot_ms)
    b = svc.slots
    full_ms = svc.step_ms(b, prompt_tokens + output_tokens / 2.0)
    sat = 1e3 / (res.mean_prefill_ms + (output_tokens - 1) * full_ms / b)
    return QueueResult(
        requests=res.requests, rate_per_s=rate_per_s, concurrency=None, ttft_ms=res.ttft_ms,
        tpot_ms=res.tpot_ms, queue_ms=res.queue_ms, e2e_ms=res.e2e_ms,
        mean_queue_ms=res.mean_queue_ms, mean_ttft_ms=res.mean_ttft_ms,
        throughput_req_s=res.throughput_req_s, output_tok_s=res.output_tok_s,
        goodput_req_s=res.goodput_req_s, slo_met_share=res.slo_met_share,
        mean_running=res.mean_running, saturation_rate_per_s=sat,
        saturated=rate_per_s >= sat, slots=b)
