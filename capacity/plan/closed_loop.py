"""Closed loops in the event model (docs/method.md, "One closed loop, out of step"): C clients
with no think time, each sending again when answered. Three named quantities, each one
computation: the steady state every surface shows and the scorecard scores (`closed_loop`,
clients out of step; for a deployment `closed_loop_load`), its opening burst, the upper edge
of its TTFT (`burst_ttft_ms`), and a bench level as it ran from an idle server
(`closed_loop_as_run`, the realtest's and the Explorer overlay's prediction). All run
`capacity.plan.events.run_trace`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from capacity.errors import InputError
from capacity.model.scenario import Scenario
from capacity.plan.events import (
    MAX_LOAD_REQUESTS,
    QueueResult,
    ServiceModel,
    Trace,
    quantiles,
    run_trace,
    service_from_scenario,
    simulate,
    weighted_mean,
    weighted_quantiles,
)
from capacity.types import FloatArray


@dataclass(frozen=True, kw_only=True)
class LoadPoint:
    """TTFT and TPOT percentiles (ms) at one closed-loop concurrency (deployment total)."""

    concurrency: int
    ttft_ms: dict[float, float]
    tpot_ms: dict[float, float]
    ttft_together_ms: dict[float, float] | None = None
    """TTFT percentiles (ms) of the opening burst (`burst_ttft_ms`), the upper edge of a
    closed loop's TTFT; `ttft_ms` (out of step) is the lower. None: an open loop's point."""


def closed_loop_load(s: Scenario, *, engine: str, output_tokens: int,
                     concurrency: Sequence[int], max_num_seqs: int | None = None,
                     chunk_tokens: int | None = None, block_tokens: int | None = None,
                     offload_gib: float = 0.0, prefix_tokens: int = 0,
                     prefix_share: float = 0.0, turns: int = 1, turn_tokens: int = 0,
                     prefix_caching: bool = False, enforce_eager: bool = False
                     ) -> tuple[ServiceModel, list[LoadPoint]]:
    """TTFT/TPOT under the engine's scheduling at each total concurrency: one replica of `s`
    (`service_from_scenario`, with the engine's `max_num_seqs` and token budget unless given,
    and its other knobs) in the steady closed loop of ceil(C / replicas) users with no think
    time (`closed_loop`), and its opening burst's TTFT (`burst_ttft_ms`)."""
    svc = service_from_scenario(s, output_tokens=output_tokens, engine=engine,
                                max_num_seqs=max_num_seqs, chunk_tokens=chunk_tokens,
                                block_tokens=block_tokens, offload_gib=offload_gib,
                                prefix_tokens=prefix_tokens, prefix_share=prefix_share,
                                turns=turns, turn_tokens=turn_tokens,
                                prefix_caching=prefix_caching, enforce_eager=enforce_eager)
    out = []
    for c in concurrency:
        per = max(1, math.ceil(c / s.replicas))
        q = closed_loop(svc, concurrency=per)
        out.append(LoadPoint(concurrency=int(c), ttft_ms=q.ttft_ms, tpot_ms=q.tpot_ms,
                             ttft_together_ms=burst_ttft_ms(svc, concurrency=per)))
    return svc, out


CLOSED_LOOP_REQUESTS_PER_CLIENT = 12
"""Requests `closed_loop` simulates per client (at least 200, at most MAX_LOAD_REQUESTS or
3 C where that is more). Until 2026-12-06 its throughput was the counted requests' tokens
over their span, first arrival to last finish, which carries a part-cycle at the end (C / (N
+ C) low: 10% at 12 a client; 6 a client moved the scorecard's throughput median on its
original rows 11.4 % -> 15.6 %); it is now the loop's cycle (`events.steady_span_s`)."""
CLOSED_LOOP_WARMUP = 0.2
"""The share of `closed_loop`'s requests left out as warm-up (at least the C phased ones)."""


def closed_loop(svc: ServiceModel, *, concurrency: int, n_requests: int | None = None,
                seed: int = 0, slo_ttft_ms: float = math.inf, slo_tpot_ms: float = math.inf,
                itl: bool = False) -> QueueResult:
    """The steady state of `concurrency` clients with no think time on one replica: the one
    closed loop every surface shows and the scorecard scores (`capacity plan --engine`, the
    Explorer's load view, the frontier's event check, `capacity validate`).
    `simulate(phased=True)`: the clients out of step, as a benchmark's drift apart
    (identical requests started as one burst stay in lock step, and spread in time they fall
    back into it where prompts take most of the GPU); max(200, 12 C) requests (at most
    MAX_LOAD_REQUESTS, at least 3 C), the first 20 % (at least C) and the last C left out;
    throughput the counted requests' over the loop's cycle, C per mean E2E
    (`events.steady_span_s`).
    The upper edge of its TTFT: `burst_ttft_ms`; a bench run as it ran: `closed_loop_as_run`."""
    if concurrency < 1:
        raise InputError(f"closed-loop concurrency must be >= 1, got {concurrency}")
    n = n_requests if n_requests is not None else closed_loop_requests(concurrency)
    if n < 3 * concurrency:
        raise InputError(f"a closed loop of {concurrency} clients needs at least "
                         f"{3 * concurrency} requests, got {n} (the first and the last C are "
                         "left out)")
    warm = max(CLOSED_LOOP_WARMUP, (concurrency + 0.5) / n)
    return simulate(svc, concurrency=concurrency, n_requests=n, seed=seed,
                    slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms, warmup_fraction=warm,
                    itl=itl, phased=True)


def closed_loop_requests(concurrency: int) -> int:
    """Requests `closed_loop` simulates for `concurrency` clients by default: max(200, 12 C),
    at most MAX_LOAD_REQUESTS or 3 C where that is more."""
    return min(max(200, CLOSED_LOOP_REQUESTS_PER_CLIENT * concurrency),
               max(MAX_LOAD_REQUESTS, 3 * concurrency))


def burst_ttft_ms(svc: ServiceModel, *, concurrency: int) -> dict[float, float]:
    """TTFT percentiles (ms) of one round of `concurrency` requests sent at once to an idle
    replica: a bench level's opening burst, every prompt waiting for the ones scheduled
    before it. The upper edge of a closed loop's TTFT, the steady state with the clients out
    of step (`closed_loop`) the lower: the realtest's measured closed-loop TTFT p50 lay
    between them, 5 % either side, at 22 of 22 levels of each of four runs (docs/accuracy.md;
    llama.cpp's burst with its prompts attending across one KV cache). Example: whole
    prompts (the chapter's profile) prefill as one batch, so every one of the C waits for
    all C prompts."""
    if concurrency < 1:
        raise InputError(f"a burst needs >= 1 request, got {concurrency}")
    tr = run_trace(svc, None, concurrency, concurrency)
    return quantiles(tr.first_ms - tr.arrival_ms)


def closed_loop_as_run(svc: ServiceModel, *, concurrency: int, shares: Sequence[int]
                       ) -> dict[str, float]:
    """The event model of a closed-loop level as a bench run measures it: one closed loop of
    `concurrency` clients per pass, from an idle replica, with that pass's share of the
    level's requests (`capacity bench --passes`; one share: one pass), pooled as the bench
    pools them: TTFT p50, p90 and p99 over every request (ms, linear interpolation, as the
    bench's), the token-weighted p50, p90, p99 and mean inter-token gap (ms), output tok/s over the
    sum of the passes' spans. Unlike `simulate`'s steady state, a short pass is mostly its opening
    burst of `concurrency` prompts, which all wait for one another's prefill. No warm-up is
    left out: the bench measures from the first request."""
    if concurrency < 1 or not shares or any(n < 1 for n in shares):
        raise InputError("a closed loop needs >= 1 client and >= 1 request in every pass")
    ttft: list[FloatArray] = []
    gap_v: list[FloatArray] = []
    gap_w: list[FloatArray] = []
    span_s = tokens = 0.0
    for n in shares:
        tr = run_trace(svc, None, concurrency, n, record_gaps=True)
        ttft.append(tr.first_ms - tr.arrival_ms)
        span_s += _run_span_s(tr)
        tokens += float(np.sum(svc.request_outputs(n)))
        assert tr.gaps is not None
        v, w = tr.gaps.kept(0)
        gap_v.append(v)
        gap_w.append(w)
    t = np.concatenate(ttft)
    v, w = np.concatenate(gap_v), np.concatenate(gap_w)
    itl = weighted_quantiles(v, w)
    return {"ttft_p50_ms": float(np.quantile(t, 0.5)), "ttft_p90_ms": float(np.quantile(t, 0.9)),
            "ttft_p99_ms": float(np.quantile(t, 0.99)), "itl_p50_ms": itl[0.5],
            "itl_p90_ms": itl[0.9], "itl_p99_ms": itl[0.99], "itl_mean_ms": weighted_mean(v, w),
            "output_tok_s": tokens / max(span_s, 1e-9)}


def _run_span_s(tr: Trace) -> float:
    """A whole run's duration (s): its first arrival to its last finish."""
    return max((float(np.max(tr.finish_ms)) - float(np.min(tr.arrival_ms))) / 1e3, 1e-9)


def as_run_tok_s(svc: ServiceModel, *, concurrency: int, requests: int) -> float:
    """A closed-loop bench level's output throughput as the bench computes it (vLLM's and
    SGLang's `bench_serve`: total output tokens over the run's duration): its `requests`
    requests (each its own output, `ServiceModel.request_outputs`) sent by `concurrency`
    clients at once to an idle replica, every one counted, the opening burst and the drain
    included (tok/s). The steady loop's throughput (`closed_loop`) leaves both out; a run of
    a few requests a client whose outputs vary widely spends a good part of its duration in
    the drain, behind its longest requests. Example: one client, outputs 2 and 5 tokens in
    turn (60 and 90 ms requests), ten requests: 35 tokens in 750 ms, 46.7 tok/s."""
    if concurrency < 1 or requests < 1:
        raise InputError("a bench run needs >= 1 client and >= 1 request")
    tr = run_trace(svc, None, concurrency, requests)
    return float(np.sum(svc.request_outputs(requests))) / _run_span_s(tr)
