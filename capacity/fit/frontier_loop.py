"""The closed loop's steady state of one replica (docs/frontier.md, "The closed loop in closed
form"): C users, each sending its next request when the last one ends, derived in closed form
from the same step and prefill terms the event model uses. The buyer's chart
(`capacity.fit.frontier`) draws every aggregated and wide-EP point from it; the tests hold it to
`events.simulate(concurrency=C)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from capacity.errors import InputError
from capacity.model.roofline import StepModel
from capacity.plan.queueing import mixed_step_extra_ms
from capacity.types import FloatArray

if TYPE_CHECKING:  # the event model loads only for the tests' comparisons
    from capacity.plan.events import ServiceModel

StepTerms = Callable[[FloatArray], tuple[FloatArray, FloatArray, FloatArray]]
"""A replica's decode step at a (fractional) batch b: (bandwidth_ms, compute_ms, step_ms), the
terms `mixed_step_time_ms` combines (`StepParts`)."""


def step_model_terms(step: StepModel) -> StepTerms:
    """The planner's step (`StepModel.parts`, arrays of configurations) as StepTerms."""
    def terms(b: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        p = step.parts(b)
        return p.bandwidth_ms, p.compute_ms, p.step_ms
    return terms


def service_terms(svc: ServiceModel) -> StepTerms:
    """The event model's step of one replica (`ServiceModel`'s arrays over batches 0..slots,
    `ServiceModel.step_ms`) as StepTerms, linear between whole batches."""
    grid = np.arange(svc.slots + 1, dtype=np.float64)
    arrays = (svc.bandwidth_ms, svc.compute_ms, svc.step_ms)

    def terms(b: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        bw, cp, st = (np.asarray(np.interp(b, grid, a), dtype=np.float64) for a in arrays)
        return bw, cp, st
    return terms


chunk_extra_ms = mixed_step_extra_ms
"""What prompt chunks add to a step (ms): the Planner's closed form's own computation
(`capacity.plan.queueing.mixed_step_extra_ms`); tests/test_frontier.py holds it to
`mixed_step_time_ms` element by element."""


@dataclass(frozen=True, kw_only=True)
class SteadyState:
    """One replica under a closed loop of C users with no think time, in steady state (arrays
    over configurations). Units: ms, requests, tok/s."""

    concurrency: FloatArray
    cycle_ms: FloatArray
    """T: one request's time in the server (E2E), the time between a user's requests."""
    ttft_ms: FloatArray
    tpot_ms: FloatArray
    """Mean time per output token after the first: (T - TTFT) / (n - 1)."""
    output_tok_s: FloatArray
    """Output tokens per second of the replica: C n / T."""
    prefill_share: FloatArray
    """Share of the replica's time that prefill adds (the prefill batches, or what prompt
    chunks add to the mixed steps): the input tokens' share of the GPU-hour."""
    decode_batch: FloatArray
    """Mean sequences a decode step carries."""

    @property
    def interactivity_tok_s_per_user(self) -> FloatArray:
        """1000 / TPOT: output tokens per second one user sees while decoding."""
        return np.asarray(1e3 / self.tpot_ms, dtype=np.float64)


CommAt = Callable[[FloatArray], FloatArray]
"""F10's all-reduces (ms) of one forward pass against its tokens (`StepModel.comm_at_tokens`,
`parallel.CommLine.at`)."""


def _no_comm(tokens: FloatArray) -> FloatArray:
    return np.zeros_like(np.asarray(tokens, dtype=np.float64))


LATENCY_ROUNDS: Final = 4
"""Rounds of `closed_loop`'s fixed point for a request latency outside the GPU (the share of
the clients' requests inside the server moves the server's cycle, which moves the share):
four take it within 0.1% at 40 ms (tests/test_frontier.py)."""


def closed_loop(*, concurrency: npt.ArrayLike, terms: StepTerms, prefill_ms: npt.ArrayLike,
                prompt_tokens: npt.ArrayLike, output_tokens: int, budget_tokens: npt.ArrayLike,
                mixed: npt.ArrayLike, comm_at: CommAt = _no_comm,
                decode_tokens_per_seq: npt.ArrayLike = 1.0,
                ahead: npt.ArrayLike = False,
                request_latency_ms: npt.ArrayLike = 0.0) -> SteadyState:
    """`server_loop` with each request's time outside the GPU (`request_latency_ms`, ms; the
    basis' `Scenario.request_latency_ms`, which the event model charges as a request reaching
    the engine that long after it is sent): a client's cycle is that latency plus the
    server's time T_s, so of the C clients' requests C_s = C T_s / (T_s + latency) are in the
    server on average (Little's law), the server runs `server_loop` at C_s (a fixed point,
    `LATENCY_ROUNDS` rounds from C), and TTFT and E2E carry the latency: TTFT = latency +
    TTFT_s, cycle = latency + T_s, throughput C n / cycle; TPOT, the decode batch and the
    prefill share are the server's. Without a latency, `server_loop` at C. Example: one
    client, a 50 ms TTFT and 1,000 ms in the server, 8 ms outside: TTFT 58 ms, a cycle of
    1,008 ms. Until 2026-12-07 the buyer's chart left the latency out (an audit found its
    TTFT 7.8 ms below the event model's at one client on `typical:vllm`)."""
    def at(inside: FloatArray) -> SteadyState:
        return server_loop(concurrency=inside, terms=terms, prefill_ms=prefill_ms,
                           prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                           budget_tokens=budget_tokens, mixed=mixed, comm_at=comm_at,
                           decode_tokens_per_seq=decode_tokens_per_seq, ahead=ahead)

    c = np.asarray(concurrency, dtype=np.float64)
    lat = np.broadcast_to(np.asarray(request_latency_ms, dtype=np.float64), c.shape)
    ss = at(c)
    if not np.any(lat > 0):
        return ss
    for _ in range(LATENCY_ROUNDS):
        ss = at(np.where(lat > 0, np.maximum(c * ss.cycle_ms / (ss.cycle_ms + lat), 1.0), c))
    cycle = ss.cycle_ms + lat
    return SteadyState(concurrency=c, cycle_ms=np.asarray(cycle, dtype=np.float64),
                       ttft_ms=np.asarray(ss.ttft_ms + lat, dtype=np.float64),
                       tpot_ms=ss.tpot_ms,
                       output_tok_s=np.asarray(c * output_tokens / cycle * 1e3,
                                               dtype=np.float64),
                       prefill_share=ss.prefill_share, decode_batch=ss.decode_batch)


def server_loop(*, concurrency: npt.ArrayLike, terms: StepTerms, prefill_ms: npt.ArrayLike,
                prompt_tokens: npt.ArrayLike, output_tokens: int, budget_tokens: npt.ArrayLike,
                mixed: npt.ArrayLike, comm_at: CommAt = _no_comm,
                decode_tokens_per_seq: npt.ArrayLike = 1.0,
                ahead: npt.ArrayLike = False) -> SteadyState:
    """The event model's closed loop (`events.simulate(concurrency=C)`, clients out of step),
    per replica, in closed form (docs/frontier.md). C users each send a request of P prompt and
    n output tokens when the last one ends; C <= the slots, so none waits for a slot, and
    requests arrive at step ends, where they are admitted at once.

    Prefill pauses decoding (whole prompts, B = 0: the chapter's profile; or prefill batches
    of at most B tokens, not mixed: SGLang): a prompt costs
    p = t (whole) or m (s(0) + extra(t / m)) with m = ceil(P / B) batches at the weight read of
    batch 0, and every decode step carries all C sequences, so per cycle
    T = C p + (n - 1) s(C), TTFT = p, TPOT = s(C) + (C - 1) p / (n - 1).

    Mixed chunked prefill (budget B, vLLM, llama.cpp): a step carries the b decoding sequences
    and up to B - b prompt tokens. A user's cycle is K steps: m = ceil(P / (B - C + 1)) with its
    chunks, n - 1 decoding, and any spent waiting behind other prompts, so
    K = max(m + n - 1, C (P + n - 1) / B) (the second when every step is full of tokens);
    b = C (n - 1) / K; N = min(K, C m) steps carry chunks of x = C t / N each (F6 split evenly),
    each adding extra(x) = `chunk_extra_ms`; T = K s(b) + N extra(x),
    TTFT = (K - n + 1)(s(b) + extra(x)), TPOT = (T - TTFT) / (n - 1).

    Paused, on an engine that schedules one step ahead (`ahead`, SGLang since 0.4.0:
    `ServiceModel.schedule_ahead`): with C >= 2 a request that ends finds the next step fixed
    without it and waits it (w = 1, else 0), a decode step of the others, so a cycle holds
    K = n - 1 + w decode steps of b = C (n - 1) / K sequences: T = C p + K s(b). Clients out
    of step end every K / C decode steps; a request that ends one step after another waits
    through that one's prefill instead, and the two then decode in lock step (decoding pauses
    for both prefills) and come back together ever after: out of x = min(1, max(0, 2 - K / C))
    one-step gaps, a share f = min(1, 2 x) of the requests run as pairs, each pair prefilled
    as one batch; where C > K the requests that end at one step already come g = C / K at
    once, and pair up as groups: a request's group holds G = (1 + f) max(1, C / K) prompts.
    Each prompt of a group adds e p to the first token of the mean request: e = 1 where the
    group's prompts all end in its last pass (whole prompts, or 2 P <= B), else the first
    prompt ends ceil(P / B) B / P of p into the batch (at most 2) and e = (that + 2) / 2 - 1;
    TTFT = w (s(b) + (G - 1) e p) + p. Held to the event model within 1 % where x <= 0.5
    (C <= 2 K / 3) and 2 P <= B; chains of three or more (x > 0.5), C > K and prompts longer
    than half the budget within 15 % (docs/frontier.md: the lock step forms as the loop runs,
    which the count of gaps follows only on average).

    Mixed, on an engine that schedules one step ahead (`ahead`, vLLM since 0.14.0:
    `ServiceModel.schedule_ahead`): the next step's batch is fixed when a request ends, so
    with C >= 2 (the engine never idle) each request first waits one step (w = 1, else 0):
    K = max(m + n - 1 + w, C (P + n - 1) / B), and TTFT = (K - n + 1 - w)(s(b) + extra(x)) +
    w (s(b) + f extra(x)), the step waited through carrying the chunks of the requests that
    ended one step earlier: out of step, requests end every K / C steps, one step apart for a
    share f = min(1, max(0, 2 - K / C)) of them.

    Throughput C n / T; prefill share C p / T (paused) or N extra(x) / T (mixed). t: F6 prefill
    of one prompt (ms), s(b): `terms`. With TP (`comm_at`, F10 against a pass's tokens; none
    by default) a pass all-reduces its decode and prompt tokens at once: each chunk's share
    of the prompt's all-reduces (F6's F10 at P, split like t) leaves its arithmetic and the
    pass pays F10 at b x `decode_tokens_per_seq` + its prompt tokens. Source: Little's law
    over one cycle (T = C / lambda) and the event model's scheduling (docs/method.md,
    Queueing, Engine profiles)."""
    c = np.asarray(concurrency, dtype=np.float64)
    t = np.broadcast_to(np.asarray(prefill_ms, dtype=np.float64), c.shape)
    big_b = np.broadcast_to(np.asarray(budget_tokens, dtype=np.float64), c.shape)
    mix = np.broadcast_to(np.asarray(mixed, dtype=bool), c.shape) & (big_b > 0)
    p_tok = np.broadcast_to(np.asarray(prompt_tokens, dtype=np.float64), c.shape)
    dec = float(output_tokens - 1)
    if dec < 1:
        raise InputError("a closed loop's TPOT needs output >= 2 tokens")
    # prefill pauses decoding
    v = np.asarray(decode_tokens_per_seq, dtype=np.float64)
    comm_p = np.minimum(comm_at(p_tok), t)   # F6's all-reduces of a prompt

    def added(batch: FloatArray, tokens: FloatArray) -> FloatArray:
        return np.asarray(comm_at(batch * v + tokens) - comm_at(batch * v), dtype=np.float64)

    m0 = np.where(big_b > 0, np.ceil(p_tok / np.maximum(big_b, 1.0)), 1.0)
    zero = np.zeros_like(c)
    bw0, cp0, s0 = terms(zero)
    pt = np.where(big_b > 0, m0 * (s0 + chunk_extra_ms(bw0, cp0, t / m0, comm_p / m0,
                                                       added(zero, p_tok / m0))), t)
    # a step scheduled ahead: each request waits one step first where others keep it busy
    on = np.broadcast_to(np.asarray(ahead, dtype=bool), c.shape) & (c >= 2)
    w = np.where(on & mix, 1.0, 0.0)
    # paused: the step waited through is a decode step of the others (K_p = n - 1 + w_p of
    # them a cycle); requests one step apart pair up, each pair prefilled as one batch
    w_p = np.where(on & ~mix, 1.0, 0.0)
    k_p = dec + w_p
    b_p = c * dec / k_p
    _, _, s_p = terms(b_p)
    cycle_p = c * pt + k_p * s_p
    group = (1.0 + np.minimum(1.0, 2.0 * np.clip(2.0 - k_p / c, 0.0, 1.0))) * np.maximum(
        1.0, c / k_p)
    first = np.where(big_b > 0, np.minimum(
        2.0, np.ceil(p_tok / np.maximum(big_b, 1.0)) * big_b / p_tok), 2.0)
    ttft_p = w_p * (s_p + (group - 1.0) * ((first + 2.0) / 2.0 - 1.0) * pt) + pt
    # mixed chunked prefill
    per_step = np.maximum(big_b - (c - 1.0), 1.0)
    m = np.ceil(p_tok / per_step)
    k = np.maximum(m + dec + w, c * (p_tok + dec) / np.maximum(big_b, 1.0))
    b = c * dec / k
    n_chunk = np.minimum(k, c * m)
    bw, cp, s = terms(np.where(mix, b, c))
    extra = chunk_extra_ms(bw, cp, c * t / n_chunk, c * comm_p / n_chunk,
                           added(np.where(mix, b, c), c * p_tok / n_chunk))
    cycle_m = k * s + n_chunk * extra
    cycle = np.where(mix, cycle_m, cycle_p)
    # the step waited through carries the chunks of the requests that ended one step
    # earlier: clients out of step end every k / C steps, so one step apart for a share
    # 2 - k / C of them (none when k / C >= 2, all when < 1)
    before = np.clip(2.0 - k / c, 0.0, 1.0)
    ttft = np.where(mix, (k - dec - w) * (s + extra) + w * (s + before * extra), ttft_p)
    share = np.where(mix, n_chunk * extra, c * pt) / cycle
    return SteadyState(concurrency=c, cycle_ms=np.asarray(cycle, dtype=np.float64),
                       ttft_ms=np.asarray(ttft, dtype=np.float64),
                       tpot_ms=np.asarray((cycle - ttft) / dec, dtype=np.float64),
                       output_tok_s=np.asarray(c * output_tokens / cycle * 1e3, dtype=np.float64),
                       prefill_share=np.asarray(share, dtype=np.float64),
                       decode_batch=np.asarray(np.where(mix, b, b_p), dtype=np.float64))


def deployment_point(svc: ServiceModel, *, concurrency: int, replicas: int,
                     paid_gpus: int) -> tuple[float, float]:
    """(tok/s per user, output tok/s per GPU paid) of a deployment of `replicas` replicas of
    `svc` serving `concurrency` users in all in the steady closed loop the buyer's chart draws
    (`service_steady_state`): ceil(C / replicas) users a replica, at most its slots (the rest
    wait for one), 1000 / the loop's TPOT per user and the replicas' output over the GPUs paid.
    The Explorer marks its what-if with it on that chart, so the mark lies on its own
    configuration's curve (until 2026-12-07 it was the headline's decode step alone: 35 times
    above the RTX 4090's curve for the chapter's 50 requests at 8K, whose prefills the curve
    counts). Example: 50 users on 2 replicas of 64 slots: 25 a replica."""
    if concurrency < 1 or replicas < 1 or paid_gpus < 1:
        raise InputError("a deployment point needs at least one user, replica and GPU")
    per = min(-(-int(concurrency) // int(replicas)), max(int(svc.slots), 1))
    ss = service_steady_state(svc, [float(per)])
    return (float(ss.interactivity_tok_s_per_user[0]),
            float(ss.output_tok_s[0]) * replicas / paid_gpus)


def service_steady_state(svc: ServiceModel, concurrency: npt.ArrayLike) -> SteadyState:
    """`closed_loop` on the event model's own terms of one replica (its step over batches, its
    prefill, budget and mixing): what `events.simulate(svc, concurrency=C)` should show."""
    return closed_loop(concurrency=concurrency, terms=service_terms(svc),
                       prefill_ms=svc.prefill_ms, prompt_tokens=svc.prompt_tokens,
                       output_tokens=svc.output_tokens, budget_tokens=svc.chunk_tokens or 0,
                       mixed=svc.mixed, comm_at=svc.comm_line.at,
                       decode_tokens_per_seq=svc.decode_tokens_per_seq,
                       ahead=svc.schedule_ahead, request_latency_ms=svc.request_latency_ms)
