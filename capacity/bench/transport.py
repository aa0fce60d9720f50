"""The client's HTTP side: one-connection clients, requests sent in one write, capped reads.

A run's streamed requests go through the client's own connections (`capacity.bench.wire`,
`ClientPool.wire`); what is below is the httpx path, for `/models`, a custom transport (tests)
and the Connect check.

Connections: one `httpx.AsyncClient` with a single keep-alive connection per concurrent
request slot, made when a slot first needs one (so at most the highest concurrency, and no more
than the requests in flight), then handed out from an idle list (`ClientPool`). httpx's default
pool of 100 connections would silently cap a level of 150, and one shared pool of hundreds of
connections costs O(pool) work per request in httpcore: measured here, it delayed sends by up
to 2 s at concurrency 100 on 2 cores, where one connection per slot sends within tens of ms.
Timeouts are sized for long prefills: the read timeout is the per-stream stall limit
(`timeout_s`) and there is no pool timeout (each request's deadline is the runner's,
`BenchConfig.deadline_s`). Sizes are capped (docs/reliability.md): an error body at 64 KiB
read, a non-streaming or /models body at 16 MiB, a stream at `stream_byte_limit` (an SSE line
or event at 1 MiB: `capacity.bench.sse`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable
from typing import Any, Protocol

import httpcore
import httpx

from capacity.bench.config import BenchConfig
from capacity.bench.stamped import StampedBackend
from capacity.bench.wire import WirePool
from capacity.errors import BenchError, InputError
from capacity.untrusted import loads_json, terminal_text

MAX_ERROR_BODY_BYTES = 64 << 10
"""Bytes of an error (non-2xx) body read for its message; the rest is not read."""
MAX_BODY_BYTES = 16 << 20
"""Largest non-streaming answer or /models body read, bytes (16 MiB); beyond: `too_large`."""


def stream_byte_limit(max_tokens: int) -> int:
    """Most bytes one streamed answer may take: 16 MiB + 64 KiB per requested token (an
    OpenAI chunk of one token is ~200 bytes); beyond: `too_large`."""
    return MAX_BODY_BYTES + (64 << 10) * max_tokens


async def read_capped(resp: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of the body, and whether there was more (left unread)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(parts)[:limit], True
    return b"".join(parts), False


def _retry_after(resp: HasHead) -> str:
    """', retry after N s' from a Retry-After header (seconds or an HTTP date), else ''."""
    value = short_text(resp.headers.get("retry-after", ""), 40)
    if not value:
        return ""
    return f", retry after {value} s" if value.isdigit() else f", retry after {value}"


class HasHead(Protocol):
    """An answer's head: httpx's `Response` or the client's own (`capacity.bench.wire`)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> httpx.Headers: ...


def http_error_message(resp: HasHead, text: str) -> str:
    """The error_message of a non-2xx answer: the status, what it means, the body's start."""
    code = resp.status_code
    if 300 <= code < 400:
        where = short_text(resp.headers.get("location", "?"), 120)
        return (f"HTTP {code}: redirect to {where}; capacity does not follow redirects "
                "(use the final URL as --base-url)")
    if code == 429:
        return f"HTTP 429: rate limited{_retry_after(resp)}: {short_text(text)}"[:200]
    return f"HTTP {code}: {short_text(text)}"


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The bearer header of `api_key` (none without one): the one place every request of the
    client (the run, /models, the engine probe, the Connect check) builds it. InputError,
    naming no character of the key, when the key holds one an HTTP header cannot carry as a
    token: a control character (a CR or LF would end the header line, and the text after it
    would reach an error message), a space, or one outside ASCII (httpx encodes headers as
    ASCII: the run would die in the encoder)."""
    if not api_key:
        return {}
    if not all("!" <= ch <= "~" for ch in api_key):
        raise InputError("the API key holds a character an HTTP header cannot carry (a space, "
                         "a control character or one outside ASCII): check --api-key or "
                         "OPENAI_API_KEY")
    return {"Authorization": f"Bearer {api_key}"}


def short_text(text: str, limit: int = 200) -> str:
    """`text` on one line (runs of white space as one space), at most `limit` characters, its
    control characters as `?` (`terminal_text`: a server's error text reaches the terminal)."""
    return terminal_text(" ".join(text.split()))[:limit]


class OneWriteStream(httpcore.AsyncNetworkStream):
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
        return OneWriteStream(await self._inner.start_tls(ssl_context, server_hostname,
                                                          timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)

    @property
    def last_arrival_ns(self) -> int | None:
        """When the bytes last read reached the socket (`StampedStream`), else None."""
        return getattr(self._inner, "last_arrival_ns", None)

    @property
    def stamp_source(self) -> str | None:
        """Where `last_arrival_ns` is taken (`StampedStream.stamp_source`), else None."""
        return getattr(self._inner, "stamp_source", None)


class OneWriteBackend(httpcore.AsyncNetworkBackend):
    """The chunk-stamping backend (`capacity.bench.stamped`), or `inner`, with
    `OneWriteStream` connections."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._inner = inner or StampedBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        return OneWriteStream(await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address,
            socket_options=socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        return OneWriteStream(await self._inner.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def one_write_transport(tls: ssl.SSLContext, keepalive_expiry_s: float | None = 5.0
                        ) -> httpx.AsyncHTTPTransport:
    """An httpx transport with one connection whose requests leave in one write.

    httpx takes no network backend, so its pool is replaced by the same httpcore pool it
    would build (one connection, kept alive) on `OneWriteBackend`.
    """
    transport = httpx.AsyncHTTPTransport(verify=tls, trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=tls, max_connections=1, max_keepalive_connections=1,
        keepalive_expiry=keepalive_expiry_s, network_backend=OneWriteBackend())
    return transport


class ClientPool:
    """One-connection clients handed out per request slot, made when first needed: a level
    of C concurrent requests makes at most min(C, requests in flight) clients, never one per
    slot up front (a level of 10^9 would otherwise build 10^9 clients before measuring)."""

    def __init__(self, stack: contextlib.AsyncExitStack,
                 make: Callable[[], httpx.AsyncClient], wire: WirePool | None = None) -> None:
        self._stack = stack
        self._make = make
        self._idle: list[httpx.AsyncClient] = []
        self.made = 0
        self.wire = wire
        """The client's own connections for its streamed requests (`capacity.bench.wire`),
        or None: every request through httpx (a custom transport)."""

    async def get(self) -> httpx.AsyncClient:
        if self._idle:
            return self._idle.pop()
        self.made += 1
        return await self._stack.enter_async_context(self._make())

    def put(self, client: httpx.AsyncClient) -> None:
        self._idle.append(client)


def client_pool(stack: contextlib.AsyncExitStack, cfg: BenchConfig,
                transport: httpx.AsyncBaseTransport | None = None) -> ClientPool:
    """The one-connection clients of a process, closed with `stack`."""
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    timeout = httpx.Timeout(connect=cfg.connect_timeout_s, read=cfg.timeout_s, write=30.0,
                            pool=None)
    tls = ssl.create_default_context()  # one context shared by every client (cheap to make)
    wire = None
    if transport is None:
        try:
            wire = WirePool(cfg.base_url, connect_timeout_s=cfg.connect_timeout_s, tls=tls,
                            keepalive_expiry_s=limits.keepalive_expiry or 0.0)
        except (ValueError, httpx.InvalidURL):
            wire = None  # not an http(s) URL httpx would take: httpx says why on the request
        else:
            stack.callback(wire.close)
    return ClientPool(stack, lambda: httpx.AsyncClient(
        limits=limits, timeout=timeout, verify=tls, trust_env=False,
        transport=transport or one_write_transport(tls, limits.keepalive_expiry),
        follow_redirects=False), wire)


async def fetch_models(client: httpx.AsyncClient, base_url: str, api_key: str | None, *,
                       deadline_s: float | None = None) -> dict[str, Any] | None:
    """The server's `/models` answer; BenchError for unreachable servers, 401/403, and an
    answer not complete within `deadline_s` (s, the whole exchange: a server that sends a byte
    now and then never trips the read timeout, and would hold the run's start forever)."""
    url = base_url.rstrip("/") + "/models"
    try:
        async with asyncio.timeout(deadline_s):
            async with client.stream("GET", url, headers=auth_headers(api_key)) as resp:
                raw, more = await read_capped(resp, MAX_BODY_BYTES)
    except TimeoutError:
        raise BenchError(f"{url} did not answer in full within {deadline_s:g} s (the stall "
                         "limit, --timeout, and the connect timeout)") from None
    except httpx.ConnectError:
        raise BenchError(f"cannot reach {base_url}: is the server running? (check --base-url, "
                         "e.g. http://127.0.0.1:8000/v1)") from None
    except httpx.HTTPError as exc:
        raise BenchError(f"{url} failed: {type(exc).__name__} {short_text(str(exc))}") from None
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


MAX_MODEL_ID_CHARS = 256
"""The longest model id taken from a server's `/models` (characters; Hugging Face's repo ids
are at most 96): the id goes into every request body and the run's meta.json."""


def first_model(models: dict[str, Any] | None) -> str | None:
    """The id of the first model of a `/models` answer, or None. BenchError for an id that is
    no plain name (control characters, or longer than `MAX_MODEL_ID_CHARS`): it would be sent
    in every request and printed as it is."""
    data = (models or {}).get("data")
    if isinstance(data, list) and data and isinstance(data[0], dict) and data[0].get("id"):
        model = str(data[0]["id"])
        if len(model) > MAX_MODEL_ID_CHARS or terminal_text(model) != model:
            raise BenchError(f"/models names a model id that is no plain name "
                             f"({len(model):,} characters, '{short_text(model, 40)}'): pass "
                             "--model NAME")
        return model
    return None

