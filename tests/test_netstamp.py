"""Kernel receive timestamps (capacity.netstamp) on a real loopback TCP connection: a read
is stamped when its bytes arrived, not when a busy event loop got to it."""

from __future__ import annotations

import asyncio
import socket
import sys
import time

import pytest

from capacity.netstamp import kernel_ns_to_perf_ns, kernel_stamps, stamp_of

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's")


@linux
def test_a_read_is_stamped_when_its_bytes_arrived_not_when_the_loop_got_to_it() -> None:
    got: list[tuple[int, int, bytes]] = []
    enabled: list[bool] = []

    class Server(asyncio.Protocol):
        kernel_ns = 0

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            enabled.append(kernel_stamps(transport, self.on_stamp))

        def on_stamp(self, ns: int) -> None:
            self.kernel_ns = ns

        def data_received(self, data: bytes) -> None:
            got.append((self.kernel_ns, time.perf_counter_ns(), data))

    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        try:
            while not enabled:
                await asyncio.sleep(0.005)
            sent = time.perf_counter_ns()
            client.sendall(b"hello")
            time.sleep(0.08)  # the loop is busy elsewhere: 80 ms before it polls the socket
            while not got:
                await asyncio.sleep(0.001)
            client.sendall(b"")  # nothing: the connection stays open
            client.close()
            for _ in range(100):  # the EOF path of the replaced reader closes the transport
                await asyncio.sleep(0.005)
        finally:
            server.close()
            await server.wait_closed()
        return sent, got[0][1]

    sent, seen = asyncio.run(main())
    assert enabled == [True]
    kernel, _, data = got[0]
    assert data == b"hello"
    assert 0 <= (kernel - sent) / 1e6 < 20  # the kernel's time: at the send
    assert (seen - kernel) / 1e6 >= 70  # the loop's time: after the 80 ms block


def test_no_stamp_where_the_transport_is_not_a_plain_socket() -> None:
    class NotATransport:
        pass

    assert kernel_stamps(NotATransport(), lambda ns: None) is False
    assert stamp_of([]) is None
    now = time.time_ns()
    assert abs(kernel_ns_to_perf_ns(now) - time.perf_counter_ns()) < 50_000_000


def test_the_clocks_are_read_together_at_the_narrowest_window(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A preemption between the two clock reads (1 ms here, on the first try) would put the
    stamp 1 ms early; the narrowest of the three tries (2 us) is taken, at its midpoint:
    perf 5,000,001,000 at the realtime 1,000,000,000,000 read, so a stamp 3 ms before that
    realtime is perf 4,997,001,000."""
    import capacity.netstamp as ns

    perf = iter([5_000_000_000, 5_001_000_000,      # try 1: 1 ms window (preempted)
                 5_000_000_000, 5_000_002_000,      # try 2: 2 us window, midpoint 5,000,001,000
                 5_000_000_000, 5_000_010_000])     # try 3: 10 us window
    real = iter([1_000_000_000_000] * 3)

    class Clock:
        @staticmethod
        def perf_counter_ns() -> int:
            return next(perf)

        @staticmethod
        def time_ns() -> int:
            return next(real)

    monkeypatch.setattr(ns, "time", Clock)
    assert ns.kernel_ns_to_perf_ns(1_000_000_000_000 - 3_000_000) == 4_997_001_000
