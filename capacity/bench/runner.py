"""The request runner: what one client process sends, and how it drives its part of a level.

`Runner` builds each request (a prompt that starts with a unique nonce, or a workload's shared
prefix; `make_prompt`), sends it on a connection of its `ClientPool`, follows the stream
(`capacity.bench.stream.StreamState`) and returns its `RequestRecord`: every request ends as a
record, failures with an `error_type`, never raised mid-run. Each request has a deadline
(`BenchConfig.deadline_s`: the stall limit plus one second per requested output token unless
given), so a server that trickles keep-alives cannot hold a slot for ever. Optional request
fields a server rejects are dropped for the rest of the run (`Compat`).

`drive_level` runs one process's part of a level, a closed loop of slots or an open loop of
arrivals, and measures the process's load (CPU time, event-loop lag); the orchestration
(`capacity.bench.client`) and the worker processes (`capacity.bench.workers`) both call it.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import numpy as np

from capacity.bench.config import BenchConfig
from capacity.bench.metrics import ClientLoad, ErrorType, RequestRecord
from capacity.bench.sse import ChunkReader, SseDecoder, SseTooLarge
from capacity.bench.storage import RunWriter, redact_record, run_secrets
from capacity.bench.stream import StreamState
from capacity.bench.transport import (
    MAX_BODY_BYTES,
    MAX_ERROR_BODY_BYTES,
    ClientPool,
    auth_headers,
    http_error_message,
    read_capped,
    short_text,
    stream_byte_limit,
)
from capacity.untrusted import loads_json

SEND_LEAD_S = 0.05
"""Open loop on the client's own connections: how long before its due time a request is
built and given a connection (s); the pool's send clock then writes it at the due time. It
covers the event loop's rounds of parsing under load (a few ms at 1,000 streams) and a new
connection's set-up."""

_FILLER_WORDS = (
    "capacity", "memory", "bandwidth", "compute", "token", "request", "latency", "throughput",
    "cache", "batch", "model", "server", "prefill", "decode", "context", "window", "planner",
    "budget", "cluster", "queue", "the", "of", "and", "a", "to", "in", "is", "for", "on", "with",
    "each", "every", "when", "how", "many", "which", "GPU", "card", "users", "peak",
)


@dataclass(kw_only=True)
class Compat:
    """Optional request fields, dropped for the rest of the run once the server rejects them."""

    stream_options: bool
    ignore_eos: bool
    dropped: list[str] = field(default_factory=list)


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


class Runner:
    """Sends one process's requests of a run (`one`), each on a connection of `clients`,
    and records them; `writer` None: the records go back to the caller only (a worker)."""

    def __init__(self, cfg: BenchConfig, api_key: str | None, clients: ClientPool,
                 model: str, writer: RunWriter | None, emit: Callable[[str], None], *,
                 run_id: str | None = None, worker_id: int = 0) -> None:
        self.cfg = cfg
        self.clients = clients
        self.secrets = run_secrets(api_key, cfg.base_url)
        self.model = model
        self.writer = writer
        self.emit = emit
        self.headers = auth_headers(api_key)
        self.path = "/chat/completions" if cfg.endpoint == "chat" else "/completions"
        self.url = cfg.base_url.rstrip("/") + self.path
        self.compat = Compat(stream_options=cfg.stream_usage, ignore_eos=cfg.ignore_eos)
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
        if self.clients.wire is not None:  # the client's own connections (`_via_wire`)
            rec = await self._one(None, level=level, rate=rate, index=index, due_ns=due_ns,
                                  tag=tag)
        else:
            client = await self.clients.get()
            try:
                rec = await self._one(client, level=level, rate=rate, index=index,
                                      due_ns=due_ns, tag=tag)
            finally:
                self.clients.put(client)
        rec = replace(rec, worker_id=self.worker_id,
                      loop_lag_ms=max(lag[mark:], default=0.0) if lag is not None else None)
        return redact_record(rec, self.secrets)  # server text may echo the key

    async def _one(self, client: httpx.AsyncClient | None, *, level: int, rate: float | None,
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
            st = StreamState(max_tokens)
            deadline = self.cfg.deadline_s()
            try:
                async with asyncio.timeout(deadline):
                    if client is None:
                        again = await self._via_wire(
                            body, st, max_tokens, attempt,
                            at_ns=due_ns if rate is not None and attempt == 0 else None)
                    else:
                        again = await self._via_httpx(client, body, st, max_tokens, attempt)
                if again:
                    continue
            except TimeoutError:
                st.fail(ErrorType.TIMEOUT, f"the request passed its deadline of {deadline:g} s "
                        "(--request-deadline-s)")
            except SseTooLarge as exc:
                st.fail(ErrorType.TOO_LARGE, str(exc))
            except httpx.TimeoutException as exc:
                st.fail(ErrorType.TIMEOUT, f"{type(exc).__name__}: no bytes for {self.cfg.timeout_s:g} s"
                        if isinstance(exc, httpx.ReadTimeout) else f"{type(exc).__name__}")
            except httpx.ConnectError as exc:
                st.fail(ErrorType.CONNECT_ERROR, short_text(str(exc)) or "cannot connect")
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                if (attempt == 0 and st.status is None and st.events == 0
                        and isinstance(exc, httpx.RemoteProtocolError | httpx.WriteError)):
                    # closed before any answer: llama-server sometimes closes a kept-alive
                    # connection after a streamed answer without saying so, and the next
                    # request on it never starts (the server hangs up before answering, or
                    # the request's write finds the socket closed); sent again once on a new
                    # connection
                    continue
                st.fail(ErrorType.DISCONNECTED, f"{type(exc).__name__}: {short_text(str(exc))}")
            except httpx.DecodingError as exc:   # a body that is not its content-encoding
                st.fail(ErrorType.MALFORMED, short_text(str(exc)))
            except httpx.HTTPError as exc:
                st.fail(ErrorType.CLIENT_ERROR, f"{type(exc).__name__}: {short_text(str(exc))}")
            sent_ns = st.sent_ns or start_ns
            return st.record(self.cfg, run_id=self.run_id, model=self.model, level=level,
                             rate=rate, index=index, start_ns=sent_ns,
                             start_unix=start_unix + (sent_ns - start_ns) / 1e9, due_ns=due_ns,
                             prompt_chars=len(prefix) + len(prompt), max_tokens=max_tokens,
                             spec=spec)
        raise AssertionError("unreachable: the retry loop always returns")  # pragma: no cover

    def _rejected(self, status: int, text: str, attempt: int) -> bool:
        """A 400/422 on the first attempt that names an optional field: dropped, send again."""
        return attempt == 0 and status in (400, 422) and self._drop_for(text)

    async def _via_httpx(self, client: httpx.AsyncClient, body: dict[str, Any],
                         st: StreamState, max_tokens: int, attempt: int) -> bool:
        """One attempt through httpx (a custom transport): the answer into `st`; True when it
        is to be sent again (`_rejected`)."""
        async with client.stream("POST", self.url, json=body, headers=self.headers,
                                 extensions={"trace": st.trace}) as resp:
            st.status = resp.status_code
            if not 200 <= resp.status_code < 300:
                raw, _ = await read_capped(resp, MAX_ERROR_BODY_BYTES)
                text = raw.decode("utf-8", errors="replace")
                if self._rejected(resp.status_code, text, attempt):
                    return True
                st.fail(ErrorType.HTTP_ERROR, http_error_message(resp, text))
            elif "text/event-stream" not in resp.headers.get("content-type", ""):
                raw, more = await read_capped(resp, MAX_BODY_BYTES)
                self._not_streaming(raw, more, resp.headers.get("content-type", "?"), st)
            else:
                sink = SseSink(st, max_tokens)
                # each chunk is stamped when its bytes reached the socket, not when this
                # task gets its turn (capacity.bench.stamped)
                wire = resp.extensions.get("network_stream")
                st.stamp_source = getattr(wire, "stamp_source", None) or "task"
                async for chunk in resp.aiter_bytes():
                    sink(chunk, getattr(wire, "last_arrival_ns", None) or time.perf_counter_ns())
                sink.close(time.perf_counter_ns())
        return False

    async def _via_wire(self, body: dict[str, Any], st: StreamState, max_tokens: int,
                        attempt: int, at_ns: int | None = None) -> bool:
        """One attempt on the client's own connections (`capacity.bench.wire`): every read
        of the stream is parsed in the connection's `data_received`; True when the request
        is to be sent again (`_rejected`). `at_ns`: an open loop's due time (perf_counter
        ns), when the pool's send clock writes the request (prepared before it)."""
        pool = self.clients.wire
        assert pool is not None
        request = pool.request_bytes(self.path, body, self.headers)
        conn = await pool.get()
        try:
            resp = await conn.send(request, stall_s=self.cfg.timeout_s, on_sent=st.sent,
                                   at_ns=at_ns)
            st.status = resp.status_code
            if not 200 <= resp.status_code < 300:
                raw, _ = await conn.read_capped(MAX_ERROR_BODY_BYTES)
                text = raw.decode("utf-8", errors="replace")
                if self._rejected(resp.status_code, text, attempt):
                    return True
                st.fail(ErrorType.HTTP_ERROR, http_error_message(resp, text))
            elif "text/event-stream" not in resp.headers.get("content-type", ""):
                raw, more = await conn.read_capped(MAX_BODY_BYTES)
                self._not_streaming(raw, more, resp.headers.get("content-type", "?"), st)
            else:
                st.stamp_source = conn.stamp_source
                sink = SseSink(st, max_tokens)
                await conn.stream_into(sink)
                sink.close(time.perf_counter_ns())
        finally:
            pool.put(conn)
        return False

    @staticmethod
    def _not_streaming(raw: bytes, more: bool, content_type: str, st: StreamState) -> None:
        """A 2xx answer that is not an event stream (`raw`: its body, at most MAX_BODY_BYTES;
        `more`: there was more): a failure, with the body's usage when it has one."""
        st.last_event_ns = time.perf_counter_ns()
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
                f"{content_type}); TTFT cannot be measured")


class SseSink:
    """A streamed answer's body, read by read, into its `StreamState`: the bytes counted
    against `stream_byte_limit`, split into SSE events (`SseDecoder`, one split per read),
    each event classified (`ChunkReader`: a token chunk of the stream's learnt shape without
    a JSON parse) and stamped with its read's arrival time."""

    __slots__ = ("st", "dec", "reader", "left", "limit")

    def __init__(self, st: StreamState, max_tokens: int) -> None:
        self.st = st
        self.dec = SseDecoder()
        self.reader = ChunkReader()
        self.limit = stream_byte_limit(max_tokens)
        self.left = self.limit

    def __call__(self, body: bytes, now: int) -> None:
        self.left -= len(body)
        if self.left < 0:
            raise SseTooLarge(f"a stream of more than {self.limit} bytes")
        on, read = self.st.on, self.reader.read
        for ev in self.dec.feed(body):
            on(read(ev.data, ev.event), now)

    def close(self, now: int) -> None:
        """The answer has ended: a last event without its blank line."""
        for ev in self.dec.close():
            self.st.on(self.reader.read(ev.data, ev.event), now)


def split_slots(level: int, parts: int) -> list[int]:
    """A level's concurrency split over workers or shards: as even as can be, the first ones
    get one more (`[3, 3, 2]` for 8 over 3)."""
    base, extra = divmod(level, parts)
    return [base + (1 if w < extra else 0) for w in range(parts)]


async def _lag_monitor(samples: list[float], stop: asyncio.Event, period_s: float = 0.01
                       ) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(period_s)
        # uvloop's timers have 1 ms resolution and may fire a little early: no lag, not less
        samples.append(max(0.0, (time.perf_counter() - t - period_s) * 1e3))


async def drive_level(runner: Runner, *, level: int, slots: int, requests: int,
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

            lead_s = SEND_LEAD_S if runner.clients.wire is not None else 0.0

            async def arrival(i: int, at_s: float) -> None:
                due = t0_ns + int(at_s * 1e9)
                # on the client's own connections the request is made ready `lead_s` early and
                # written at `due` by the send clock (capacity.bench.wire.SendClock)
                delay = (due - time.perf_counter_ns()) / 1e9 - lead_s
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
