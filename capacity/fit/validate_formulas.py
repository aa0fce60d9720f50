"""The scorecard's closed-loop and error formulas, split out of `capacity.fit.validate` (which
re-exports them): a closed loop's throughput and end-to-end latency from TTFT and the step, the
relative error, and which levels of a sweep are at saturation.
Source: docs/accuracy.md, F6 (docs/method.md).
"""

from __future__ import annotations

from collections.abc import Sequence

SATURATION_GAIN = 0.05
"""A level whose throughput is within 5% of a lower concurrency's is at saturation."""


def closed_loop_tok_s(batch: float, output_tokens: float, ttft_ms: float,
                      step_ms: float) -> float:
    """Aggregate output tok/s of a closed loop of `batch` clients (tokens/s): each request is
    one prefill then n - 1 decode steps, so C x n / ((TTFT + (n - 1) x step) / 1000); with
    one output token or fewer, C x 1000 / step. Example: 4 clients, 128 tokens, TTFT 20 ms,
    step 10 ms -> 4 x 128 / 1.29 s = 396.9 tok/s."""
    if output_tokens > 1:
        return batch * output_tokens / ((ttft_ms + (output_tokens - 1) * step_ms) / 1e3)
    return batch * 1e3 / step_ms


def e2e_ms(output_tokens: float, ttft_ms: float, step_ms: float) -> float:
    """A request's end-to-end latency in ms: one prefill, then n - 1 decode steps,
    TTFT + (n - 1) x step. Example: 128 tokens, TTFT 20 ms, step 6 ms -> 782 ms."""
    return ttft_ms + max(0.0, output_tokens - 1) * step_ms


def relative_error(predicted: float, measured: float) -> float:
    """predicted / measured - 1 (a fraction). Example: 11 vs 10 -> 0.1."""
    return predicted / measured - 1.0


def flat_levels(concurrency: Sequence[float], tok_s: Sequence[float | None],
                gain: float = SATURATION_GAIN) -> list[bool]:
    """Which levels of a sweep have stopped scaling by their measured throughput alone (tok/s):
    at most (1 + gain) x the best of the lower concurrencies (more clients, no more tokens).
    The one rule for "throughput stops scaling": the accuracy table's saturated column
    (`saturated_levels`) and the Results page's saturation note and line
    (`capacity.fit.overlay.saturation`). Levels in any order; a level without throughput, or
    without a lower level that has one, is not flat. Example: tok/s 814, 917, 921 at C 50,
    100, 150 -> only C = 150 is."""
    out = []
    for c, r in zip(concurrency, tok_s, strict=True):
        lower = [x for cc, x in zip(concurrency, tok_s, strict=True) if cc < c and x is not None]
        out.append(r is not None and bool(lower) and r <= (1.0 + gain) * max(lower))
    return out


def saturated_levels(concurrency: Sequence[float], tok_s: Sequence[float | None],
                     c_vram_requests: float, gain: float = SATURATION_GAIN) -> list[bool]:
    """Which levels of a sweep are at saturation: C above the spec-sheet C_vram (requests), or
    a measured throughput that stopped scaling (`flat_levels`). Levels in any order; a level
    without throughput uses C_vram only. Example: tok/s 814, 917, 921 at C 50, 100, 150 and
    C_vram 1000 -> only C = 150 is."""
    flat = flat_levels(concurrency, tok_s, gain)
    return [c > c_vram_requests or f for c, f in zip(concurrency, flat, strict=True)]
