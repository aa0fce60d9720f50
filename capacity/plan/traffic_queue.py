"""Queueing for per-request workloads (docs/method.md, "Per-request workloads"): lengths,
bursts and prefix-cache hits drawn from a `Traffic` (capacity.model.traffic), through the
discrete-event model (`simulate_traffic`) and in closed form
(`analytic_traffic`: Kingman's G/G/1 delay with the arrivals' coefficient of variation).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capacity.errors import InputError
from capacity.model.kv import kv_request_bytes
from capacity.model.prefix import cached_prefill_s
from capacity.model.roofline import StepModel as StepModel  # re-exported: the one F4 step
from capacity.model.scenario import Scenario, decode_model, evaluate
from capacity.model.traffic import TrafficSample
from capacity.plan.events import Trace, quantiles
from capacity.plan.queueing import DEFAULT_MAX_NUM_SEQS, QUANTILES, analytic_latency
from capacity.stats import gamma_quantile as gamma_quantile  # re-exported: the F-queue quantile
from capacity.types import FloatArray, IntArray

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
    s = s.with_(held_tokens=None)   # the grid's contexts are the tokens each sequence holds
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
                 prefill_miss: FloatArray | None = None) -> tuple[Trace, FloatArray]:
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
    return Trace(arrival_ms=arrival, admit_ms=admit, first_ms=first, finish_ms=finish), used


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
    lat = svc.scenario.request_latency_ms  # outside the GPU: shifts every request alike
    ttft = fst - arr + lat
    multi = out > 1
    tpot = (fin[multi] - fst[multi]) / (out[multi] - 1)
    span_s = max((float(np.max(fin)) - float(np.min(arr))) / 1e3, 1e-9)
    tpot_all = np.where(multi, (fin - fst) / np.maximum(out - 1, 1), 0.0)
    ok = (ttft <= slo_ttft_ms) & (tpot_all <= slo_tpot_ms)
    total_span = float(arrival[-1]) / 1e3
    return TrafficResult(
        requests=int(arr.size),
        rate_per_s=(sample.size - 1) / total_span if total_span > 0 else math.inf,
        ttft_ms=quantiles(ttft), tpot_ms=quantiles(tpot), queue_ms=quantiles(adm - arr),
        e2e_ms=quantiles(fin - arr + lat), mean_prefill_ms=float(np.mean(prefill)),
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
    return TrafficEstimate(ttft_ms=quantiles(ttft + s.request_latency_ms),
                           tpot_ms=quantiles((dur / steps)[multi]),
                           prefill_share=rho, delay_probability=sig, step_ms=s_ms,
                           saturated=False)
