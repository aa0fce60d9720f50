"""Per-request records and per-level aggregates of a benchmark run (docs/bench.md).

Definitions (aligned with vLLM bench serve, SGLang, GuideLLM and AIPerf where they agree):
- start: just before the request is sent; waiting for our own concurrency limit or arrival
  schedule is `queue_ms`, not part of any latency;
- TTFT: start to the first token-bearing event (`first_chunk_ms`: to the first event of any kind);
- E2E: start to the last token-bearing event;
- TPOT = (last token - first token) / (output_tokens - 1), ms;
- ITL: gaps between token-bearing events (a chunk may carry several tokens, so mean ITL can
  exceed TPOT);
- aggregates over the successful requests of a level: duration = last end - first start (over all
  requests of the level), request/s, output tok/s, total tok/s, goodput (request/s meeting every
  SLO), achieved concurrency = sum of E2E / duration; percentiles with linear interpolation
  (numpy's default, the same as DuckDB's `quantile_cont`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from capacity.model.cost import cost_per_mtok

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)

ERROR_TYPES: tuple[str, ...] = (
    "http_error", "timeout", "connect_error", "disconnected", "error_event", "partial",
    "no_tokens", "malformed", "not_streaming", "client_error",
)
"""Every `error_type` a failed request may carry."""


@dataclass(frozen=True, kw_only=True)
class RequestRecord:
    """One measured request: a row of requests.csv. Times in ms unless named otherwise."""

    run_id: str
    label: str
    concurrency: int
    request_rate_rps: float | None
    request_index: int
    response_id: str | None
    start_unix_s: float
    queue_ms: float
    ttft_ms: float | None
    first_chunk_ms: float | None
    e2e_ms: float | None
    tpot_ms: float | None
    itl_mean_ms: float | None
    itl_max_ms: float | None
    prompt_chars: int
    prompt_tokens: int | None
    output_tokens: int
    output_tokens_source: str
    """'usage' (the server's usage.completion_tokens) or 'chunks' (count of token-bearing
    events: a lower bound when a chunk holds several tokens)."""
    token_events: int
    max_tokens: int
    output_length_mismatch: bool
    finish_reason: str | None
    success: bool
    error_type: str | None
    error_message: str | None
    http_status: int | None
    endpoint: str
    model: str
    itl_ms: str
    """Space-separated inter-token gaps in ms (3 decimals)."""
    row_complete: int = 1
    """Always 1; a row cut short by a killed run lacks it, so readers can drop it."""


REQUEST_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RequestRecord))

SUMMARY_METRICS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms")


def percentile_columns(metric: str) -> list[str]:
    base = metric.removesuffix("_ms")
    return [f"{base}_mean_ms"] + [f"{base}_p{p}_ms" for p in PERCENTILES] + [f"{base}_max_ms"]


SUMMARY_COLUMNS: tuple[str, ...] = (
    "run_id", "label", "concurrency", "request_rate_rps", "endpoint", "model",
    "requests_total", "requests_ok", "requests_failed", "error_types",
    "duration_s", "request_throughput_rps", "output_tok_s", "total_tok_s",
    "goodput_rps", "slo_ttft_ms", "slo_tpot_ms", "achieved_concurrency",
    *[c for m in SUMMARY_METRICS for c in percentile_columns(m)],
    "prompt_tokens_mean", "output_tokens_mean", "output_tokens_source",
    "output_length_mismatches",
    "client_cpu_s", "client_cpu_share", "loop_lag_p50_ms", "loop_lag_p99_ms", "client_bound",
    "client_bound_reason",
    "gpu", "gpus", "gpu_price_per_hour", "currency", "cost_per_mtok",
    "row_complete",
)


def record_row(r: RequestRecord) -> dict[str, Any]:
    return asdict(r)


def _stats(values: Sequence[float]) -> list[float | None]:
    """mean, p50, p90, p95, p99, max (linear interpolation); None when empty."""
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if arr.size == 0:
        return [None] * (len(PERCENTILES) + 2)
    qs = np.percentile(arr, PERCENTILES)
    return [float(arr.mean()), *(float(q) for q in qs), float(arr.max())]


def parse_itl(text: str) -> list[float]:
    return [float(x) for x in text.split()] if text else []


@dataclass(frozen=True, kw_only=True)
class ClientLoad:
    """What the client itself spent on a level (to tell client-bound from server-bound)."""

    cpu_s: float
    loop_lag_p50_ms: float
    loop_lag_p99_ms: float


CLIENT_CPU_SHARE_LIMIT = 0.85
"""Above this share of one core the (single-threaded) client limits the level."""
CLIENT_LOOP_LAG_LIMIT_MS = 5.0
"""Median event-loop lag (oversleep of a 10 ms ticker) above which timestamps are late. The
p99 is recorded too, but on a shared machine it mostly measures the other processes."""
CLIENT_QUEUE_LIMIT_MS = 5.0
"""Median send delay after a request became due, above which the client may be late..."""
CLIENT_QUEUE_SHARE_LIMIT = 0.02
"""...when that delay is also more than this share of the median request (E2E): a burst of
identical requests leaves the client a few ms late, which matters for a 20 ms request and not
for a 2 s one (the latencies themselves start at the send, so they are not distorted)."""


def summarize(records: Sequence[RequestRecord], *, run_id: str, label: str, concurrency: int,
              request_rate_rps: float | None, endpoint: str, model: str,
              slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None,
              load: ClientLoad | None = None, gpu: str | None = None, gpus: int = 1,
              gpu_price_per_hour: float | None = None, currency: str | None = None
              ) -> dict[str, Any]:
    """One row of summary.csv for the records of one level."""
    ok = [r for r in records if r.success]
    failed = [r for r in records if not r.success]
    starts = [r.start_unix_s for r in records]
    ends = [r.start_unix_s + (r.e2e_ms or 0.0) / 1e3 for r in ok]
    duration = (max(ends) - min(starts)) if ok else 0.0
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens or 0 for r in ok)
    row: dict[str, Any] = {
        "run_id": run_id, "label": label, "concurrency": concurrency,
        "request_rate_rps": request_rate_rps, "endpoint": endpoint, "model": model,
        "requests_total": len(records), "requests_ok": len(ok), "requests_failed": len(failed),
        "error_types": ";".join(f"{k}:{v}" for k, v in
                                sorted(Counter(r.error_type or "?" for r in failed).items())),
        "duration_s": duration,
    }
    per_s = (lambda x: x / duration) if duration > 0 else (lambda x: None)
    row["request_throughput_rps"] = per_s(len(ok))
    row["output_tok_s"] = per_s(out_tokens)
    row["total_tok_s"] = per_s(out_tokens + in_tokens)
    good = [r for r in ok
            if (slo_ttft_ms is None or (r.ttft_ms is not None and r.ttft_ms <= slo_ttft_ms))
            and (slo_tpot_ms is None or r.tpot_ms is None or r.tpot_ms <= slo_tpot_ms)]
    row["goodput_rps"] = per_s(len(good))
    row["slo_ttft_ms"] = slo_ttft_ms
    row["slo_tpot_ms"] = slo_tpot_ms
    row["achieved_concurrency"] = per_s(sum((r.e2e_ms or 0.0) / 1e3 for r in ok))
    series: dict[str, list[float]] = {
        "ttft_ms": [r.ttft_ms for r in ok if r.ttft_ms is not None],
        "tpot_ms": [r.tpot_ms for r in ok if r.tpot_ms is not None],
        "itl_ms": [g for r in ok for g in parse_itl(r.itl_ms)],
        "e2e_ms": [r.e2e_ms for r in ok if r.e2e_ms is not None],
        "queue_ms": [r.queue_ms for r in records],
    }
    for metric in SUMMARY_METRICS:
        row.update(zip(percentile_columns(metric), _stats(series[metric]), strict=True))
    row["prompt_tokens_mean"] = (float(np.mean([r.prompt_tokens for r in ok
                                                if r.prompt_tokens is not None]))
                                 if any(r.prompt_tokens is not None for r in ok) else None)
    row["output_tokens_mean"] = float(np.mean([r.output_tokens for r in ok])) if ok else None
    sources = sorted({r.output_tokens_source for r in ok})
    row["output_tokens_source"] = "+".join(sources) if sources else None
    row["output_length_mismatches"] = sum(r.output_length_mismatch for r in ok)
    reasons: list[str] = []
    if load is not None:
        share = load.cpu_s / duration if duration > 0 else None
        row["client_cpu_s"] = load.cpu_s
        row["client_cpu_share"] = share
        row["loop_lag_p50_ms"] = load.loop_lag_p50_ms
        row["loop_lag_p99_ms"] = load.loop_lag_p99_ms
        if share is not None and share > CLIENT_CPU_SHARE_LIMIT:
            reasons.append(f"client CPU {share:.0%} of one core")
        if load.loop_lag_p50_ms > CLIENT_LOOP_LAG_LIMIT_MS:
            reasons.append(f"event-loop lag p50 {load.loop_lag_p50_ms:.1f} ms")
    else:
        row["client_cpu_s"] = row["client_cpu_share"] = None
        row["loop_lag_p50_ms"] = row["loop_lag_p99_ms"] = None
    q50, e2e50 = row["queue_p50_ms"], row["e2e_p50_ms"]
    if (q50 is not None and q50 > CLIENT_QUEUE_LIMIT_MS
            and (e2e50 is None or q50 > CLIENT_QUEUE_SHARE_LIMIT * e2e50)):
        reasons.append(f"requests sent {q50:.1f} ms late (median)")
    row["client_bound"] = bool(reasons)
    row["client_bound_reason"] = "; ".join(reasons) or None
    row["gpu"] = gpu
    row["gpus"] = gpus
    row["gpu_price_per_hour"] = gpu_price_per_hour
    row["currency"] = currency
    tok_s = row["output_tok_s"]
    row["cost_per_mtok"] = (float(cost_per_mtok(gpu_price_per_hour, gpus, tok_s))
                            if gpu_price_per_hour is not None and tok_s else None)
    row["row_complete"] = 1
    return {c: row[c] for c in SUMMARY_COLUMNS}
