"""Closed-loop TTFT of an engine that admits a burst in pieces: a stated bound (issue 31).

In a closed loop of C equal requests the requests finish in the same step and the clients send
the next C at once, a burst. An engine that starts a step as soon as the first request is in
(llama.cpp's server: `update_slots` builds one batch a step, one token for each generating slot,
then prompt tokens of the slots still reading their prompt up to `n_batch`) admits that burst in
pieces: the first group's prompts in one step, the rest one or more steps later, with the first
group's decode tokens riding along (docs/accuracy.md, "Closed loops in phase"). Which group a
request joins depends on sub-millisecond timing, so the p50 is not predictable from the
formulas; what is, is a bound every request of the burst stays under.

`burst_ttft_bound_ms` (derivation in its docstring): TTFT <= C x W + n_b x t0_p +
(n_b + 1) x step(C), with W one prompt's prefill work and t0_p the fixed prefill overhead of the
calibration (F6b), step(C) the decode step at C (F4/F4b) and n_b = C + floor(C x P / n_batch)
the most batches the burst's prompts can be spread over. The lower edge is one prompt's prefill
alone (the first request of the first group). `closed_loop_rows` puts both beside each measured
closed-loop level for `capacity calibrate`'s report. Source: docs/calibration.md ("Closed-loop
TTFT").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from capacity.fit.calibration import Calibration, apply
from capacity.fit.measured import MeasuredPoint
from capacity.model.scenario import Scenario, evaluate

LLAMACPP_BATCH_TOKENS = 2048
"""llama.cpp's default `n_batch` (tokens a step may take from prompts; data/engines.toml,
profile `llamacpp`, `token_budget`)."""


def burst_batches(concurrency: int, prompt_tokens: float, batch_tokens: int) -> int:
    """The most batches (engine steps) the prompts of a burst of C requests of P tokens can be
    spread over: one per request (each may arrive after the step before it started) plus one
    more each time the token budget `batch_tokens` cuts the C x P prompt tokens:
    C + floor(C x P / n_batch). Unit: steps. Example: 8 prompts of 400 tokens, n_batch 2048:
    8 + floor(3200 / 2048) = 9."""
    if concurrency < 1 or batch_tokens < 1:
        raise ValueError("concurrency and batch_tokens must be >= 1")
    return int(concurrency + math.floor(concurrency * prompt_tokens / batch_tokens))


def burst_ttft_bound_ms(*, concurrency: int, prompt_tokens: float, prefill_work_ms: float,
                        prefill_overhead_ms: float, step_ms: float, batch_tokens: int) -> float:
    """Upper bound on the TTFT (ms) of any request of a closed-loop burst of C equal prompts
    that an engine admits in pieces (docs/calibration.md, "Closed-loop TTFT").

    Derivation, in the terms of F6b and F4/F4b: a request's first token comes out of the batch
    that finishes its prompt, so before it at most every prompt of the burst is prefilled: C x W
    of prefill work (W = one prompt's GEMMs and attention at the fitted MFUs; prefilled in
    fewer, larger batches the work is no more, since F6b's GEMM and attention terms add per
    prompt). These prompts are spread over at most n_b = `burst_batches` batches, each paying
    the fixed prefill overhead t0_p at most once, and each carrying at most one decode token of
    every generating request, which costs at most one decode step at C (the step's terms at C
    bound those of any smaller batch). One more step may be running when the burst arrives
    (the last step of the previous requests). Hence

        TTFT <= C x W + n_b x t0_p + (n_b + 1) x step(C).

    Example: C = 4, P = 100, W = 10 ms, t0_p = 20 ms, step 30 ms, n_batch 2048: n_b = 4,
    bound = 40 + 80 + 150 = 270 ms. It is loose by design (no group ordering is assumed)."""
    n_b = burst_batches(concurrency, prompt_tokens, batch_tokens)
    return (concurrency * prefill_work_ms + n_b * prefill_overhead_ms
            + (n_b + 1) * step_ms)


@dataclass(frozen=True, kw_only=True)
class ClosedLoopRow:
    """One measured closed-loop level against its TTFT edges (ms): `one_prefill_ms` (one
    prompt alone: the first request of the first group, the least any waits) and `bound_ms`
    (`burst_ttft_bound_ms`)."""

    model: str
    concurrency: float
    prompt_tokens: float
    measured_p50_ms: float
    measured_p90_ms: float | None
    one_prefill_ms: float
    bound_ms: float

    @property
    def holds(self) -> bool:
        """Whether the measured TTFT (p90 where there is one, else p50) is under the bound."""
        worst = self.measured_p90_ms if self.measured_p90_ms is not None else self.measured_p50_ms
        return worst <= self.bound_ms


def closed_loop_rows(cal: Calibration, sets: Sequence[tuple[Scenario, Sequence[MeasuredPoint]]],
                     batch_tokens: int = LLAMACPP_BATCH_TOKENS) -> list[ClosedLoopRow]:
    """Every measured level with a TTFT, per model (its scenario with the calibration's knobs),
    with one prompt's prefill and the burst bound; () without prefill knobs."""
    if cal.mfu is None:
        return []
    rows: list[ClosedLoopRow] = []
    for base, points in sets:
        s = apply(cal, base)
        for p in points:
            if p.ttft_ms is None:
                continue
            c = max(1, math.ceil(p.concurrency))
            one = float(np.asarray(evaluate(s.with_(prompt_tokens=None), [1],
                                            [p.prefill_tokens]).ttft_s).ravel()[0]) * 1e3
            step = float(np.asarray(evaluate(s, [c], [p.decode_context_tokens]).decode.step_ms
                                    ).ravel()[0])
            t0p = s.fixed_prefill_ms
            rows.append(ClosedLoopRow(
                model=base.variant.key, concurrency=p.concurrency, prompt_tokens=p.prefill_tokens,
                measured_p50_ms=p.ttft_ms, measured_p90_ms=p.ttft_p90_ms, one_prefill_ms=one,
                bound_ms=burst_ttft_bound_ms(concurrency=c, prompt_tokens=p.prefill_tokens,
                                             prefill_work_ms=one - t0p, prefill_overhead_ms=t0p,
                                             step_ms=step, batch_tokens=batch_tokens)))
    return rows
