"""Connections that timestamp every chunk of bytes when it reaches the socket (docs/bench.md).

httpx reads through httpcore and anyio: the bytes of a token wait in a buffer until the task of
their stream is scheduled, which happens after every other ready task of the event loop has
run its parsing. With hundreds of streams a token was stamped tens of ms after it arrived. Here
the connection is an asyncio `Protocol`: `data_received` runs as soon as the event loop sees the
socket readable, before any task resumes, and stamps the chunk (`time.perf_counter_ns`) as it
queues it. `read` hands out one received chunk at a time (split only at `max_bytes`), so every
event the HTTP parser completes from a read arrived with that read's chunk, whose stamp is
`last_arrival_ns`; the client reads it from the response's `network_stream` extension.

On Linux the stamp is the kernel's own receive time of the read's newest packet
(`capacity.netstamp`, SO_TIMESTAMPNS), so the time from the kernel's receipt to the loop's next
poll of the socket (the rest of the loop iteration under way, the loop lag each record keeps as
`loop_lag_ms`) is out of it too; elsewhere (and over TLS) the stamp is taken in
`data_received` and that lag remains. What is left: the loopback's own latency, and for a
chunk that arrived in several packets, the newest one's time. The request's start stays its
single write.

The stream implements httpcore's `AsyncNetworkStream` with the same exceptions as its anyio
backend (ReadTimeout, ReadError, WriteError, ConnectError, ConnectTimeout), flow control in
both directions, TLS through `loop.start_tls`, and `is_readable` for httpcore's check of idle
keep-alive connections.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import time
from collections.abc import Iterable
from typing import Any, cast

import httpcore

from capacity.netstamp import kernel_stamps

READ_PAUSE_BYTES = 1 << 20
"""Received bytes held before the socket's reading is paused (1 MiB)."""
READ_RESUME_BYTES = 256 << 10
"""...and resumed once fewer are held."""


class _StampProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: collections.deque[tuple[bytes, int]] = collections.deque()
        self.held = 0
        self.eof = False
        self.lost = False
        self.error: BaseException | None = None
        self.paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._drain: asyncio.Future[None] | None = None
        self._arrival_ns = 0
        self.stamp_source = "loop"
        """`kernel` where `capacity.netstamp` reads the kernel's receive times, else `loop`."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a TCP transport (uvloop's are not subclasses of asyncio's, but have its methods)
        self.transport = cast(asyncio.Transport, transport)
        # Linux: the kernel's receive times; else the time data_received runs
        self.stamp_source = "kernel" if kernel_stamps(transport, self._kernel_stamp) else "loop"

    def _kernel_stamp(self, ns: int) -> None:
        self._arrival_ns = ns

    def data_received(self, data: bytes) -> None:
        stamp, self._arrival_ns = self._arrival_ns, 0
        self.chunks.append((data, stamp or time.perf_counter_ns()))
        self.held += len(data)
        if self.held > READ_PAUSE_BYTES and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.error = exc
        self._wake()
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def pause_writing(self) -> None:
        if self._drain is None or self._drain.done():
            self._drain = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def drained(self) -> None:
        if self._drain is not None and not self._drain.done():
            await self._drain


class StampedStream(httpcore.AsyncNetworkStream):
    """One TCP (or TLS) connection whose received chunks carry their arrival time."""

    def __init__(self, transport: asyncio.Transport, protocol: _StampProtocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self.last_arrival_ns: int | None = None
        """When the bytes most recently returned by `read` reached the socket (perf_counter
        ns), or None before the first read."""

    @property
    def stamp_source(self) -> str:
        """`kernel` (the kernel's receive times) or `loop` (taken in `data_received`)."""
        return self._protocol.stamp_source

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        p = self._protocol
        while not p.chunks:
            if p.error is not None:
                raise httpcore.ReadError(f"{type(p.error).__name__}: {p.error}")
            if p.eof or p.lost:
                return b""
            try:
                async with asyncio.timeout(timeout):
                    await p.wait()
            except TimeoutError:
                raise httpcore.ReadTimeout(f"no bytes for {timeout:g} s") from None
        data, stamp = p.chunks[0]
        if len(data) > max_bytes:
            p.chunks[0] = (data[max_bytes:], stamp)
            data = data[:max_bytes]
        else:
            p.chunks.popleft()
        p.held -= len(data)
        if p.paused and p.held < READ_RESUME_BYTES and not p.lost:
            p.paused = False
            self._transport.resume_reading()
        self.last_arrival_ns = stamp
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        p = self._protocol
        if p.lost or self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(buffer)
        try:
            async with asyncio.timeout(timeout):
                await p.drained()
        except TimeoutError:
            raise httpcore.WriteTimeout(f"the write did not drain in {timeout:g} s") from None
        if p.lost:
            raise httpcore.WriteError("the connection was closed while writing")

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            new = await loop.start_tls(self._transport, self._protocol, ssl_context,
                                       server_hostname=server_hostname,
                                       ssl_handshake_timeout=timeout)
        except TimeoutError:
            self._transport.close()
            raise httpcore.ConnectTimeout("TLS handshake timed out") from None
        except (OSError, ssl.SSLError, ConnectionError) as exc:
            self._transport.close()
            raise httpcore.ConnectError(f"{type(exc).__name__}: {exc}") from None
        if new is None:
            raise httpcore.ConnectError("the TLS handshake did not complete")
        return StampedStream(new, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        if info == "is_readable":
            p = self._protocol
            return bool(p.chunks) or p.eof or p.lost
        return None


class StampedBackend(httpcore.AsyncNetworkBackend):
    """httpcore connections made of `StampedStream`s."""

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None
                          ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(
                    _StampProtocol, host, port,
                    local_addr=(local_address, 0) if local_address else None)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection to {host}:{port} in {timeout:g} s"
                                          ) from None
        except OSError as exc:
            raise httpcore.ConnectError(f"{type(exc).__name__}: {exc}") from None
        sock = transport.get_extra_info("socket")
        for option in socket_options or ():  # asyncio already sets TCP_NODELAY
            sock.setsockopt(*option)
        return StampedStream(transport, protocol)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None
                                  ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_unix_connection(_StampProtocol, path)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection to {path} in {timeout:g} s"
                                          ) from None
        except OSError as exc:
            raise httpcore.ConnectError(f"{type(exc).__name__}: {exc}") from None
        return StampedStream(transport, protocol)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
