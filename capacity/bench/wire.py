"""The bench client's own HTTP/1.1 connections for its streamed requests (docs/bench.md, "The
client's hot path").

Through httpx, every chunk of a stream cost a task switch and a trip through httpcore, h11 (an
HTTP parser in pure Python) and httpx's byte iterators before its SSE event was parsed; at
1,000 streams of one token per decode step that was most of a core, and a due send waited
behind it. Here a connection is an asyncio `Protocol` whose `data_received` does the whole
chunk at once, as soon as the event loop sees the socket readable and before any task resumes:
it stamps the read (the kernel's receive time on Linux, `capacity.netstamp`), hands it to
httptools (llhttp, the HTTP parser in C that uvicorn uses: chunked transfer coding, lengths,
keep-alive), and the body's bytes to the stream's consumer, the SSE decoder and the stream's
state (`capacity.bench.stream.StreamState`). The request's coroutine sleeps until the answer
is complete; no task wakes per token.

What the httpx path guarantees is kept (`capacity.bench.transport`): the request leaves in one
write, stamped just before it (`StreamState.sent_ns`); one keep-alive connection per request
slot, made when first needed and dropped after `KEEPALIVE_EXPIRY_S` idle; the read timeout is a
stall limit (no byte for `stall_s`); an error body is read up to a cap and a streamed answer up
to `stream_byte_limit`; failures raise httpx's own exceptions (ConnectError, ConnectTimeout,
ReadTimeout, ReadError, WriteError, RemoteProtocolError), so the runner records them as before.
TLS goes through `loop.create_connection(ssl=...)` (no kernel stamps there: `loop`). The body
is asked for uncompressed (`Accept-Encoding: identity`); a server that compresses anyway with
gzip or deflate is decompressed, bounded by the same limits.

The httpx path stays for a custom transport (tests' `httpx.MockTransport`), `/models` and the
Connect check.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import ssl
import time
import zlib
from collections.abc import Callable
from typing import Any

import httptools
import httpx

from capacity.netstamp import kernel_stamps

KEEPALIVE_EXPIRY_S = 5.0
"""An idle connection older than this is closed rather than reused (s; httpx's default)."""
HOLD_BYTES = 1 << 20
"""Body bytes held before their consumer is set (a burst that came with the headers) before the
socket's reading is paused (bytes, 1 MiB; held as they came, compressed where the answer is,
and inflated only for the reader)."""

INFLATE_PIECE_BYTES = 1 << 20
"""A compressed read is inflated in pieces of at most this many bytes (1 MiB), each handed to
the reader before the next is made, so the reader's cap bounds the memory a body that
inflates without end (a gzip bomb) can take."""

MAX_HEAD_BYTES = 64 << 10
"""Bytes read without completing an answer's head, at most (64 KiB): httptools keeps a header
line in memory until it ends."""
MAX_HEADERS = 200
"""Header lines accepted in an answer (a server's head is a dozen)."""

Sink = Callable[[bytes, int], None]
"""A body consumer: the bytes of one read (decoded from the transfer coding) and the read's
arrival stamp (perf_counter ns)."""


class WireResponse:
    """The head of an answer: its status code and headers (what `http_error_message` reads)."""

    __slots__ = ("status_code", "headers")

    def __init__(self, status_code: int, headers: httpx.Headers) -> None:
        self.status_code = status_code
        self.headers = headers


def header_safe(value: str) -> bool:
    """Whether `value` may go into a request header as is (no CR, LF or NUL: no injection)."""
    return not any(c in value for c in "\r\n\0")


class WireConnection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; one request at a time (`send`, then one of
    `stream_into` / `read_capped`)."""

    def __init__(self, clock: SendClock | None = None) -> None:
        self.transport: asyncio.Transport | None = None
        self.stamp_source = "loop"
        """`kernel` where `capacity.netstamp` reads the kernel's receive times, else `loop`."""
        self.last_rx_ns = 0
        """When the newest read arrived (perf_counter ns)."""
        self.idle_since = time.monotonic()
        self.lost = False
        self.usable = True
        """False once an answer was cut short, broken or not read whole: never reused."""
        self._kernel_ns = 0
        self._now = 0
        self._parser: Any = None
        self._head: WireResponse | None = None
        self._raw_headers: list[tuple[bytes, bytes]] = []
        self._head_bytes = 0
        self._until_eof = False
        self._complete = False
        self._error: BaseException | None = None
        self._sink: Sink | None = None
        self._held: list[tuple[bytes, int]] = []
        self._held_bytes = 0
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._stall_ns = 0
        self._stall_s = 0.0
        self._inflate: Any = None
        self._enough = False   # the reader took all it wants (`read_capped`): inflate no more
        self._keep_alive = False
        self._request: bytes | None = None
        self._on_sent: Callable[[int], None] | None = None
        self.clock = clock

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.stamp_source = "kernel" if kernel_stamps(transport, self._kernel_stamp) else "loop"

    def _kernel_stamp(self, ns: int) -> None:
        self._kernel_ns = ns

    def data_received(self, data: bytes) -> None:
        stamp = self._kernel_ns
        if stamp:
            self._kernel_ns = 0
        else:
            stamp = time.perf_counter_ns()
        self.last_rx_ns = self._now = stamp
        clock = self.clock
        if clock is not None and clock.due and clock.due[0][0] <= time.perf_counter_ns():
            clock.run_due()  # a send that fell due while this read waited: before parsing
        parser = self._parser
        if parser is None or self._complete or self._error is not None:
            self.usable = False  # bytes nobody asked for: this connection's framing is lost
            return
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx.RemoteProtocolError("the server switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(self._error or httpx.RemoteProtocolError(
                f"malformed HTTP answer: {str(exc)[:120]}"))
        if self._head is None:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._fail(httpx.RemoteProtocolError(f"an answer's head of more than "
                                                     f"{MAX_HEAD_BYTES} bytes"))

    def eof_received(self) -> bool:
        self._closed(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed(exc)

    def _closed(self, exc: Exception | None) -> None:
        self.lost = True
        self.usable = False
        if self._parser is None or self._complete or self._error is not None:
            return
        if self._head is None:
            self._fail(httpx.ReadError(f"{type(exc).__name__}: {exc}") if exc is not None else
                       httpx.RemoteProtocolError("Server disconnected without sending a "
                                                 "response."))
        elif self._until_eof and exc is None:
            self._finish()  # a body without length or chunks ends when the connection does
        else:
            self._fail(httpx.ReadError(f"{type(exc).__name__}: {exc}") if exc is not None else
                       httpx.RemoteProtocolError("peer closed connection without sending "
                                                 "complete message body"))

    # -- httptools callbacks ------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self._raw_headers) >= MAX_HEADERS:
            self._error = httpx.RemoteProtocolError(f"more than {MAX_HEADERS} header lines")
            raise self._error
        self._raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        headers = httpx.Headers(self._raw_headers)
        self._head = WireResponse(self._parser.get_status_code(), headers)
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._until_eof = not chunked and "content-length" not in headers
        coding = headers.get("content-encoding", "identity").strip().lower()
        if coding in ("gzip", "x-gzip"):
            self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self._inflate = zlib.decompressobj()
        elif coding not in ("identity", ""):
            self._error = httpx.DecodingError(f"unsupported content-encoding {coding[:40]!r}")
            raise self._error
        self._wake()

    def on_body(self, body: bytes) -> None:
        try:
            if self._sink is None:   # held as it came (compressed), until the reader comes
                self._held.append((body, self._now))
                self._held_bytes += len(body)
                if self._held_bytes > HOLD_BYTES and not self._paused and self.transport:
                    self._paused = True
                    self.transport.pause_reading()
                return
            self._feed(self._sink, body, self._now)
        except BaseException as exc:
            self._error = exc  # httptools re-raises it as a callback error: kept whole here
            raise

    def _feed(self, sink: Sink, body: bytes, stamp: int) -> None:
        """One read's body bytes to `sink`, inflated first where the answer is compressed:
        piece by piece (`INFLATE_PIECE_BYTES`), each handed on before the next is made, so the
        reader's own cap (a stream's, an error body's) stops a body that inflates without end
        before it is in memory. A body that is not what its content-encoding says fails the
        answer with httpx's DecodingError."""
        inflate = self._inflate
        if inflate is None:
            sink(body, stamp)
            return
        try:
            piece = inflate.decompress(body, INFLATE_PIECE_BYTES)
            while True:
                if piece:
                    sink(piece, stamp)
                if not inflate.unconsumed_tail or self._enough:
                    return
                piece = inflate.decompress(inflate.unconsumed_tail, INFLATE_PIECE_BYTES)
        except zlib.error as exc:
            raise httpx.DecodingError(f"the body is not what its content-encoding says: "
                                      f"{exc}") from None

    def on_message_complete(self) -> None:
        self._finish()

    # -- the request's side -------------------------------------------------------------------

    def _finish(self) -> None:
        self._complete = True
        self._stop_watch()
        # read here, in the parser's callback: once it returns, llhttp has moved on
        self._keep_alive = (self._parser is not None and not self._until_eof
                            and bool(self._parser.should_keep_alive()))
        self._wake()

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        self.usable = False
        self._stop_watch()
        if self.transport is not None:
            self.transport.close()
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def _wait(self) -> None:
        if self._error is not None:
            raise self._error
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None
        if self._error is not None:
            raise self._error

    def _watch(self) -> None:
        """The stall limit: a timer that fires once per `stall_s` of the answer (not per
        read); the answer fails with ReadTimeout when no byte came for `stall_s`."""
        if self._complete or self._error is not None:
            return
        now = time.perf_counter_ns()
        quiet = now - self.last_rx_ns
        if quiet >= self._stall_ns:
            self._fail(httpx.ReadTimeout(f"no bytes for {self._stall_s:g} s"))
            return
        loop = asyncio.get_running_loop()
        self._watchdog = loop.call_later((self._stall_ns - quiet) / 1e9, self._watch)

    def _stop_watch(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    async def send(self, request: bytes, *, stall_s: float,
                   on_sent: Callable[[int], None] | None = None,
                   at_ns: int | None = None) -> WireResponse:
        """Write `request` (one write) and wait for the answer's head. `on_sent(ns)` gets the
        perf_counter stamp taken just before the write. `at_ns` (perf_counter ns): not before
        then; the write is made by the pool's `SendClock` at that time, not when this task
        next gets its turn."""
        if self.lost or self.transport is None or self.transport.is_closing():
            raise httpx.WriteError("the connection is closed")
        self.usable = False  # until the answer has been read whole
        self._parser = httptools.HttpResponseParser(self)
        self._head, self._raw_headers, self._complete, self._error = None, [], False, None
        self._head_bytes, self._keep_alive = 0, False
        self._until_eof, self._sink, self._held, self._held_bytes = False, None, [], 0
        self._inflate = None
        self._enough = False
        self._stall_s, self._stall_ns = stall_s, int(stall_s * 1e9)
        self._request, self._on_sent = request, on_sent
        if at_ns is not None and self.clock is not None and at_ns > time.perf_counter_ns():
            self.clock.add(at_ns, self)
        else:
            self.write_now()
        while (head := self.head()) is None:
            await self._wait()
        return head

    def head(self) -> WireResponse | None:
        """The answer's head, once it has come."""
        return self._head

    def write_now(self) -> None:
        """Write the request `send` was given, now (once): the stamp, the write, the stall
        watchdog."""
        request, self._request = self._request, None
        if request is None or self._error is not None:
            return
        if self.lost or self.transport is None or self.transport.is_closing():
            self._fail(httpx.WriteError("the connection is closed"))
            return
        now = time.perf_counter_ns()
        if self._on_sent is not None:
            self._on_sent(now)
        self.last_rx_ns = now
        self.transport.write(request)
        self._watchdog = asyncio.get_running_loop().call_later(self._stall_s, self._watch)

    def _take(self, sink: Sink) -> None:
        """From now on, body bytes go to `sink`; those held so far first."""
        held, self._held, self._held_bytes = self._held, [], 0
        self._sink = sink
        for body, stamp in held:
            self._feed(sink, body, stamp)
            if self._enough:
                break
        if self._paused and not self.lost and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    async def stream_into(self, sink: Sink) -> None:
        """Hand every body read to `sink` as it arrives (in `data_received`) until the answer
        ends; an exception `sink` raises ends the answer (the connection is closed) and is
        raised here."""
        try:
            self._take(sink)
        except BaseException as exc:
            self._fail(exc)
            raise
        while not self._complete:
            await self._wait()
        self._done_ok()

    async def read_capped(self, limit: int) -> tuple[bytes, bool]:
        """At most `limit` bytes of the body, and whether there was more (the rest is not
        read: the connection is closed)."""
        parts: list[bytes] = []
        size = 0
        over = False

        def keep(body: bytes, _stamp: int) -> None:
            nonlocal size, over
            if over:
                return
            parts.append(body)
            size += len(body)
            if size > limit:
                over = self._enough = True
                self._wake()

        try:
            self._take(keep)
        except BaseException as exc:   # a held body that does not inflate: as stream_into
            self._fail(exc)
            raise
        while not self._complete and not over:
            await self._wait()
        if over:
            self._fail(httpx.ReadError("read no further"))  # closes; the error is not raised
            return b"".join(parts)[:limit], True
        self._done_ok()
        return b"".join(parts), False

    def _done_ok(self) -> None:
        self._sink = None
        self._stop_watch()
        if self._error is None and self._complete and not self.lost and self._keep_alive:
            self.usable = True
            self.idle_since = time.monotonic()

    def abandon(self) -> None:
        """The request was stopped midway (its deadline, a cancel): close the connection."""
        self._request = None  # a write still waiting for its time is not made
        if not self._complete or self._error is not None:
            self.usable = False
        self._stop_watch()
        if not self.usable and self.transport is not None:
            self.transport.close()


class SendClock:
    """Sends at their due times (open loop): each waiting write is made by a timer of its own
    and, when the event loop is busy with reads, by the first read that finds it due (checked
    before parsing, in `WireConnection.data_received`). A send then leaves within one read's
    parsing of its time, not after the rest of the loop's round of parsing and the task's
    turn."""

    def __init__(self) -> None:
        self.due: list[tuple[int, int, WireConnection]] = []
        """(due perf_counter ns, order, connection), a heap."""
        self._order = 0

    def add(self, at_ns: int, conn: WireConnection) -> None:
        self._order += 1
        heapq.heappush(self.due, (at_ns, self._order, conn))
        self._arm(at_ns)

    def _arm(self, at_ns: int) -> None:
        asyncio.get_running_loop().call_later(max(0.0, (at_ns - time.perf_counter_ns()) / 1e9),
                                              self._fire, at_ns)

    def _fire(self, at_ns: int) -> None:
        if at_ns > time.perf_counter_ns():
            self._arm(at_ns)  # the loop's clock ran a little ahead of perf_counter's
        else:
            self.run_due()

    def run_due(self) -> None:
        """Make every write whose time has come (in time order)."""
        now = time.perf_counter_ns()
        due = self.due
        while due and due[0][0] <= now:
            heapq.heappop(due)[2].write_now()


class WirePool:
    """The connections of one process to one base URL: an idle list, one connection per
    request slot in use (as `ClientPool`); `request_bytes` makes a request's bytes."""

    def __init__(self, base_url: str, *, connect_timeout_s: float,
                 tls: ssl.SSLContext | None = None,
                 keepalive_expiry_s: float = KEEPALIVE_EXPIRY_S) -> None:
        url = httpx.URL(base_url.rstrip("/"))
        if url.scheme not in ("http", "https"):
            raise ValueError(f"not an http(s) URL: {base_url}")
        self.host = url.host
        self.tls = (tls or ssl.create_default_context()) if url.scheme == "https" else None
        self.port = url.port or (443 if self.tls else 80)
        self.prefix = url.raw_path.decode("ascii").rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if url.port is None else f"{host}:{url.port}"
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_expiry_s = keepalive_expiry_s
        self._idle: list[WireConnection] = []
        self._all: set[WireConnection] = set()
        self.made = 0
        self.clock = SendClock()

    def request_bytes(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> bytes:
        """A POST of `body` as JSON to the base URL's `path` (one buffer: head and body).
        The JSON is httpx's (`ensure_ascii=False`, compact separators, no NaN)."""
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":"),
                             allow_nan=False).encode("utf-8")
        lines = [f"POST {self.prefix}{path} HTTP/1.1", f"Host: {self.host_header}",
                 "Accept: */*", "Accept-Encoding: identity", "Connection: keep-alive",
                 "User-Agent: capacity-bench", "Content-Type: application/json",
                 f"Content-Length: {len(payload)}"]
        for name, value in headers.items():
            if not (header_safe(name) and header_safe(value)):
                raise httpx.LocalProtocolError(f"header {name[:40]!r} holds CR, LF or NUL")
            lines.append(f"{name}: {value}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + payload

    async def get(self) -> WireConnection:
        """An idle connection still fit to reuse, else a new one."""
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.usable and not conn.lost and now - conn.idle_since < self.keepalive_expiry_s:
                return conn
            self._drop(conn)
        return await self._connect()

    def put(self, conn: WireConnection) -> None:
        """A request is done with `conn`: kept for the next one if its answer was read whole
        and the server keeps it alive, else closed."""
        conn.abandon()
        if conn.usable and not conn.lost:
            self._idle.append(conn)
        else:
            self._drop(conn)

    def _drop(self, conn: WireConnection) -> None:
        self._all.discard(conn)
        if conn.transport is not None:
            conn.transport.close()

    async def _connect(self) -> WireConnection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, conn = await loop.create_connection(
                    lambda: WireConnection(self.clock), self.host, self.port, ssl=self.tls,
                    server_hostname=self.host if self.tls else None)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"no connection to {self.host}:{self.port} in "
                                       f"{self.connect_timeout_s:g} s") from None
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}") from None
        self.made += 1
        self._all.add(conn)
        return conn

    def close(self) -> None:
        """Close every connection (idle or not)."""
        for conn in list(self._all):
            self._drop(conn)
        self._idle.clear()
