"""One streamed answer as it arrives: `StreamState` follows a request's SSE events and makes its
`RequestRecord` (docs/bench.md, "What is measured").

Times are `time.perf_counter_ns` stamps: the start is when the request's first byte is written
(`StreamState.trace`, httpx's trace hook), each token-bearing event is stamped when its bytes
reached the socket (`capacity.bench.stamped`), so TTFT, TPOT and the inter-token gaps do not
include the client's own waiting.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from capacity.bench.config import BenchConfig, RequestSpec
from capacity.bench.metrics import (
    ErrorType,
    RequestRecord,
    TokenSource,
    cached_prompt_tokens,
    check_usage,
    server_timings,
)
from capacity.bench.sse import ChunkInfo, SseTooLarge

TOKEN_EVENTS_SLACK = 16
"""Token-bearing events a stream may carry beyond its request's `max_tokens` (tokens; every
token-bearing event holds at least one token, so more events than `max_tokens` means the
server ignored the limit or splits a token over events). One event beyond
`max_tokens + TOKEN_EVENTS_SLACK` and the stream is stopped as `too_large`
(docs/reliability.md): a server that streams 200,000 events for 16 tokens is not a success."""


def token_event_limit(max_tokens: int) -> int:
    """Most token-bearing events read from one streamed answer asked for `max_tokens`."""
    return max_tokens + TOKEN_EVENTS_SLACK


class TooManyTokens(SseTooLarge):
    """A stream with more token-bearing events than `token_event_limit` (`too_large`)."""


class StreamState:
    """What one request's answer has shown so far: its status, when each token-bearing event
    arrived, its usage and finish reason, and the first error; `record` makes the request's
    `RequestRecord` from it."""

    __slots__ = ("status", "first_chunk_ns", "token_ns", "usage", "finish", "done", "error",
                 "error_type", "response_id", "malformed", "after_done", "events", "last_event_ns",
                 "sent_ns", "timings", "max_tokens", "token_limit", "stamp_source")

    def __init__(self, max_tokens: int | None = None) -> None:
        """`max_tokens`: the request's limit (tokens); its token-bearing events are counted
        against `token_event_limit` (None: not counted)."""
        self.max_tokens = max_tokens
        self.token_limit = token_event_limit(max_tokens) if max_tokens is not None else None
        self.status: int | None = None
        self.first_chunk_ns: int | None = None
        self.token_ns: list[int] = []
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None
        self.done = False
        self.error: str | None = None
        self.error_type: ErrorType | None = None
        self.response_id: str | None = None
        self.malformed = 0
        self.after_done = 0
        """Events after `[DONE]`, ignored: the stream ends there (the OpenAI SDK stops reading
        at it), so a server that sends `[DONE]` first and its tokens after has sent none."""
        self.events = 0
        self.last_event_ns: int | None = None
        self.sent_ns: int | None = None
        self.timings: dict[str, Any] | None = None
        self.stamp_source: str | None = None
        """`RequestRecord.stamp_source`: where the token times come from (set by the reader)."""

    async def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpx trace hook: the moment the request's first byte is written to the socket.

        That is docs/bench.md's "start: just before the request is sent"; what came before it
        (building the request, taking a connection, the event loop's turn) is client-side
        waiting and goes to `queue_ms`, not into TTFT.
        """
        if event == "http11.send_request_headers.started" and self.sent_ns is None:
            self.sent_ns = time.perf_counter_ns()

    def sent(self, ns: int) -> None:
        """The request's first byte is written now (`ns`, perf_counter): the client's own
        connections (`capacity.bench.wire`) call this just before their one write."""
        if self.sent_ns is None:
            self.sent_ns = ns

    def fail(self, kind: ErrorType, message: str) -> None:
        if self.error_type is None:
            self.error_type, self.error = kind, message

    def on(self, info: ChunkInfo, now: int) -> None:
        if self.done:
            self.after_done += 1
            return
        self.events += 1
        self.last_event_ns = now
        if self.first_chunk_ns is None:
            self.first_chunk_ns = now
        if info.done:
            self.done = True
            return
        if info.malformed:
            self.malformed += 1
            return
        if info.error is not None:
            self.fail(ErrorType.ERROR_EVENT, info.error)
            return
        if self.response_id is None and info.response_id:
            self.response_id = info.response_id
        if info.tokens:
            self.token_ns.append(now)
            if self.token_limit is not None and len(self.token_ns) > self.token_limit:
                raise TooManyTokens(f"server sent {len(self.token_ns)} tokens (token-bearing "
                                    f"events) for max_tokens {self.max_tokens}; stopped "
                                    f"reading after {self.token_limit}")
        if info.finish_reason:
            self.finish = info.finish_reason
        if info.usage is not None:
            self.usage = info.usage
        if info.timings is not None:
            self.timings = info.timings

    def record(self, cfg: BenchConfig, *, run_id: str, model: str, level: int,
               rate: float | None, index: int, start_ns: int, start_unix: float, due_ns: int,
               prompt_chars: int, max_tokens: int, spec: RequestSpec | None) -> RequestRecord:
        """The request's record (run `run_id` of `cfg`, asking `model`): a failure already
        seen, else one found now (no token, no end), else a success."""
        ms = 1e-6
        n_events = len(self.token_ns)
        checked = check_usage(self.usage, token_events=n_events, max_tokens=max_tokens,
                              prompt_chars=prompt_chars)
        out_tokens, source = checked.output_tokens, checked.source
        if self.error_type is None:
            if n_events == 0:
                self.fail(ErrorType.MALFORMED if self.malformed and self.events == self.malformed
                          else ErrorType.NO_TOKENS, f"no token-bearing event in {self.events} events"
                          + (f" ({self.malformed} malformed)" if self.malformed else "")
                          + (f" before [DONE] ({self.after_done} after it, ignored)"
                             if self.after_done else ""))
            elif not self.done and self.finish is None:
                self.fail(ErrorType.PARTIAL, f"the stream ended without [DONE] or finish_reason after "
                          f"{n_events} token events")
        ok = self.error_type is None
        first = self.token_ns[0] if self.token_ns else None
        last = self.token_ns[-1] if self.token_ns else None
        gaps = np.diff(np.asarray(self.token_ns, dtype=np.int64)) * ms if n_events > 1 else None
        tpot = ((last - first) * ms / (out_tokens - 1)
                if first is not None and last is not None and out_tokens > 1 else None)
        end = last if last is not None else self.last_event_ns
        srv_prompt_ms, srv_tpot_ms = server_timings(self.timings)
        message = self.error
        if ok:
            notes = [f"{self.malformed} malformed events skipped"] if self.malformed else []
            if self.after_done:
                notes.append(f"{self.after_done} events after [DONE] ignored")
            if n_events > max_tokens:
                notes.append(f"{n_events} token events for max_tokens {max_tokens}")
            notes += [checked.note] if checked.note else []
            message = "; ".join(notes)[:200] or None
        return RequestRecord(
            run_id=run_id, label=cfg.label, concurrency=level, request_rate_rps=rate,
            request_index=index, response_id=self.response_id, start_unix_s=start_unix,
            queue_ms=max(0.0, (start_ns - due_ns) * ms),
            ttft_ms=(first - start_ns) * ms if first is not None else None,
            first_chunk_ms=((self.first_chunk_ns - start_ns) * ms
                            if self.first_chunk_ns is not None else None),
            e2e_ms=(end - start_ns) * ms if end is not None else None,
            tpot_ms=tpot,
            itl_mean_ms=float(gaps.mean()) if gaps is not None else None,
            itl_max_ms=float(gaps.max()) if gaps is not None else None,
            prompt_chars=prompt_chars,
            prompt_tokens=checked.prompt_tokens,
            output_tokens=out_tokens, output_tokens_source=source, token_events=n_events,
            max_tokens=max_tokens,
            output_length_mismatch=ok and source == TokenSource.USAGE and out_tokens != max_tokens,
            finish_reason=self.finish, success=ok, error_type=self.error_type,
            error_message=message, http_status=self.status, endpoint=cfg.endpoint,
            model=model,
            itl_ms=" ".join(f"{g:.3f}" for g in gaps) if gaps is not None else "",
            server_prompt_ms=srv_prompt_ms, server_tpot_ms=srv_tpot_ms,
            prompt_cached_tokens=cached_prompt_tokens(self.usage, self.timings,
                                                      checked.prompt_tokens),
            prompt_tokens_target=spec.prompt_tokens if spec is not None else None,
            output_tokens_target=max_tokens,
            prefix_id=spec.prefix_id if spec is not None and spec.prefix_id >= 0 else None,
            prefix_tokens_target=(spec.prefix_tokens if spec is not None and spec.prefix_id >= 0
                                  else None),
            pass_index=cfg.pass_of(index),
            stamp_source=self.stamp_source,
        )
