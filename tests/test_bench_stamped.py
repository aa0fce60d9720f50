"""Connections that stamp received bytes at the socket (capacity.bench.stamped)."""

from __future__ import annotations

import asyncio
import time

import httpcore
import pytest

from capacity.bench.stamped import StampedBackend, StampedStream


async def _server(payloads: list[bytes], gap_s: float, close: bool
                  ) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        for p in payloads:
            writer.write(p)
            await writer.drain()
            await asyncio.sleep(gap_s)
        if not close:
            await reader.read()  # until the client closes
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_a_chunk_read_late_keeps_the_time_it_arrived() -> None:
    async def go() -> None:
        server, port = await _server([b"first", b"second" * 10], 0.05, True)
        async with server:
            stream = await StampedBackend().connect_tcp("127.0.0.1", port, timeout=5)
            assert isinstance(stream, StampedStream)
            await stream.write(b"hello", timeout=5)
            await asyncio.sleep(0.3)  # the bytes arrive while nobody reads
            got = await stream.read(65536, timeout=5)
            read_ns = time.perf_counter_ns()
            assert got == b"first"
            first = stream.last_arrival_ns
            assert first is not None and read_ns - first >= 250e6  # stamped on arrival
            assert stream.get_extra_info("is_readable")  # more bytes, then EOF, are waiting
            part = await stream.read(7, timeout=5)  # split at max_bytes: same arrival time
            assert part == b"secondsecond"[:7] and stream.last_arrival_ns is not None
            second = stream.last_arrival_ns
            rest = await stream.read(65536, timeout=5)
            assert part + rest == b"second" * 10 and stream.last_arrival_ns == second
            assert second >= first
            assert await stream.read(65536, timeout=5) == b""  # the server closed
            await stream.aclose()

    asyncio.run(go())


def test_read_timeout_and_connect_errors_are_httpcore_s() -> None:
    async def go() -> None:
        server, port = await _server([b"x"], 0.0, False)
        async with server:
            stream = await StampedBackend().connect_tcp("127.0.0.1", port, timeout=5)
            await stream.write(b"go", timeout=5)
            assert await stream.read(10, timeout=5) == b"x"
            with pytest.raises(httpcore.ReadTimeout):
                await stream.read(10, timeout=0.05)
            await stream.aclose()
        with pytest.raises(httpcore.ConnectError):
            await StampedBackend().connect_tcp("127.0.0.1", port, timeout=5)

    asyncio.run(go())
