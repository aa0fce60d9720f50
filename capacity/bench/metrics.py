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
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from typing import Any

import numpy as np

from capacity.model.cost import cost_per_mtok

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)

class ErrorType(StrEnum):
    """Why a request failed (`RequestRecord.error_type`; requests.csv and summary.csv carry the
    values)."""

    HTTP_ERROR = "http_error"
    """The server answered with a non-200 status."""
    TIMEOUT = "timeout"
    """No byte arrived within the stall limit (`--timeout`), or the request passed its
    deadline (`--request-deadline-s`)."""
    CONNECT_ERROR = "connect_error"
    """The connection could not be made (refused, DNS, TLS)."""
    DISCONNECTED = "disconnected"
    """The connection broke while the answer streamed."""
    ERROR_EVENT = "error_event"
    """An `{"error": ...}` event inside the 200 stream."""
    PARTIAL = "partial"
    """The stream ended without [DONE] or a finish_reason."""
    NO_TOKENS = "no_tokens"
    """The stream carried no token-bearing event."""
    MALFORMED = "malformed"
    """Every event was malformed (not JSON, or not the expected shape), or the body was not what
    its content-encoding says."""
    NOT_STREAMING = "not_streaming"
    """The server answered without streaming, so TTFT cannot be measured."""
    CLIENT_ERROR = "client_error"
    """An unexpected error in the client itself."""
    TOO_LARGE = "too_large"
    """An SSE line, an event or a body beyond the client's size limits, or more
    token-bearing events than the request's max_tokens allows (docs/reliability.md)."""


ERROR_TYPES: tuple[ErrorType, ...] = tuple(ErrorType)
"""Every `error_type` a failed request may carry."""


class TokenSource(StrEnum):
    """Where a request's `output_tokens` comes from (`RequestRecord.output_tokens_source`)."""

    USAGE = "usage"
    """The server's usage.completion_tokens: exact."""
    CHUNKS = "chunks"
    """The count of token-bearing events: a lower bound when a chunk holds several tokens."""
    CHUNKS_USAGE_REJECTED = "chunks_usage_rejected"
    """Counted from chunks because the server's usage.completion_tokens was impossible
    (`check_usage`); the row's error_message says why."""


PROMPT_TOKENS_SLACK = 65536
"""Tokens a chat template may add to a prompt: `prompt_tokens` above prompt_chars plus this
is impossible (every prompt character is ASCII, at most one token each)."""


@dataclass(frozen=True, kw_only=True)
class UsageCheck:
    """What a request's usage is trusted for (`check_usage`)."""

    output_tokens: int
    """Output tokens, from usage when plausible, else from the stream's chunks."""
    source: TokenSource
    prompt_tokens: int | None
    """usage.prompt_tokens when plausible, else None."""
    note: str | None
    """Why part of the usage was rejected (None when nothing was)."""


def _count(v: object) -> int | None:
    """A JSON integer >= 0 (not a bool, not a float), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def check_usage(usage: dict[str, Any] | None, *, token_events: int, max_tokens: int,
                prompt_chars: int) -> UsageCheck:
    """Validate a server's usage before it is stored (docs/reliability.md).

    usage.completion_tokens is impossible, and `output_tokens` falls back to the count of
    token-bearing events (source `chunks_usage_rejected`), when it is not a whole number
    >= 0, when it exceeds `max_tokens` (tokens; the server was asked for at most that many)
    or when it is below `token_events` (every token-bearing event holds at least one token)
    or `max_tokens`, whichever is less: a stream of more events than `max_tokens` (at most
    `capacity.bench.stream.TOKEN_EVENTS_SLACK` more are read) split tokens over events, so
    usage of exactly `max_tokens` is consistent with it. A count from chunks is at most
    `max_tokens` for the same reason.
    usage.prompt_tokens is dropped (None) when it is not a whole number >= 0 or exceeds
    prompt_chars + PROMPT_TOKENS_SLACK tokens. Absent usage is not an error: source `chunks`.
    """
    usage = usage or {}
    notes: list[str] = []
    chunks = min(token_events, max_tokens)
    raw = usage.get("completion_tokens")
    completion = _count(raw)
    if raw is None:
        out, source = chunks, TokenSource.CHUNKS
    elif completion is None:
        notes.append(f"usage.completion_tokens {_show(raw)} is not a count")
    elif completion > max_tokens:
        notes.append(f"usage.completion_tokens {completion} > max_tokens {max_tokens}")
    elif completion < chunks:
        notes.append(f"usage.completion_tokens {completion} < {token_events} token events")
    if raw is not None:
        if notes:
            out, source = chunks, TokenSource.CHUNKS_USAGE_REJECTED
        else:
            out, source = int(raw), TokenSource.USAGE
    raw_prompt = usage.get("prompt_tokens")
    prompt = _count(raw_prompt)
    if raw_prompt is not None and prompt is None:
        notes.append(f"usage.prompt_tokens {_show(raw_prompt)} is not a count")
    elif prompt is not None and prompt > prompt_chars + PROMPT_TOKENS_SLACK:
        notes.append(f"usage.prompt_tokens {prompt} > {prompt_chars} prompt characters")
        prompt = None
    return UsageCheck(output_tokens=out, source=source, prompt_tokens=prompt,
                      note=("usage rejected: " + "; ".join(notes)) if notes else None)


def _show(v: object) -> str:
    return repr(v)[:40]


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
    output_tokens_source: TokenSource
    """Exact from the server's usage, or counted from the stream's chunks (`TokenSource`)."""
    token_events: int
    max_tokens: int
    output_length_mismatch: bool
    finish_reason: str | None
    success: bool
    error_type: ErrorType | None
    error_message: str | None
    http_status: int | None
    endpoint: str
    model: str
    itl_ms: str
    """Space-separated inter-token gaps in ms (3 decimals)."""
    worker_id: int = 0
    """The client worker process that sent the request (`capacity bench --workers`), 0-based."""
    loop_lag_ms: float | None = None
    """The worst event-loop lag of that worker while the request ran, ms (None: not sampled,
    e.g. a warm-up request): a bound on how late its timestamps may be."""
    server_prompt_ms: float | None = None
    """The server's own prompt-processing time for this request, ms: llama.cpp's
    `timings.prompt_ms` in its final chunk (no queueing, no network); empty where the server
    reports none (`server_timings`)."""
    server_tpot_ms: float | None = None
    """The server's own time per output token, ms: llama.cpp's
    `timings.predicted_per_token_ms`; empty where the server reports none."""
    prompt_tokens_target: int | None = None
    """Prompt tokens this request was drawn to have (`--workload`, `--replay`,
    `--prompt-tokens`; the shared prefix included), sent as that many x `--chars-per-token`
    characters; None when the prompt was given in characters (`--prompt-chars`)."""
    output_tokens_target: int | None = None
    """Output tokens asked for (`max_tokens` of this request), tokens."""
    prefix_id: int | None = None
    """Which shared prefix leads the prompt: 0 the workload's system prompt, 1 + k the
    history of conversation k; None: no shared prefix (a unique nonce first)."""
    prefix_tokens_target: int | None = None
    """Tokens of that shared prefix (sent as the identical leading text), tokens."""
    prompt_cached_tokens: int | None = None
    """Prompt tokens the server took from its prefix cache instead of computing them
    (`usage.prompt_tokens_details.cached_tokens`: vLLM, SGLang, llama.cpp; else llama.cpp's
    `timings.cache_n`); None where the server does not say (`cached_prompt_tokens`)."""
    pass_index: int = 1
    """Which pass through the run's levels measured this request, from 1 (`--passes`; 1 in a
    run of one pass)."""
    stamp_source: str | None = None
    """Where the request's token times were taken (`capacity.bench.stamped`): `kernel` (the
    kernel's receive time of the packet, SO_TIMESTAMPNS), `loop` (when the event loop read the
    socket: the rest of that loop iteration is in the times) or `task` (when the request's own
    task read the bytes: every other ready task's turn is in them); None: no byte was read."""
    row_complete: int = 1
    """Always 1; a row cut short by a killed run lacks it, so readers can drop it."""


REQUEST_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RequestRecord))

@dataclass(frozen=True, kw_only=True)
class LevelSummary:
    """One level of a run: a row of summary.csv (the field names are its columns, in order).

    Aggregates over the level's successful requests unless said otherwise; None where nothing
    was measured (no successful request, no duration). Percentiles over successful requests,
    linear interpolation (module docstring).
    """

    run_id: str
    label: str
    concurrency: int
    """Requests held in flight at once (the level), requests."""
    request_rate_rps: float | None
    """Poisson arrival rate of the level, requests/s; None for a closed loop."""
    endpoint: str
    model: str
    requests_total: int
    requests_ok: int
    requests_failed: int
    error_types: str
    """Failed requests by `ErrorType`, 'type:count' joined by ';' ('' when none failed)."""
    duration_s: float
    """Last end minus first start over the level's requests, s (0 when none succeeded)."""
    request_throughput_rps: float | None
    output_tok_s: float | None
    total_tok_s: float | None
    """Prompt plus output tokens per second."""
    goodput_rps: float | None
    """Successful requests per second that met every SLO given."""
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    achieved_concurrency: float | None
    """Sum of E2E over the duration: requests in flight on average."""
    ttft_mean_ms: float | None
    """Mean time to first token, ms."""
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    ttft_max_ms: float | None
    tpot_mean_ms: float | None
    """Mean time per output token, ms."""
    tpot_p50_ms: float | None
    tpot_p90_ms: float | None
    tpot_p95_ms: float | None
    tpot_p99_ms: float | None
    tpot_max_ms: float | None
    itl_mean_ms: float | None
    """Mean inter-token gap (over every gap of every request), ms."""
    itl_p50_ms: float | None
    itl_p90_ms: float | None
    itl_p95_ms: float | None
    itl_p99_ms: float | None
    itl_max_ms: float | None
    e2e_mean_ms: float | None
    """Mean end-to-end latency, ms."""
    e2e_p50_ms: float | None
    e2e_p90_ms: float | None
    e2e_p95_ms: float | None
    e2e_p99_ms: float | None
    e2e_max_ms: float | None
    queue_mean_ms: float | None
    """Mean client-side wait before the send (over every request), ms."""
    queue_p50_ms: float | None
    queue_p90_ms: float | None
    queue_p95_ms: float | None
    queue_p99_ms: float | None
    queue_max_ms: float | None
    prompt_tokens_mean: float | None
    output_tokens_mean: float | None
    output_tokens_source: str | None
    """The `TokenSource` values seen, sorted and joined by '+' ('chunks+usage' when mixed)."""
    output_length_mismatches: int
    """Successful requests whose usage count differs from max_tokens."""
    client_cpu_s: float | None
    """CPU seconds the client process spent on the level."""
    client_cpu_share: float | None
    """client_cpu_s over the duration: the share of one core."""
    loop_lag_p50_ms: float | None
    loop_lag_p99_ms: float | None
    client_bound: bool
    """True when the client itself may have limited the level (see client_bound_reason)."""
    client_bound_reason: str | None
    gpu: str | None
    gpus: int
    gpu_price_per_hour: float | None
    currency: str | None
    cost_per_mtok: float | None
    """Price x GPUs per million output tokens at output_tok_s (F7), in `currency`."""
    row_complete: int = 1
    """Always 1; a row cut short by a killed run lacks it, so readers can drop it."""

    def to_row(self) -> dict[str, Any]:
        """The summary.csv row: column name -> value, in column order."""
        return asdict(self)


SUMMARY_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(LevelSummary))
"""The summary.csv header: LevelSummary's fields, in order."""


def server_timings(timings: Mapping[str, Any] | None) -> tuple[float | None, float | None]:
    """(prompt ms, ms per output token) from a server's per-request `timings` object
    (llama.cpp: `prompt_ms`, `predicted_per_token_ms`); None for what is missing, not a
    number, or not finite and positive."""
    if not isinstance(timings, Mapping):
        return None, None

    def num(key: str) -> float | None:
        v = timings.get(key)
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        return float(v) if math.isfinite(v) and v > 0 else None

    return num("prompt_ms"), num("predicted_per_token_ms")


def cached_prompt_tokens(usage: Mapping[str, Any] | None, timings: Mapping[str, Any] | None,
                         prompt_tokens: int | None) -> int | None:
    """Prompt tokens served from the server's prefix cache: `usage.prompt_tokens_details.
    cached_tokens` (the OpenAI field), else llama.cpp's `timings.cache_n`. None when neither
    is a whole number >= 0, or when it exceeds the request's prompt tokens (a reply that
    lies). Unit: tokens."""
    details = usage.get("prompt_tokens_details") if isinstance(usage, Mapping) else None
    raw = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if raw is None and isinstance(timings, Mapping):
        raw = timings.get("cache_n")
    n = _count(raw)
    if n is None or (prompt_tokens is not None and n > prompt_tokens):
        return None
    return n


CACHED_SHARE_WARNING = 0.05
"""A level whose prompts came more than this share from the server's prefix cache is
flagged: its TTFT is not a cold prefill's."""


def cached_share(records: Sequence[RequestRecord]) -> float | None:
    """Share of the prompt tokens of the successful requests the server took from its prefix
    cache (None when no request says both)."""
    pairs = [(r.prompt_cached_tokens, r.prompt_tokens) for r in records if r.success
             and r.prompt_cached_tokens is not None and r.prompt_tokens]
    total = sum(p for _, p in pairs if p)
    return sum(c for c, _ in pairs if c) / total if total else None


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


def pass_bounds(requests: int, passes: int) -> list[int]:
    """Where each pass's share of a level's request indices starts, and the end: pass p
    (from 0) measures indices bounds[p] to bounds[p + 1] - 1; shares differ by one at most
    (`capacity bench --passes`)."""
    return [requests * p // passes for p in range(passes + 1)]


def span_s(records: Sequence[RequestRecord]) -> float:
    """Seconds from the first send to the last successful answer of `records` (0 without a
    success)."""
    ok = [r for r in records if r.success]
    if not ok:
        return 0.0
    return (max(r.start_unix_s + (r.e2e_ms or 0.0) / 1e3 for r in ok)
            - min(r.start_unix_s for r in records))


def summarize(records: Sequence[RequestRecord], *, run_id: str, label: str, concurrency: int,
              request_rate_rps: float | None, endpoint: str, model: str,
              slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None,
              load: ClientLoad | None = None, gpu: str | None = None, gpus: int = 1,
              gpu_price_per_hour: float | None = None, currency: str | None = None,
              duration_s: float | None = None) -> LevelSummary:
    """One row of summary.csv for the records of one level. `duration_s` (s): the time the
    level ran; None: the span of its records (`span_s`). A level measured in passes
    (`--passes`) ran for the sum of its passes' spans, not from its first send to its last
    answer, between which other levels ran."""
    ok = [r for r in records if r.success]
    failed = [r for r in records if not r.success]
    duration = span_s(records) if duration_s is None else duration_s
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens or 0 for r in ok)

    def per_s(x: float) -> float | None:
        return x / duration if duration > 0 else None
    good = [r for r in ok
            if (slo_ttft_ms is None or (r.ttft_ms is not None and r.ttft_ms <= slo_ttft_ms))
            and (slo_tpot_ms is None or r.tpot_ms is None or r.tpot_ms <= slo_tpot_ms)]
    ttft = _stats([r.ttft_ms for r in ok if r.ttft_ms is not None])
    tpot = _stats([r.tpot_ms for r in ok if r.tpot_ms is not None])
    itl = _stats([g for r in ok for g in parse_itl(r.itl_ms)])
    e2e = _stats([r.e2e_ms for r in ok if r.e2e_ms is not None])
    queue = _stats([r.queue_ms for r in records])
    prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    sources = sorted({str(r.output_tokens_source) for r in ok})
    reasons: list[str] = []
    share: float | None = None
    if load is not None:
        share = load.cpu_s / duration if duration > 0 else None
        if share is not None and share > CLIENT_CPU_SHARE_LIMIT:
            reasons.append(f"client CPU {share:.0%} of one core")
        if load.loop_lag_p50_ms > CLIENT_LOOP_LAG_LIMIT_MS:
            reasons.append(f"event-loop lag p50 {load.loop_lag_p50_ms:.1f} ms")
    q50, e2e50 = queue[1], e2e[1]
    if (q50 is not None and q50 > CLIENT_QUEUE_LIMIT_MS
            and (e2e50 is None or q50 > CLIENT_QUEUE_SHARE_LIMIT * e2e50)):
        reasons.append(f"requests sent {q50:.1f} ms late (median)")
    tok_s = per_s(out_tokens)
    return LevelSummary(
        run_id=run_id, label=label, concurrency=concurrency, request_rate_rps=request_rate_rps,
        endpoint=endpoint, model=model,
        requests_total=len(records), requests_ok=len(ok), requests_failed=len(failed),
        error_types=";".join(f"{k}:{v}" for k, v in
                             sorted(Counter(str(r.error_type or "?") for r in failed).items())),
        duration_s=duration,
        request_throughput_rps=per_s(len(ok)), output_tok_s=tok_s,
        total_tok_s=per_s(out_tokens + in_tokens), goodput_rps=per_s(len(good)),
        slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms,
        achieved_concurrency=per_s(sum((r.e2e_ms or 0.0) / 1e3 for r in ok)),
        ttft_mean_ms=ttft[0], ttft_p50_ms=ttft[1], ttft_p90_ms=ttft[2], ttft_p95_ms=ttft[3],
        ttft_p99_ms=ttft[4], ttft_max_ms=ttft[5],
        tpot_mean_ms=tpot[0], tpot_p50_ms=tpot[1], tpot_p90_ms=tpot[2], tpot_p95_ms=tpot[3],
        tpot_p99_ms=tpot[4], tpot_max_ms=tpot[5],
        itl_mean_ms=itl[0], itl_p50_ms=itl[1], itl_p90_ms=itl[2], itl_p95_ms=itl[3],
        itl_p99_ms=itl[4], itl_max_ms=itl[5],
        e2e_mean_ms=e2e[0], e2e_p50_ms=e2e[1], e2e_p90_ms=e2e[2], e2e_p95_ms=e2e[3],
        e2e_p99_ms=e2e[4], e2e_max_ms=e2e[5],
        queue_mean_ms=queue[0], queue_p50_ms=queue[1], queue_p90_ms=queue[2],
        queue_p95_ms=queue[3], queue_p99_ms=queue[4], queue_max_ms=queue[5],
        prompt_tokens_mean=float(np.mean(prompts)) if prompts else None,
        output_tokens_mean=float(np.mean([r.output_tokens for r in ok])) if ok else None,
        output_tokens_source="+".join(sources) if sources else None,
        output_length_mismatches=sum(r.output_length_mismatch for r in ok),
        client_cpu_s=load.cpu_s if load is not None else None,
        client_cpu_share=share,
        loop_lag_p50_ms=load.loop_lag_p50_ms if load is not None else None,
        loop_lag_p99_ms=load.loop_lag_p99_ms if load is not None else None,
        client_bound=bool(reasons), client_bound_reason="; ".join(reasons) or None,
        gpu=gpu, gpus=gpus, gpu_price_per_hour=gpu_price_per_hour, currency=currency,
        cost_per_mtok=(float(cost_per_mtok(gpu_price_per_hour, gpus, tok_s))
                       if gpu_price_per_hour is not None and tok_s else None),
    )


def judge_workers(row: LevelSummary, loads: Mapping[int, ClientLoad], unit: str = "worker"
                  ) -> LevelSummary:
    """The level's row with the client load of several workers: `client_cpu_s` their sum,
    `client_cpu_share` and the loop lags the busiest worker's (each worker is one process on
    one core, so the client is bound as soon as ONE of them is), and `client_bound` when any
    worker is (its reasons name the worker), or the sends were late (`summarize`)."""
    reasons = [row.client_bound_reason] if row.client_bound_reason else []
    duration = row.duration_s
    shares: list[float] = []
    for wid, load in sorted(loads.items()):
        share = load.cpu_s / duration if duration > 0 else None
        if share is not None:
            shares.append(share)
            if share > CLIENT_CPU_SHARE_LIMIT:
                reasons.append(f"{unit} {wid}: client CPU {share:.0%} of one core")
        if load.loop_lag_p50_ms > CLIENT_LOOP_LAG_LIMIT_MS:
            reasons.append(f"{unit} {wid}: event-loop lag p50 {load.loop_lag_p50_ms:.1f} ms")
    return replace(
        row, client_cpu_s=sum(x.cpu_s for x in loads.values()),
        client_cpu_share=max(shares) if shares else None,
        loop_lag_p50_ms=max(x.loop_lag_p50_ms for x in loads.values()),
        loop_lag_p99_ms=max(x.loop_lag_p99_ms for x in loads.values()),
        client_bound=bool(reasons), client_bound_reason="; ".join(reasons) or None)
