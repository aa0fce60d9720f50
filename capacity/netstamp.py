"""When bytes reached this machine: the kernel's receive timestamp of each read of a TCP socket
(Linux `SO_TIMESTAMPNS`), for the bench client's chunk stamps and the simulated endpoint's
request arrivals (docs/bench.md, "Timestamps").

An asyncio protocol's `data_received` runs when the event loop gets to the socket, after the
rest of the loop iteration under way: with a hundred streams that is milliseconds after the
bytes arrived. The kernel stamps every packet as it is received; `recvmsg` hands the stamp of
the newest packet of a read out as ancillary data. `kernel_stamps(transport, on_stamp)` makes
an asyncio selector transport read with `recvmsg` and call `on_stamp(ns)` (on the
`time.perf_counter_ns` clock) just before its protocol's `data_received`, so the protocol
stamps what the kernel saw instead of the time its turn came. The stamp is CLOCK_REALTIME;
it is moved onto perf_counter by the two clocks' offset read at that moment (sub-microsecond
apart).

Where the stamp is not available (not Linux, a TLS transport, uvloop's transports, a Python
whose selector transport differs) `kernel_stamps` returns False and nothing changes: callers
keep stamping in `data_received`. Unit of every stamp: ns.
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any, Final

SO_TIMESTAMPNS: int | None = getattr(socket, "SO_TIMESTAMPNS",
                                     35 if sys.platform.startswith("linux") else None)
"""The socket option (and its control-message type, SCM_TIMESTAMPNS): 35 on Linux."""
_ANCILLARY_BYTES = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 64
_TIMESPEC = struct.Struct("qq")


CLOCK_READS: Final = 3
"""Tries at reading the two clocks together (`kernel_ns_to_perf_ns`)."""


def kernel_ns_to_perf_ns(kernel_ns: int) -> int:
    """A CLOCK_REALTIME stamp (ns) on the `time.perf_counter_ns` clock: now on perf_counter
    less how long ago the stamp was on the realtime clock. The realtime clock is read between
    two perf_counter reads and taken at their midpoint, the narrowest of `CLOCK_READS` tries:
    a thread preempted between the two clocks (CI, 2026-12-04: a stamp 0.48 ms before its
    own send) errs by at most half that try's window, and the narrowest of three rarely holds
    a preemption."""
    window, at = 0, 0
    for i in range(CLOCK_READS):
        before = time.perf_counter_ns()
        real = time.time_ns()
        after = time.perf_counter_ns()
        if i == 0 or after - before < window:
            window, at = after - before, (before + after) // 2 - (real - kernel_ns)
    return at


def stamp_of(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The SCM_TIMESTAMPNS stamp (CLOCK_REALTIME ns) among `recvmsg`'s ancillary data."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = _TIMESPEC.unpack_from(data)
            return int(sec) * 1_000_000_000 + int(nsec)
    return None


def kernel_stamps(transport: Any, on_stamp: Callable[[int], None]) -> bool:
    """Read `transport` (an asyncio selector socket transport) with `recvmsg` and call
    `on_stamp(perf_counter_ns)` with the kernel's receive time of each read before its
    protocol's `data_received`. False (and nothing changed) where it cannot."""
    sock = getattr(transport, "_sock", None)
    if (SO_TIMESTAMPNS is None or not isinstance(sock, socket.socket)
            or sock.type != socket.SOCK_STREAM or not hasattr(sock, "recvmsg")
            or not hasattr(transport, "_read_ready_cb")
            or not hasattr(transport, "_read_ready__on_eof")
            or not hasattr(transport, "_fatal_error") or not hasattr(transport, "max_size")):
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False

    def read_ready() -> None:
        # asyncio's _read_ready__data_received (CPython 3.11-3.13), with recvmsg for recv
        if transport._conn_lost:
            return
        try:
            data, ancillary, _flags, _addr = sock.recvmsg(transport.max_size, _ANCILLARY_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            transport._fatal_error(exc, "Fatal read error on socket transport")
            return
        if not data:
            transport._read_ready__on_eof()
            return
        kernel = stamp_of(ancillary)
        on_stamp(kernel_ns_to_perf_ns(kernel) if kernel is not None else time.perf_counter_ns())
        try:
            transport._protocol.data_received(data)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            transport._fatal_error(exc, "Fatal error: protocol.data_received() call failed.")

    transport._read_ready_cb = read_ready
    return True
