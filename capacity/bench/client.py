"""The benchmark client: closed-loop levels (or a seeded Poisson open loop) of streamed requests.

Connections: one `httpx.AsyncClient` with a single keep-alive connection per concurrent
request slot, made when a slot first needs one (so at most the highest concurrency, and no more
than the requests in flight), then handed out from an idle list. httpx's default
pool of 100 connections would silently cap a level of 150, and one shared pool of hundreds of
connections costs O(pool) work per request in httpcore: measured here, it delayed sends by up
to 2 s at concurrency 100 on 2 cores, where one connection per slot sends within tens of ms.
Timeouts are sized for long prefills: the read timeout is the per-stream stall limit
(`timeout_s`), there is no pool timeout, and each request has a deadline (`deadline_s`: the
stall limit plus one second per requested output token unless given), so a server that
trickles keep-alives cannot hold a slot for ever. Sizes are capped (docs/reliability.md):
an SSE line or event at 1 MiB, an error body at 64 KiB read, a non-streaming or /models body at
16 MiB, a stream at `stream_byte_limit`.

Every request ends as a `RequestRecord`; failures are recorded with an `error_type`, never
raised mid-run. Configuration errors (unreachable server, 401, unknown
model) raise BenchError before any measurement.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import platform
import random
import ssl
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpcore
import httpx
import numpy as np

from capacity.bench.findmax import FindMaxConfig, FindMaxResult, Search, judge, probe_requests
from capacity.bench.metrics import (
    CACHED_SHARE_WARNING,
    CLIENT_CPU_SHARE_LIMIT,
    CLIENT_LOOP_LAG_LIMIT_MS,
    ClientLoad,
    ErrorType,
    LevelSummary,
    RequestRecord,
    TokenSource,
    cached_prompt_tokens,
    cached_share,
    check_usage,
    pass_bounds,
    server_timings,
    span_s,
    summarize,
)
from capacity.bench.s3 import cache_dir as s3_cache_dir
from capacity.bench.s3 import is_s3, parse_url, push
from capacity.bench.sse import ChunkInfo, SseDecoder, SseTooLarge, classify, loads_json
from capacity.bench.stamped import StampedBackend
from capacity.bench.storage import (
    RunStatus,
    RunWriter,
    check_label,
    check_run_id,
    process_owner,
    redact,
    redact_record,
)
from capacity.errors import BenchError, InputError

if TYPE_CHECKING:
    from capacity.bench.workers import WorkerPool

Endpoint = Literal["chat", "completions"]

_FILLER_WORDS = (
    "capacity", "memory", "bandwidth", "compute", "token", "request", "latency", "throughput",
    "cache", "batch", "model", "server", "prefill", "decode", "context", "window", "planner",
    "budget", "cluster", "queue", "the", "of", "and", "a", "to", "in", "is", "for", "on", "with",
    "each", "every", "when", "how", "many", "which", "GPU", "card", "users", "peak",
)


@dataclass(frozen=True, kw_only=True)
class BenchLimits:
    """The largest sizes a run accepts (docs/reliability.md). Beyond them a run
    would exhaust the client's memory or never end, so they are refused before it starts:
    `capacity bench` with one line and exit 2 (`CLI_LIMITS`), the Measure page with its own,
    lower limits (`capacity.bench.job.PAGE_LIMITS`)."""

    concurrency: int = 10_000
    """Concurrent requests of one level."""
    levels: int = 64
    """Concurrency levels in one run."""
    requests: int = 1_000_000
    """Measured requests per level."""
    prompt_chars: int = 4_000_000
    """Prompt length in characters (about a million tokens)."""
    max_tokens: int = 1_000_000
    """Output tokens requested per request."""
    warmup: int = 1_000
    """Warm-up requests per level."""
    gpus: int = 65_536
    """GPUs behind the endpoint (for cost per token)."""
    timeout_s: float = 86_400.0
    """Stall limit per stream, seconds."""
    request_rate_rps: float = 100_000.0
    """Open-loop arrival rate, requests/s."""
    schedule_s: float = 86_400.0
    """Longest open-loop schedule of one level (requests / rate), seconds."""
    prompt_chars_in_flight: int = 1_000_000_000
    """Prompt characters the client holds at once (prompt chars x concurrent requests)."""

    def check(self, *, concurrency: Sequence[int], requests: int, prompt_chars: int,
              max_tokens: int, warmup: int, gpus: int, timeout_s: float,
              request_rate: float | None = None, flags: bool = True) -> None:
        """InputError naming the first value beyond a limit (`flags`: name the CLI's flags,
        else the page's fields)."""
        def name(flag: str) -> str:
            return flag if flags else flag.lstrip("-").replace("-", " ")

        def over(flag: str, value: float, limit: float, unit: str = "") -> InputError:
            def num(x: float) -> str:
                return str(x) if isinstance(x, int) else f"{x:g}"

            return InputError(f"{name(flag)} {num(value)}{unit} is above the limit of "
                              f"{num(limit)}{unit} (docs/reliability.md)")

        if len(concurrency) > self.levels:
            raise InputError(f"{name('--concurrency')}: {len(concurrency)} levels is more "
                             f"than the limit of {self.levels} (docs/reliability.md)")
        for flag, v, lim in (("--concurrency", max(concurrency, default=1), self.concurrency),
                             ("--requests", requests, self.requests),
                             ("--prompt-chars", prompt_chars, self.prompt_chars),
                             ("--max-tokens", max_tokens, self.max_tokens),
                             ("--warmup", warmup, self.warmup), ("--gpus", gpus, self.gpus)):
            if v > lim:
                raise over(flag, v, lim)
        if timeout_s > self.timeout_s:
            raise over("--timeout", timeout_s, self.timeout_s, " s")
        if request_rate is not None:
            if request_rate > self.request_rate_rps:
                raise over("--request-rate", request_rate, self.request_rate_rps, " requests/s")
            if requests / request_rate > self.schedule_s:
                raise InputError(
                    f"{name('--request-rate')} {request_rate:g} requests/s spreads "
                    f"{requests} requests over {requests / request_rate:,.0f} s, more than "
                    f"the limit of {self.schedule_s:g} s per level: raise the rate or lower "
                    f"{name('--requests')} (docs/reliability.md)")
        in_flight = prompt_chars * min(max(concurrency, default=1), max(requests, warmup, 1))
        if in_flight > self.prompt_chars_in_flight:
            raise InputError(
                f"{name('--prompt-chars')} x concurrent requests = {in_flight:,} characters "
                f"held at once, above the limit of {self.prompt_chars_in_flight:,}: lower "
                f"{name('--prompt-chars')} or {name('--concurrency')} "
                "(docs/reliability.md)")


CLI_LIMITS = BenchLimits()
"""`capacity bench`'s limits."""
SEED_MAX = 2**32 - 1
MAX_SHARDS = 1024
"""Most shards (client machines) of one run (`--shard i/N`)."""
MAX_WORKERS = 256
"""Most client worker processes of one run (`--workers`)."""
MAX_PASSES = 16
"""Most passes through a run's levels (`BenchConfig.passes`)."""


@dataclass(frozen=True, kw_only=True)
class RequestSpec:
    """What one request of a workload carries (`--workload`, `--replay`, `--prompt-tokens`):
    request i of every level is `specs[i mod len(specs)]`."""

    prompt_tokens: int
    """Prompt tokens, the shared prefix included (sent as x `chars_per_token` characters)."""
    output_tokens: int
    """Output tokens asked for (`max_tokens`)."""
    prefix_id: int = -1
    """-1: no shared prefix (a unique nonce first); 0: the workload's system prompt; 1 + k:
    the history of conversation k. The prefix is the same text every time, so prefix caches
    hit (`prefix_text`)."""
    prefix_tokens: int = 0
    """Leading prompt tokens that are that shared prefix."""
    at_s: float | None = None
    """Arrival time: seconds from the start (`ArrivalMode.REPLAY`) or at 1 request/s, scaled
    by the level's rate (`ArrivalMode.SHAPE`); None: Poisson arrivals or a closed loop."""


class ArrivalMode(StrEnum):
    """Where an open loop's arrival times come from."""

    POISSON = "poisson"
    """Seeded Poisson arrivals at the level's rate (`arrival_schedule`)."""
    SHAPE = "shape"
    """The specs' `at_s`, drawn at 1 request/s from the workload's arrival process (bursts
    included), divided by the level's rate."""
    REPLAY = "replay"
    """The specs' `at_s` as they are: a log's own send times."""


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """Everything a run needs except the API key (which is passed on its own, never stored)."""

    base_url: str
    concurrency: tuple[int, ...] = (10,)
    requests: int = 100
    prompt_chars: int = 1000
    max_tokens: int = 128
    label: str = "bench"
    model: str | None = None
    endpoint: Endpoint = "chat"
    warmup: int = 1
    passes: int = 1
    """Times the run goes through its levels, each pass with its share of a level's
    `requests`, in alternating order (`pass_plan`): a machine that speeds up or slows down
    during the run then biases no level. Each level's summary pools its passes."""
    request_rate: float | None = None
    seed: int = 0
    ignore_eos: bool = True
    stream_usage: bool = True
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    timeout_s: float = 600.0
    request_deadline_s: float | None = None
    """Per-request deadline, s; None: `timeout_s` + 1 s per max token (`deadline_s`)."""
    connect_timeout_s: float = 10.0
    out_dir: str = "data/bench"
    gpu: str | None = None
    gpus: int = 1
    gpu_price: float | None = None
    currency: str | None = None
    predict_model: str | None = None
    workers: int = 1
    """Client processes, each with its own event loop (`capacity.bench.workers`); 1: this
    process alone."""
    shard_index: int = 0
    """This client's shard of the run, 0-based (`--shard i/N` is 1-based)."""
    shard_count: int = 1
    """Clients (machines) that run the benchmark together, each a shard."""
    run_id: str | None = None
    """The run's id, shared by its shards; None: a new one."""
    start_at_unix_s: float | None = None
    """When the first level starts (wall clock, so shards start together); None: at once."""
    specs: tuple[RequestSpec, ...] = ()
    """Per-request prompt and output lengths and prefixes (a workload); empty: every request
    has `prompt_chars` characters and `max_tokens`."""
    arrivals: ArrivalMode = ArrivalMode.POISSON
    chars_per_token: float = 4.0
    """Characters sent per prompt token of a spec (the simulated endpoint's default)."""
    workload: str | None = None
    """What the specs came from (a preset, a file, a log, prompt lengths), for meta.json."""

    def pass_of(self, index: int) -> int:
        """The pass (from 1) that measures request `index` of a level (`pass_bounds`)."""
        bounds = pass_bounds(self.requests, self.passes)
        return next((p for p in range(self.passes, 0, -1) if index >= bounds[p - 1]), 1)

    def spec(self, index: int) -> RequestSpec | None:
        """The spec of request `index` of a level, or None without a workload."""
        return self.specs[index % len(self.specs)] if self.specs else None

    def largest_prompt_chars(self) -> int:
        """Characters of the longest prompt a request of this run sends."""
        if not self.specs:
            return self.prompt_chars
        return max(self.spec_chars(s)[0] for s in self.specs)

    def largest_output_tokens(self) -> int:
        """`max_tokens` of the request asking for the most."""
        return max((s.output_tokens for s in self.specs), default=self.max_tokens)

    def spec_chars(self, spec: RequestSpec) -> tuple[int, int]:
        """(prompt characters, of which the shared prefix's) of a spec's request."""
        total = max(1, math.ceil(spec.prompt_tokens * self.chars_per_token))
        prefix = (min(total - 1, math.ceil(spec.prefix_tokens * self.chars_per_token))
                  if spec.prefix_id >= 0 and spec.prefix_tokens > 0 else 0)
        return total, max(0, prefix)

    def validate(self, limits: BenchLimits = CLI_LIMITS) -> None:
        """InputError naming the first impossible or out-of-limit value."""
        if not self.base_url.startswith(("http://", "https://")):
            raise InputError(f"--base-url must start with http:// or https://, got "
                             f"'{self.base_url}' (e.g. http://127.0.0.1:8000/v1)")
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            raise InputError("--concurrency needs whole numbers >= 1, e.g. 10,50,100")
        for name, v in (("--requests", self.requests), ("--max-tokens", self.max_tokens),
                        ("--prompt-chars", self.prompt_chars), ("--gpus", self.gpus)):
            if v < 1:
                raise InputError(f"{name} must be >= 1, got {v}")
        if self.warmup < 0:
            raise InputError(f"--warmup must be >= 0, got {self.warmup}")
        if not 1 <= self.passes <= MAX_PASSES:
            raise InputError(f"--passes must be between 1 and {MAX_PASSES}, got {self.passes}")
        if self.passes > self.requests:
            raise InputError(f"--passes {self.passes} needs at least {self.passes} --requests "
                             f"(each pass measures its share of a level's requests), got "
                             f"{self.requests}")
        if self.passes > 1 and len(set(self.concurrency)) < len(self.concurrency):
            raise InputError("--passes measures each level in every pass: give each "
                             "concurrency once")
        if not (math.isfinite(self.chars_per_token) and 0.5 <= self.chars_per_token <= 64):
            raise InputError(f"--chars-per-token must be in 0.5..64, got {self.chars_per_token}")
        for sp in self.specs:
            if sp.prompt_tokens < 1 or sp.output_tokens < 1 or sp.prefix_tokens < 0 \
                    or sp.prefix_tokens > sp.prompt_tokens:
                raise InputError(f"a workload request needs >= 1 prompt and output tokens and "
                                 f"a prefix within its prompt, got {sp.prompt_tokens} prompt, "
                                 f"{sp.output_tokens} output, {sp.prefix_tokens} prefix tokens")
        if self.arrivals != ArrivalMode.POISSON and (
                len(self.specs) < self.requests or any(sp.at_s is None for sp in self.specs)):
            raise InputError("arrival times from a workload need one spec with a time per "
                             "request")
        if self.request_rate is not None and not (math.isfinite(self.request_rate)
                                                  and self.request_rate > 0):
            raise InputError(f"--request-rate must be > 0 requests/s, got {self.request_rate}")
        for name, x in (("--timeout", self.timeout_s), ("--slo-ttft-ms", self.slo_ttft_ms),
                        ("--slo-tpot-ms", self.slo_tpot_ms), ("--gpu-price", self.gpu_price)):
            if x is not None and not (math.isfinite(x) and x > 0 or
                                      (name == "--gpu-price" and x == 0)):
                raise InputError(f"{name} must be > 0, got {x}")
        if self.request_deadline_s is not None and not (math.isfinite(self.request_deadline_s)
                                                        and self.request_deadline_s > 0):
            raise InputError(f"--request-deadline-s must be > 0 s, got "
                             f"{self.request_deadline_s}")
        if not 0 <= self.shard_index < self.shard_count <= MAX_SHARDS:
            raise InputError(f"--shard must be i/N with 1 <= i <= N <= {MAX_SHARDS}, got "
                             f"{self.shard_index + 1}/{self.shard_count}")
        if self.shard_count > 1 and self.run_id is None:
            raise InputError("--shard needs --run-id ID, the same on every shard")
        if self.run_id is not None:
            check_run_id(self.run_id)
        if is_s3(self.out_dir):
            parse_url(self.out_dir)
        if not 1 <= self.workers <= MAX_WORKERS:
            raise InputError(f"--workers must be between 1 and {MAX_WORKERS}, got {self.workers}")
        if not 0 <= self.seed <= SEED_MAX:
            raise InputError(f"--seed must be between 0 and {SEED_MAX}, got {self.seed}")
        limits.check(concurrency=self.concurrency, requests=self.requests,
                     prompt_chars=self.largest_prompt_chars(),
                     max_tokens=self.largest_output_tokens(),
                     warmup=self.warmup, gpus=self.gpus, timeout_s=self.timeout_s,
                     request_rate=self.request_rate)
        check_label(self.label)

    def deadline_s(self) -> float:
        """Per-request deadline, s: `request_deadline_s`, else the stall limit (time allowed
        before the first byte) plus DEADLINE_S_PER_TOKEN per requested output token."""
        if self.request_deadline_s is not None:
            return self.request_deadline_s
        return self.timeout_s + DEADLINE_S_PER_TOKEN * self.largest_output_tokens()


DEADLINE_S_PER_TOKEN = 1.0
"""Default deadline allowance per requested output token, s (1 token/s: far below any server)."""
MAX_ERROR_BODY_BYTES = 64 << 10
"""Bytes of an error (non-2xx) body read for its message; the rest is not read."""
MAX_BODY_BYTES = 16 << 20
"""Largest non-streaming answer or /models body read, bytes (16 MiB); beyond: `too_large`."""


def stream_byte_limit(max_tokens: int) -> int:
    """Most bytes one streamed answer may take: 16 MiB + 64 KiB per requested token (an
    OpenAI chunk of one token is ~200 bytes); beyond: `too_large`."""
    return MAX_BODY_BYTES + (64 << 10) * max_tokens


async def _read_capped(resp: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of the body, and whether there was more (left unread)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(parts)[:limit], True
    return b"".join(parts), False


def _retry_after(resp: httpx.Response) -> str:
    """', retry after N s' from a Retry-After header (seconds or an HTTP date), else ''."""
    value = _short(resp.headers.get("retry-after", ""), 40)
    if not value:
        return ""
    return f", retry after {value} s" if value.isdigit() else f", retry after {value}"


def http_error_message(resp: httpx.Response, text: str) -> str:
    """The error_message of a non-2xx answer: the status, what it means, the body's start."""
    code = resp.status_code
    if 300 <= code < 400:
        where = _short(resp.headers.get("location", "?"), 120)
        return (f"HTTP {code}: redirect to {where}; capacity does not follow redirects "
                "(use the final URL as --base-url)")
    if code == 429:
        return f"HTTP 429: rate limited{_retry_after(resp)}: {_short(text)}"[:200]
    return f"HTTP {code}: {_short(text)}"


@dataclass(kw_only=True)
class _Compat:
    """Optional request fields, dropped for the rest of the run once the server rejects them."""

    stream_options: bool
    ignore_eos: bool
    dropped: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    run_id: str
    run_dir: str
    model: str
    summaries: tuple[LevelSummary, ...]
    warnings: tuple[str, ...]
    find_max: FindMaxResult | None = None
    """`--find-max`'s answer (None for a run of fixed levels)."""


def make_filler(chars: int, seed: int) -> str:
    """Deterministic English-like filler text of exactly `chars` characters."""
    rng = random.Random(seed)
    parts: list[str] = []
    n = 0
    while n < chars:
        w = rng.choice(_FILLER_WORDS)
        parts.append(w)
        n += len(w) + 1
    return " ".join(parts)[:chars]


def make_prompt(nonce: str, filler: str, chars: int) -> str:
    """A prompt of `chars` characters that STARTS with a unique nonce (defeats prefix caches).

    The nonce goes in as given; callers pass `request_nonce`, which differs from the first
    character on. A nonce that began with the run's id would share that id's tokens with every
    other prompt, and llama.cpp's slots (longest common prefix) and SGLang's radix cache (page
    size 1) reuse a shared start of any length: measured on llama-server, 37 of a 202-token
    prompt came from the cache, so TTFT read 18% short of the prompt's real prefill."""
    head = f"{nonce}: "
    if len(head) >= chars:
        return head[:chars] if chars >= len(nonce) + 2 else head
    return head + filler[: chars - len(head)]


def request_nonce(run_part: str, request_part: str) -> str:
    """A request's nonce: 12 hex digits of a hash of both parts first (unique per request from
    the first character), then the readable request part (`3c2a...91 c8-5`)."""
    digest = hashlib.blake2b(f"{run_part}/{request_part}".encode(), digest_size=6).hexdigest()
    return f"{digest} {request_part}"


def _auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _short(text: str, limit: int = 200) -> str:
    return " ".join(text.split())[:limit]


class _OneWriteStream(httpcore.AsyncNetworkStream):
    """A connection that sends a request in one socket write.

    httpcore writes the headers and the body separately, and anyio's socket yields to the
    event loop after every write: with a hundred streams in flight the body then left a
    whole loop round (tens of ms at concurrency 100) after the headers, i.e. after our start
    clock, and a real server cannot start a request before its body. Writes are buffered
    here and flushed together on the next read (httpcore always reads the response after
    sending the request), so the request leaves in the same loop turn as the start
    timestamp.
    """

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._pending: list[bytes] = []
        self._timeout: float | None = None

    async def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            await self._inner.write(data, timeout=self._timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            self._pending.append(buffer)
            self._timeout = timeout

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        await self._flush()
        return await self._inner.read(max_bytes, timeout=timeout)

    async def aclose(self) -> None:
        self._pending.clear()
        await self._inner.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        await self._flush()
        return _OneWriteStream(await self._inner.start_tls(ssl_context, server_hostname,
                                                           timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)

    @property
    def last_arrival_ns(self) -> int | None:
        """When the bytes last read reached the socket (`StampedStream`), else None."""
        return getattr(self._inner, "last_arrival_ns", None)


class _OneWriteBackend(httpcore.AsyncNetworkBackend):
    """The chunk-stamping backend (`capacity.bench.stamped`), or `inner`, with
    `_OneWriteStream` connections."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._inner = inner or StampedBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        return _OneWriteStream(await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address,
            socket_options=socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        return _OneWriteStream(await self._inner.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def one_write_transport(tls: ssl.SSLContext, keepalive_expiry_s: float | None = 5.0
                        ) -> httpx.AsyncHTTPTransport:
    """An httpx transport with one connection whose requests leave in one write.

    httpx takes no network backend, so its pool is replaced by the same httpcore pool it
    would build (one connection, kept alive) on `_OneWriteBackend`.
    """
    transport = httpx.AsyncHTTPTransport(verify=tls, trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=tls, max_connections=1, max_keepalive_connections=1,
        keepalive_expiry=keepalive_expiry_s, network_backend=_OneWriteBackend())
    return transport


class _ClientPool:
    """One-connection clients handed out per request slot, made when first needed: a level
    of C concurrent requests makes at most min(C, requests in flight) clients, never one per
    slot up front (a level of 10^9 would otherwise build 10^9 clients before measuring)."""

    def __init__(self, stack: contextlib.AsyncExitStack,
                 make: Callable[[], httpx.AsyncClient]) -> None:
        self._stack = stack
        self._make = make
        self._idle: list[httpx.AsyncClient] = []
        self.made = 0

    async def get(self) -> httpx.AsyncClient:
        if self._idle:
            return self._idle.pop()
        self.made += 1
        return await self._stack.enter_async_context(self._make())

    def put(self, client: httpx.AsyncClient) -> None:
        self._idle.append(client)


def client_pool(stack: contextlib.AsyncExitStack, cfg: BenchConfig,
                transport: httpx.AsyncBaseTransport | None = None) -> _ClientPool:
    """The one-connection clients of a process, closed with `stack`."""
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    timeout = httpx.Timeout(connect=cfg.connect_timeout_s, read=cfg.timeout_s, write=30.0,
                            pool=None)
    tls = ssl.create_default_context()  # one context shared by every client (cheap to make)
    return _ClientPool(stack, lambda: httpx.AsyncClient(
        limits=limits, timeout=timeout, verify=tls, trust_env=False,
        transport=transport or one_write_transport(tls, limits.keepalive_expiry),
        follow_redirects=False))


class _Runner:
    def __init__(self, cfg: BenchConfig, api_key: str | None, clients: _ClientPool,
                 model: str, writer: RunWriter | None, emit: Callable[[str], None], *,
                 run_id: str | None = None, worker_id: int = 0) -> None:
        self.cfg = cfg
        self.clients = clients
        self.secrets = (api_key,) if api_key else ()
        self.model = model
        self.writer = writer
        self.emit = emit
        self.headers = _auth_headers(api_key)
        self.url = cfg.base_url.rstrip("/") + ("/chat/completions" if cfg.endpoint == "chat"
                                               else "/completions")
        self.compat = _Compat(stream_options=cfg.stream_usage, ignore_eos=cfg.ignore_eos)
        self.filler = make_filler(cfg.largest_prompt_chars(), cfg.seed)
        self._prefixes: dict[tuple[int, int], str] = {}
        self.run_id = run_id or (writer.run_id if writer else "dry")
        self.worker_id = worker_id
        self.lag: list[float] | None = None
        """The event-loop lag samples of the level under way (ms), or None when not sampled."""
        self._nonce_base = (f"{self.run_id}-{worker_id}-"
                            f"{random.Random().getrandbits(32):08x}")

    def prefix_text(self, prefix_id: int, chars: int) -> str:
        """The shared prefix `prefix_id` as `chars` characters of text: the same text for
        every request of the run that names it (a shorter one is the start of a longer one,
        as a conversation's history grows), so prefix caches hit."""
        key = (prefix_id, chars)
        if key not in self._prefixes:
            if len(self._prefixes) > 4096:
                self._prefixes.clear()
            head = f"[shared prefix {prefix_id}] "
            self._prefixes[key] = (head + make_filler(chars, self.cfg.seed * 1_000_003
                                                      + prefix_id + 1))[:chars]
        return self._prefixes[key]

    def body(self, prompt: str, *, prefix: str = "", max_tokens: int | None = None
             ) -> dict[str, Any]:
        """The request's JSON; a shared `prefix` leads the prompt: as the system message
        (chat: templates put it first, so the engine sees the same leading text) or as the
        prompt's start (completions)."""
        b: dict[str, Any] = {"model": self.model,
                             "max_tokens": max_tokens or self.cfg.max_tokens, "stream": True}
        if self.cfg.endpoint == "chat":
            b["messages"] = ([{"role": "system", "content": prefix}] if prefix else []) + [
                {"role": "user", "content": prompt}]
        else:
            b["prompt"] = prefix + prompt
        if self.compat.stream_options:
            b["stream_options"] = {"include_usage": True}
        if self.compat.ignore_eos:
            b["ignore_eos"] = True
        return b

    def _drop_for(self, message: str) -> bool:
        """After a 400/422: drop the optional field the server objects to; False if none."""
        msg = message.lower()
        dropped = False
        if self.compat.ignore_eos and "ignore_eos" in msg:
            self.compat.ignore_eos = False
            self.compat.dropped.append("ignore_eos")
            dropped = True
        if self.compat.stream_options and ("stream_options" in msg or not dropped):
            self.compat.stream_options = False
            self.compat.dropped.append("stream_options")
            dropped = True
        return dropped

    async def one(self, *, level: int, rate: float | None, index: int, due_ns: int,
                  tag: str) -> RequestRecord:
        lag = self.lag
        mark = len(lag) if lag is not None else 0
        client = await self.clients.get()
        try:
            rec = await self._one(client, level=level, rate=rate, index=index, due_ns=due_ns,
                                  tag=tag)
        finally:
            self.clients.put(client)
        rec = replace(rec, worker_id=self.worker_id,
                      loop_lag_ms=max(lag[mark:], default=0.0) if lag is not None else None)
        return redact_record(rec, self.secrets)  # server text may echo the key

    async def _one(self, client: httpx.AsyncClient, *, level: int, rate: float | None,
                   index: int, due_ns: int, tag: str) -> RequestRecord:
        spec = self.cfg.spec(index)
        max_tokens = spec.output_tokens if spec is not None else self.cfg.max_tokens
        prefix = ""
        nonce = request_nonce(self._nonce_base, f"{tag}{level}-{index}")
        if spec is not None:
            chars, prefix_chars = self.cfg.spec_chars(spec)
            if prefix_chars:
                prefix = self.prefix_text(spec.prefix_id, prefix_chars)
            prompt = make_prompt(nonce, self.filler, chars - prefix_chars)
        else:
            prompt = make_prompt(nonce, self.filler, self.cfg.prompt_chars)
        for attempt in (0, 1):
            body = self.body(prompt, prefix=prefix, max_tokens=max_tokens)
            start_ns = time.perf_counter_ns()
            start_unix = time.time()
            st = _StreamState()
            deadline = self.cfg.deadline_s()
            try:
                async with (asyncio.timeout(deadline),
                            client.stream("POST", self.url, json=body, headers=self.headers,
                                          extensions={"trace": st.trace}) as resp):
                    st.status = resp.status_code
                    if not 200 <= resp.status_code < 300:
                        raw, _ = await _read_capped(resp, MAX_ERROR_BODY_BYTES)
                        text = raw.decode("utf-8", errors="replace")
                        if (attempt == 0 and resp.status_code in (400, 422)
                                and self._drop_for(text)):
                            continue
                        st.fail(ErrorType.HTTP_ERROR, http_error_message(resp, text))
                    elif "text/event-stream" not in resp.headers.get("content-type", ""):
                        await self._not_streaming(resp, st, start_ns)
                    else:
                        dec = SseDecoder()
                        left = stream_byte_limit(max_tokens)
                        # each chunk is stamped when its bytes reached the socket, not when
                        # this task gets its turn (capacity.bench.stamped)
                        wire = resp.extensions.get("network_stream")
                        async for chunk in resp.aiter_bytes():
                            now = getattr(wire, "last_arrival_ns", None) or time.perf_counter_ns()
                            left -= len(chunk)
                            if left < 0:
                                raise SseTooLarge(f"a stream of more than "
                                                  f"{stream_byte_limit(max_tokens)} "
                                                  "bytes")
                            for ev in dec.feed(chunk):
                                st.on(classify(ev.data, ev.event), now)
                        now = time.perf_counter_ns()
                        for ev in dec.close():
                            st.on(classify(ev.data, ev.event), now)
            except TimeoutError:
                st.fail(ErrorType.TIMEOUT, f"the request passed its deadline of {deadline:g} s "
                        "(--request-deadline-s)")
            except SseTooLarge as exc:
                st.fail(ErrorType.TOO_LARGE, str(exc))
            except httpx.TimeoutException as exc:
                st.fail(ErrorType.TIMEOUT, f"{type(exc).__name__}: no bytes for {self.cfg.timeout_s:g} s"
                        if isinstance(exc, httpx.ReadTimeout) else f"{type(exc).__name__}")
            except httpx.ConnectError as exc:
                st.fail(ErrorType.CONNECT_ERROR, _short(str(exc)) or "cannot connect")
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                if (attempt == 0 and st.status is None and st.events == 0
                        and isinstance(exc, httpx.RemoteProtocolError | httpx.WriteError)):
                    # closed before any answer: llama-server sometimes closes a kept-alive
                    # connection after a streamed answer without saying so, and the next
                    # request on it never starts (the server hangs up before answering, or
                    # the request's write finds the socket closed); sent again once on a new
                    # connection
                    continue
                st.fail(ErrorType.DISCONNECTED, f"{type(exc).__name__}: {_short(str(exc))}")
            except httpx.HTTPError as exc:
                st.fail(ErrorType.CLIENT_ERROR, f"{type(exc).__name__}: {_short(str(exc))}")
            sent_ns = st.sent_ns or start_ns
            return st.record(self, level=level, rate=rate, index=index, start_ns=sent_ns,
                             start_unix=start_unix + (sent_ns - start_ns) / 1e9, due_ns=due_ns,
                             prompt_chars=len(prefix) + len(prompt), max_tokens=max_tokens,
                             spec=spec)
        raise AssertionError("unreachable: the retry loop always returns")  # pragma: no cover

    async def _not_streaming(self, resp: httpx.Response, st: _StreamState, start_ns: int
                             ) -> None:
        raw, more = await _read_capped(resp, MAX_BODY_BYTES)
        end = time.perf_counter_ns()
        st.last_event_ns = end
        if more:
            st.fail(ErrorType.TOO_LARGE, f"a non-streaming body of more than {MAX_BODY_BYTES} "
                    "bytes")
            return
        try:
            obj = loads_json(raw.decode("utf-8", errors="replace"))
            usage = obj.get("usage") if isinstance(obj, dict) else None
        except ValueError:
            usage = None
        if isinstance(usage, dict):
            st.usage = usage
        st.fail(ErrorType.NOT_STREAMING, "the server answered without streaming (content-type "
                f"{resp.headers.get('content-type', '?')}); TTFT cannot be measured")


class _StreamState:
    __slots__ = ("status", "first_chunk_ns", "token_ns", "usage", "finish", "done", "error",
                 "error_type", "response_id", "malformed", "events", "last_event_ns",
                 "sent_ns", "timings")

    def __init__(self) -> None:
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
        self.events = 0
        self.last_event_ns: int | None = None
        self.sent_ns: int | None = None
        self.timings: dict[str, Any] | None = None

    async def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpx trace hook: the moment the request's first byte is written to the socket.

        That is docs/bench.md's "start: just before the request is sent"; what came before it
        (building the request, taking a connection, the event loop's turn) is client-side
        waiting and goes to `queue_ms`, not into TTFT.
        """
        if event == "http11.send_request_headers.started" and self.sent_ns is None:
            self.sent_ns = time.perf_counter_ns()

    def fail(self, kind: ErrorType, message: str) -> None:
        if self.error_type is None:
            self.error_type, self.error = kind, message

    def on(self, info: ChunkInfo, now: int) -> None:
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
        if info.finish_reason:
            self.finish = info.finish_reason
        if info.usage is not None:
            self.usage = info.usage
        if info.timings is not None:
            self.timings = info.timings

    def record(self, r: _Runner, *, level: int, rate: float | None, index: int, start_ns: int,
               start_unix: float, due_ns: int, prompt_chars: int, max_tokens: int,
               spec: RequestSpec | None) -> RequestRecord:
        ms = 1e-6
        n_events = len(self.token_ns)
        checked = check_usage(self.usage, token_events=n_events, max_tokens=max_tokens,
                              prompt_chars=prompt_chars)
        out_tokens, source = checked.output_tokens, checked.source
        if self.error_type is None:
            if n_events == 0:
                self.fail(ErrorType.MALFORMED if self.malformed and self.events == self.malformed
                          else ErrorType.NO_TOKENS, f"no token-bearing event in {self.events} events"
                          + (f" ({self.malformed} malformed)" if self.malformed else ""))
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
            notes += [checked.note] if checked.note else []
            message = "; ".join(notes)[:200] or None
        return RequestRecord(
            run_id=r.run_id, label=r.cfg.label, concurrency=level, request_rate_rps=rate,
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
            error_message=message, http_status=self.status, endpoint=r.cfg.endpoint,
            model=r.model,
            itl_ms=" ".join(f"{g:.3f}" for g in gaps) if gaps is not None else "",
            server_prompt_ms=srv_prompt_ms, server_tpot_ms=srv_tpot_ms,
            prompt_cached_tokens=cached_prompt_tokens(self.usage, self.timings,
                                                      checked.prompt_tokens),
            prompt_tokens_target=spec.prompt_tokens if spec is not None else None,
            output_tokens_target=max_tokens,
            prefix_id=spec.prefix_id if spec is not None and spec.prefix_id >= 0 else None,
            prefix_tokens_target=(spec.prefix_tokens if spec is not None and spec.prefix_id >= 0
                                  else None),
            pass_index=r.cfg.pass_of(index),
        )


async def _lag_monitor(samples: list[float], stop: asyncio.Event, period_s: float = 0.01
                       ) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(period_s)
        # uvloop's timers have 1 ms resolution and may fire a little early: no lag, not less
        samples.append(max(0.0, (time.perf_counter() - t - period_s) * 1e3))


async def fetch_models(client: httpx.AsyncClient, base_url: str, api_key: str | None
                       ) -> dict[str, Any] | None:
    """The server's `/models` answer; BenchError for unreachable servers and 401/403."""
    url = base_url.rstrip("/") + "/models"
    try:
        async with client.stream("GET", url, headers=_auth_headers(api_key)) as resp:
            raw, more = await _read_capped(resp, MAX_BODY_BYTES)
    except httpx.ConnectError:
        raise BenchError(f"cannot reach {base_url}: is the server running? (check --base-url, "
                         "e.g. http://127.0.0.1:8000/v1)") from None
    except httpx.HTTPError as exc:
        raise BenchError(f"{url} failed: {type(exc).__name__} {_short(str(exc))}") from None
    if resp.status_code in (401, 403):
        raise BenchError(f"{url} answered {resp.status_code}: pass --api-key or set "
                         "OPENAI_API_KEY")
    if 300 <= resp.status_code < 400:
        raise BenchError(f"{url}: {http_error_message(resp, '')}")
    if resp.status_code >= 400 or more:
        return None
    try:
        answer = loads_json(raw.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def _first_model(models: dict[str, Any] | None) -> str | None:
    data = (models or {}).get("data")
    if isinstance(data, list) and data and isinstance(data[0], dict) and data[0].get("id"):
        return str(data[0]["id"])
    return None


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("capacity", "httpx", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "?"
    return out


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def run_bench(cfg: BenchConfig, api_key: str | None = None, *,
                    emit: Callable[[str], None] = _stderr,
                    transport: httpx.AsyncBaseTransport | None = None,
                    meta_extra: dict[str, Any] | None = None,
                    find_max: FindMaxConfig | None = None) -> BenchResult:
    """Run every level of `cfg`, writing the run's files as it goes; returns the summaries.
    With `find_max`, the levels are the probes of its search (`capacity.bench.findmax`), and
    the answer is in the result and meta.json's `find_max`.

    The API key is redacted (`capacity.bench.storage.redact`) from everything that leaves
    the client: stored rows and meta.json, the messages passed to `emit`, the errors raised
    and the result, even when the server echoes it back."""
    secrets = (api_key,) if api_key else ()

    def out(msg: str) -> None:
        emit(redact(msg, secrets))

    try:
        result = await _run_bench(cfg, api_key, emit=out, transport=transport,
                                  meta_extra=meta_extra, find_max=find_max)
    except (BenchError, InputError) as exc:
        clean = redact(str(exc), secrets)
        if clean == str(exc):
            raise
        raise type(exc)(clean) from None
    return replace(result, model=redact(result.model, secrets))


async def _run_bench(cfg: BenchConfig, api_key: str | None, *, emit: Callable[[str], None],
                     transport: httpx.AsyncBaseTransport | None,
                     meta_extra: dict[str, Any] | None,
                     find_max: FindMaxConfig | None = None) -> BenchResult:
    cfg.validate()
    if find_max is not None:
        find_max.validate()
        if cfg.passes > 1:
            raise InputError("--passes goes through fixed levels; --find-max picks its "
                             "loads as it goes: drop one of them")
    if transport is not None and cfg.workers > 1:
        raise InputError("a custom transport runs in this process only: use workers=1")
    warnings: list[str] = []
    async with contextlib.AsyncExitStack() as stack:
        clients = client_pool(stack, cfg, transport)
        first = await clients.get()
        models = await fetch_models(first, cfg.base_url, api_key)
        clients.put(first)
        model = cfg.model or _first_model(models)
        if model is None:
            raise BenchError(f"{cfg.base_url}/models lists no model: pass --model NAME")
        writer = RunWriter(_local_out(cfg.out_dir), cfg.label, run_id=cfg.run_id,
                           secrets=(api_key,) if api_key else (),
                           shard=(f"shard-{cfg.shard_index + 1}of{cfg.shard_count}"
                                  if cfg.shard_count > 1 else None))
        started = datetime.now(UTC).isoformat()
        meta: dict[str, Any] = {
            "run_id": writer.run_id, "label": cfg.label, "status": RunStatus.RUNNING.value,
            "started_at": started, "finished_at": None,
            # the specs are the workload's requests (up to millions): their count and source
            "args": {**asdict(replace(cfg, specs=())), "specs": len(cfg.specs)}, "model": model,
            "server_models": models, "versions": _versions(), "owner": process_owner(),
            "shard_index": cfg.shard_index + 1, "shard_count": cfg.shard_count,
            **(meta_extra or {}),
        }
        writer.write_meta(meta)
        runner = _Runner(cfg, api_key, clients, model, writer, emit)
        summaries: list[LevelSummary] = []
        parts: dict[int, list[_Part]] = {}  # the finished passes of levels not yet summarized
        pool: WorkerPool | None = None
        try:
            if cfg.workers > 1:
                from capacity.bench.workers import WorkerPool

                pool = WorkerPool(cfg, api_key, model=model, run_id=writer.run_id)
                await pool.start()
                emit(f"  {cfg.workers} worker processes started")
            if cfg.start_at_unix_s is not None:
                wait_s = cfg.start_at_unix_s - time.time()
                if wait_s > 0:
                    emit(f"  waiting {wait_s:.1f} s for --start-at")
                    await asyncio.sleep(wait_s)
                elif wait_s < -1.0:
                    w = f"started {-wait_s:.1f} s after --start-at"
                    warnings.append(w)
                    emit("warning: " + w)
            if find_max is not None:
                fm_result = await _find_max(runner, find_max, warnings, pool, summaries)
                meta["find_max"] = fm_result.meta(find_max)
            plan = pass_plan(cfg.concurrency, cfg.passes, cfg.requests) if find_max is None \
                else []
            for k, (p, level, share) in enumerate(plan):
                if p == 0 and cfg.requests < 3 * level:
                    # one rule, the documented one: a level's requests (all its passes) are
                    # 3-5x its concurrency (docs/bench.md)
                    w = (f"level {level}: {cfg.requests} requests < 3 x concurrency: one "
                         "burst, so ramp-up and tail dominate; use --requests "
                         f"{3 * level} or more")
                    warnings.append(w)
                    emit("warning: " + w)
                if cfg.warmup:
                    await _warmup(runner, level, first=k == 0)
                tag = f", pass {p + 1}/{cfg.passes}" if cfg.passes > 1 else ""
                parts.setdefault(level, []).append(
                    await _run_part(runner, level, pool, share=share, tag=tag))
                if p == cfg.passes - 1:
                    row = _level_summary(runner, level, parts.pop(level), warnings)
                    _store_level(runner, row, summaries)
            if cfg.passes > 1:  # the last pass ends with the first level: list them as given
                summaries.sort(key=lambda r: cfg.concurrency.index(r.concurrency))
            meta["status"] = RunStatus.FINISHED.value
        except BaseException:
            meta["status"] = RunStatus.INTERRUPTED.value
            _store_unfinished(runner, parts, warnings, summaries)
            raise
        finally:
            if pool is not None:
                pool.close(graceful=meta["status"] == RunStatus.FINISHED.value)
            meta["finished_at"] = datetime.now(UTC).isoformat()
            meta["dropped_fields"] = runner.compat.dropped
            meta["warnings"] = warnings
            writer.write_meta(meta)
            writer.close()
    if is_s3(cfg.out_dir):  # the Parquet copy last, so that it is not older than its CSV
        _push(writer, cfg, [writer.requests_path, writer.summary_path, writer.meta_path,
                            writer.dir / "requests.parquet"])
    if "ignore_eos" in runner.compat.dropped:
        warnings.append("the server rejected ignore_eos: output lengths may differ from "
                        "--max-tokens (see output_length_mismatch)")
    if "stream_options" in runner.compat.dropped:
        warnings.append("the server rejected stream_options: output tokens are counted from "
                        "chunks (a lower bound)")
    return BenchResult(run_id=writer.run_id, run_dir=str(writer.dir), model=model,
                       summaries=tuple(summaries), warnings=tuple(warnings),
                       find_max=fm_result if find_max is not None else None)


def _store_level(runner: _Runner, row: LevelSummary, summaries: list[LevelSummary]) -> None:
    """A level has ended: its summary row, the Parquet copy (and the upload)."""
    summaries.append(row)
    assert runner.writer is not None
    runner.writer.write_summary(row)
    _level_files(runner.writer, runner.cfg, runner.emit)


def _store_unfinished(runner: _Runner, parts: dict[int, list[_Part]], warnings: list[str],
                      summaries: list[LevelSummary]) -> None:
    """A run stopped between a level's passes (`--passes`): a summary row for each level that
    finished some of its passes but not its last, pooled from those, and a warning that says
    so. The stopped pass's answered requests are in requests.csv, not in any row."""
    for level, done in parts.items():
        if not done:
            continue
        try:
            _store_level(runner, _level_summary(runner, level, done, warnings), summaries)
        except Exception as exc:  # the run is failing already: keep its own error
            warnings.append(f"level {level}: its finished passes were not summarized ({exc})")
            continue
        w = (f"level {level}: the run stopped after {len(done)} of {runner.cfg.passes} "
             "passes; its summary row pools the passes it finished")
        warnings.append(w)
        runner.emit("warning: " + w)


async def _find_max(runner: _Runner, fm: FindMaxConfig, warnings: list[str],
                    pool: WorkerPool | None, summaries: list[LevelSummary]) -> FindMaxResult:
    """`--find-max`: probe loads as the search says (`capacity.bench.findmax.Search`), each
    probe a level of this run; an open loop's level is the run's largest concurrency (its
    cap), a closed loop's the probed concurrency."""
    cfg = runner.cfg
    search = Search(fm, requests_for=lambda x: probe_requests(fm, x, cfg.requests))
    t0 = time.monotonic()
    cap = max(cfg.concurrency)
    while (x := search.next_load(time.monotonic() - t0)) is not None:
        level, rate = (cap, x) if fm.by == "rate" else (int(x), None)
        n = probe_requests(fm, x, cfg.requests)
        if cfg.warmup and not summaries:
            await _warmup(runner, level, first=True)
        records: list[RequestRecord] = []
        t = time.monotonic()
        row = await _level(runner, level, warnings, pool, rate=rate, records_out=records,
                           requests=n)
        _store_level(runner, row, summaries)
        probe = judge(records, fm, load=x, duration_s=time.monotonic() - t)
        search.add(probe)

        def ms(v: float | None) -> str:
            return f"{v:.1f} ms" if v is not None else "-"

        runner.emit(f"  probe {x:.4g} {'req/s' if fm.by == 'rate' else 'in flight'}: "
                    f"p{fm.pct:g} TTFT {ms(probe.ttft_pct_ms)}, TPOT {ms(probe.tpot_pct_ms)}, "
                    f"{probe.failed} failed: {'meets' if probe.passed else 'misses'} the SLO")
    return search.result(time.monotonic() - t0)


def _local_out(out_dir: str) -> str:
    """Where a run's files are written: `out_dir`, or the local mirror of an s3:// one."""
    return str(s3_cache_dir(out_dir)) if is_s3(out_dir) else out_dir


def _push(writer: RunWriter, cfg: BenchConfig, files: list[Path]) -> None:
    """Upload a run's files to the s3:// out folder (in this order)."""
    push([f for f in files if f.exists()], Path(_local_out(cfg.out_dir)), cfg.out_dir)


def _level_files(writer: RunWriter, cfg: BenchConfig, emit: Callable[[str], None]) -> None:
    """After a level: a typed Parquet copy of every finished level's rows (requests.parquet,
    which the store reads while it is current), uploaded with the CSVs when --out is s3://."""
    from capacity.bench.store import compact_run  # DuckDB: imported once the first level ends
    from capacity.errors import StoreError

    try:
        compact_run(writer.dir)
    except StoreError as exc:
        emit(f"warning: stored as CSV only ({exc})")
    if is_s3(cfg.out_dir):
        _push(writer, cfg, [writer.requests_path, writer.summary_path, writer.meta_path,
                            writer.dir / "requests.parquet"])


async def _warmup(runner: _Runner, level: int, first: bool) -> None:
    n = runner.cfg.warmup
    sem = asyncio.Semaphore(level)

    async def one(i: int) -> RequestRecord:
        async with sem:
            return await runner.one(level=level, rate=None, index=i,
                                    due_ns=time.perf_counter_ns(), tag="w")

    recs = await asyncio.gather(*(one(i) for i in range(n)))
    if first and all(not r.success for r in recs):
        r = recs[0]
        if r.error_type == ErrorType.HTTP_ERROR and (
                r.http_status == 429 or 300 <= (r.http_status or 0) < 400):
            raise BenchError(f"the warm-up request failed: {r.error_message}")
        client_side = r.error_type == ErrorType.HTTP_ERROR and 400 <= (r.http_status or 0) < 500
        if client_side or r.error_type == ErrorType.CONNECT_ERROR:
            raise BenchError(f"the warm-up request failed: {r.error_message} "
                             "(check --model, --endpoint and --api-key)")
        runner.emit(f"warning: every warm-up request failed ({r.error_type}: "
                    f"{r.error_message})")


def arrival_schedule(cfg: BenchConfig, level: int, rate: float | None = None,
                     requests: int | None = None) -> list[float]:
    """The open loop's arrival times of one level, s after its start, at `rate` (default the
    run's `request_rate`): seeded Poisson arrivals (by `seed + level`, so a rerun and every
    worker see the same schedule), or the workload's own (`ArrivalMode`)."""
    rate = rate if rate is not None else cfg.request_rate
    n = requests or cfg.requests
    if cfg.arrivals == ArrivalMode.REPLAY:
        times = [float(sp.at_s or 0.0) for sp in cfg.specs[:n]]
        return [t - times[0] for t in times]
    assert rate is not None
    if cfg.arrivals == ArrivalMode.SHAPE:
        return [float(sp.at_s or 0.0) / rate for sp in cfg.specs[:n]]
    rng = np.random.default_rng(cfg.seed + level)
    return [float(a) for a in np.cumsum(rng.exponential(1.0 / rate, n))]


def pass_plan(levels: Sequence[int], passes: int, requests: int
              ) -> list[tuple[int, int, range]]:
    """The order a run measures its levels in: (pass, level, request indices), `passes` times
    through `levels`, forward, backward, forward... (1, 2, 4, 8, 8, 4, 2, 1 for two passes),
    each pass with its share of a level's `requests` (shares differ by one at most). A machine
    whose speed drifts during the run (another tenant, heat, a CPU's boost running out) then
    shifts every level alike instead of the last ones most: in two passes of equally long
    levels, each level's two halves sit symmetrically about the run's middle."""
    bounds = pass_bounds(requests, passes)
    return [(p, level, range(bounds[p], bounds[p + 1]))
            for p in range(passes)
            for level in (levels if p % 2 == 0 else tuple(reversed(levels)))]


@dataclass(frozen=True)
class _Part:
    """One pass of a level: its records and each client process's load."""

    records: list[RequestRecord]
    loads: dict[int, ClientLoad]


def _merge_loads(parts: Sequence[_Part]) -> dict[int, ClientLoad]:
    """Each process's load over a level's passes: CPU seconds add up, event-loop lag is the
    worst pass's."""
    out: dict[int, ClientLoad] = {}
    for part in parts:
        for wid, ld in part.loads.items():
            was = out.get(wid)
            out[wid] = ld if was is None else ClientLoad(
                cpu_s=was.cpu_s + ld.cpu_s,
                loop_lag_p50_ms=max(was.loop_lag_p50_ms, ld.loop_lag_p50_ms),
                loop_lag_p99_ms=max(was.loop_lag_p99_ms, ld.loop_lag_p99_ms))
    return out


async def _level(runner: _Runner, level: int, warnings: list[str],
                 pool: WorkerPool | None = None, *, rate: float | None = None,
                 records_out: list[RequestRecord] | None = None,
                 requests: int | None = None) -> LevelSummary:
    """Run one level in one go (open loop at `rate`, default the run's `request_rate`;
    `requests`, default the run's); its records are also appended to `records_out`."""
    part = await _run_part(runner, level, pool, share=range(requests or runner.cfg.requests),
                           rate=rate, records_out=records_out)
    return _level_summary(runner, level, [part], warnings, rate=rate)


async def _run_part(runner: _Runner, level: int, pool: WorkerPool | None, *, share: range,
                    rate: float | None = None, records_out: list[RequestRecord] | None = None,
                    tag: str = "") -> _Part:
    """Run the requests `share` (indices of the level's requests) of one level: all of it, or
    one pass's (`pass_plan`). Open loop: the level's arrival schedule from `share`'s first
    request on, timed from the arrival before it."""
    cfg = runner.cfg
    # a shard runs its share of the level: every shard_count-th request, from its index on,
    # and its part of the concurrency (the request indices stay the level's)
    first = share.start + (cfg.shard_index - share.start) % cfg.shard_count
    indices = range(first, share.stop, cfg.shard_count)
    slots = split_slots(level, cfg.shard_count)[cfg.shard_index]
    n = len(indices)
    records: list[RequestRecord] = records_out if records_out is not None else []
    step = max(1, n // 10)
    rate = rate if rate is not None else cfg.request_rate

    def done(rec: RequestRecord) -> None:
        records.append(rec)
        if runner.writer is not None:
            runner.writer.write_request(rec)
        k = len(records)
        if k % step == 0 or k == n:
            ok = [r for r in records if r.success]
            ttft = np.median([r.ttft_ms for r in ok if r.ttft_ms is not None]) if ok else math.nan
            tp = [r.tpot_ms for r in ok if r.tpot_ms is not None]
            tpot = np.median(tp) if tp else math.nan
            runner.emit(f"  concurrency {level}{tag}: {k}/{n} done, {k - len(ok)} failed, "
                        f"TTFT p50 {ttft:.1f} ms, TPOT p50 {tpot:.2f} ms")

    arrivals = None
    if rate is not None:
        schedule = arrival_schedule(cfg, level, rate, share.stop)
        t0_s = schedule[share.start - 1] if share.start > 0 else 0.0
        arrivals = [(i, schedule[i] - t0_s) for i in indices]
    if pool is not None:
        loads = await pool.run_level(level=level, slots=slots, indices=indices, rate=rate,
                                     arrivals=arrivals, compat=runner.compat, on_record=done)
    else:
        loads = {0: await drive_level(runner, level=level, slots=slots, requests=n, rate=rate,
                                      arrivals=arrivals or [],
                                      t0_ns=time.perf_counter_ns(), take=iter(indices),
                                      done=done)}
    return _Part(records=records, loads=loads)


def _level_summary(runner: _Runner, level: int, parts: Sequence[_Part], warnings: list[str],
                   *, rate: float | None = None) -> LevelSummary:
    """The summary row of a level from its passes (their records pooled; the level ran for
    the sum of their spans), with the client-bound and prefix-cache warnings."""
    cfg = runner.cfg
    rate = rate if rate is not None else cfg.request_rate
    records = [r for part in parts for r in part.records]
    loads = _merge_loads(parts)
    row = summarize(records, run_id=runner.run_id, label=cfg.label, concurrency=level,
                    request_rate_rps=rate, endpoint=cfg.endpoint, model=runner.model,
                    slo_ttft_ms=cfg.slo_ttft_ms, slo_tpot_ms=cfg.slo_tpot_ms,
                    load=loads[0] if len(loads) == 1 else None, gpu=cfg.gpu,
                    gpus=cfg.gpus, gpu_price_per_hour=cfg.gpu_price, currency=cfg.currency,
                    duration_s=sum(span_s(part.records) for part in parts))
    if len(loads) > 1:
        row = judge_workers(row, loads)
    if row.client_bound:
        w = (f"level {level}: the client may be the bottleneck ({row.client_bound_reason}); "
             "numbers at this level understate the server")
        warnings.append(w)
        runner.emit("warning: " + w)
    share = cached_share(records)
    if share is not None and share > CACHED_SHARE_WARNING:
        w = (f"level {level}: the server took {share:.0%} of the prompt tokens from its prefix "
             "cache (prompt_cached_tokens): TTFT here is shorter than a cold prefill's")
        warnings.append(w)
        runner.emit("warning: " + w)
    return row


def split_slots(level: int, parts: int) -> list[int]:
    """A level's concurrency split over workers or shards: as even as can be, the first ones
    get one more (`[3, 3, 2]` for 8 over 3)."""
    base, extra = divmod(level, parts)
    return [base + (1 if w < extra else 0) for w in range(parts)]


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


async def drive_level(runner: _Runner, *, level: int, slots: int, requests: int,
                      rate: float | None, arrivals: Sequence[tuple[int, float]], t0_ns: int,
                      take: Iterator[int], done: Callable[[RequestRecord], None]) -> ClientLoad:
    """Run one process's part of a level (`level`: the level's concurrency, stored in the
    records): `slots` streams at once (closed loop: each takes the next request index from
    `take` until it runs dry, the credits; open loop: `arrivals`, pairs of request index and
    seconds after `t0_ns`); every record goes to `done`. Returns the process's load (CPU and
    event-loop lag) over the level."""
    lag: list[float] = []
    stop = asyncio.Event()
    monitor = asyncio.create_task(_lag_monitor(lag, stop))
    runner.lag = lag
    cpu0 = time.process_time()
    try:
        if rate is None:
            async def slot() -> None:
                for i in take:
                    due = time.perf_counter_ns()
                    done(await runner.one(level=level, rate=None, index=i, due_ns=due, tag=""))

            await asyncio.gather(*(slot() for _ in range(min(slots, requests))))
        else:
            sem = asyncio.Semaphore(max(1, slots))

            async def arrival(i: int, at_s: float) -> None:
                due = t0_ns + int(at_s * 1e9)
                delay = (due - time.perf_counter_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                async with sem:
                    done(await runner.one(level=level, rate=rate, index=i, due_ns=due, tag=""))

            await asyncio.gather(*(arrival(i, a) for i, a in arrivals))
    finally:
        cpu = time.process_time() - cpu0
        stop.set()
        await monitor
        runner.lag = None
    lag_p50, lag_p99 = (float(x) for x in np.percentile(lag, [50, 99])) if lag else (0.0, 0.0)
    return ClientLoad(cpu_s=cpu, loop_lag_p50_ms=lag_p50, loop_lag_p99_ms=lag_p99)


def run_bench_sync(cfg: BenchConfig, api_key: str | None = None, **kw: Any) -> BenchResult:
    """`asyncio.run(run_bench(...))`."""
    return asyncio.run(run_bench(cfg, api_key, **kw))


def summary_table_rows(summaries: Sequence[LevelSummary]) -> list[list[object]]:
    """Rows of the end-of-run table (one per level)."""
    return [[s.concurrency, s.requests_ok, s.requests_failed, s.ttft_p50_ms, s.ttft_p99_ms,
             s.tpot_p50_ms, s.tpot_p99_ms, s.output_tok_s, s.achieved_concurrency,
             s.cost_per_mtok] for s in summaries]


SUMMARY_TABLE_HEADERS = ("concurrency", "ok", "failed", "TTFT p50 ms", "TTFT p99 ms",
                         "TPOT p50 ms", "TPOT p99 ms", "output tok/s", "achieved conc.",
                         "cost per M tok")
