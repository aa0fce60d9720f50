"""The client's own HTTP/1.1 connections (capacity.bench.wire) against raw servers on 127.0.0.1:
framing (chunks, lengths, until close), events split across reads and several per read, reuse,
caps, stalls, broken answers and kernel stamps. Every expected value is written out here."""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from capacity.bench.runner import SseSink
from capacity.bench.sse import SseTooLarge
from capacity.bench.stream import StreamState
from capacity.bench.wire import MAX_HEAD_BYTES, WireConnection, WirePool

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def token(i: int) -> bytes:
    obj = {"id": "r1", "choices": [{"index": 0, "delta": {"content": f"t{i}"},
                                    "finish_reason": None}]}
    return f"data: {json.dumps(obj)}\n\n".encode()


FINISH = (b'data: {"id":"r1","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n'
          b'data: {"id":"r1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}'
          b'\n\ndata: [DONE]\n\n')


def chunk(data: bytes) -> bytes:
    """One piece of chunked transfer coding."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n")


async def read_request(reader: asyncio.StreamReader) -> bytes | None:
    """One request's head and body (by its Content-Length), or None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + await reader.readexactly(length)


async def serving(handler: Handler, body: Callable[[WirePool], Awaitable[None]]) -> None:
    """Serve `handler` on 127.0.0.1 while `body` runs with a pool of connections to it; then
    every connection of both sides is closed and every handler ended."""
    tasks: list[asyncio.Task[None]] = []
    writers: list[asyncio.StreamWriter] = []

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        try:
            await handler(reader, writer)
        except ConnectionError:
            pass

    def spawn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks.append(asyncio.ensure_future(run(reader, writer)))

    server = await asyncio.start_server(spawn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = WirePool(f"http://127.0.0.1:{port}/v1", connect_timeout_s=5)
    try:
        await body(pool)
    finally:
        pool.close()
        server.close()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for w in writers:
            w.close()
        await server.wait_closed()
        await asyncio.sleep(0.01)  # the transports' closing callbacks run


def sse_server(pieces: list[bytes], gap_s: float = 0.0, requests: list[bytes] | None = None
               ) -> Handler:
    """Answers every request on a connection with `pieces` written one by one (`gap_s`
    apart), kept alive."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (req := await read_request(reader)) is not None:
            if requests is not None:
                requests.append(req)
            for p in pieces:
                writer.write(p)
                await writer.drain()
                if gap_s:
                    await asyncio.sleep(gap_s)
        writer.close()

    return handle


async def stream(pool: WirePool, stall_s: float = 5.0, max_tokens: int = 3
                 ) -> tuple[StreamState, WireConnection]:
    st = StreamState(max_tokens)
    conn = await pool.get()
    try:
        resp = await conn.send(pool.request_bytes("/chat/completions", {"x": 1}, {}),
                               stall_s=stall_s, on_sent=st.sent)
        st.status = resp.status_code
        sink = SseSink(st, max_tokens)
        await conn.stream_into(sink)
        sink.close(0)
    finally:
        pool.put(conn)
    return st, conn


def test_events_split_across_reads_and_several_per_read() -> None:
    # the three tokens and the end: token 1 split inside its JSON and inside "\n\n" across
    # chunks 1-3 (and their reads, 20 ms apart), tokens 2 and 3 together in one chunk
    t1 = token(1)
    pieces = [SSE_HEAD + chunk(t1[:10]), chunk(t1[10:-1]), chunk(t1[-1:]),
              chunk(token(2) + token(3)), chunk(FINISH) + b"0\r\n\r\n"]
    requests: list[bytes] = []

    async def body(pool: WirePool) -> None:
        st, conn = await stream(pool)
        assert st.status == 200 and len(st.token_ns) == 3 and st.done
        assert st.finish == "length" and st.usage == {"prompt_tokens": 5, "completion_tokens": 3}
        assert st.sent_ns is not None and st.sent_ns < st.token_ns[0]
        # token 1 completes in the third read, 2 and 3 in the fourth: one stamp for both
        assert st.token_ns[1] == st.token_ns[2] and st.token_ns[0] < st.token_ns[1]
        assert conn.usable  # read whole, kept alive: reused by the next request
        st2, conn2 = await stream(pool)
        assert conn2 is conn and pool.made == 1 and len(st2.token_ns) == 3

    asyncio.run(serving(sse_server(pieces, gap_s=0.02, requests=requests), body))
    head, _, payload = requests[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"\r\nContent-Length: 7" in head and payload == b'{"x":1}'  # one write, whole
    assert len(requests) == 2


@pytest.mark.parametrize("framing", ["length", "eof"])
def test_a_body_by_length_or_until_close(framing: str) -> None:
    body_bytes = token(1) + token(2) + FINISH
    extra = f"content-length: {len(body_bytes)}\r\n" if framing == "length" else \
        "connection: close\r\n"
    pieces = [f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n{extra}\r\n".encode()
              + body_bytes[:50], body_bytes[50:]]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        for p in pieces:
            writer.write(p)
            await writer.drain()
            await asyncio.sleep(0.01)
        if framing == "eof":
            writer.close()
        else:
            await reader.read()

    async def body(pool: WirePool) -> None:
        st, conn = await stream(pool)
        assert len(st.token_ns) == 2 and st.done and st.error_type is None
        assert conn.usable is (framing == "length")

    asyncio.run(serving(handle, body))


def test_a_gzip_stream_is_decompressed() -> None:
    payload = gzip.compress(token(1) + token(2) + FINISH)
    pieces = [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip"
              b"\r\ntransfer-encoding: chunked\r\n\r\n" + chunk(payload[:20]),
              chunk(payload[20:]) + b"0\r\n\r\n"]

    async def body(pool: WirePool) -> None:
        st, _ = await stream(pool)
        assert len(st.token_ns) == 2 and st.done

    asyncio.run(serving(sse_server(pieces), body))


def test_a_body_that_is_not_what_its_encoding_says_fails_that_request_alone() -> None:
    # a server that says gzip (or deflate) and sends something else: the request fails with
    # httpx's DecodingError, which the runner records as that request's error; no zlib
    # traceback ends the run (found by an audit, 2026-12-07)
    for coding in (b"gzip", b"deflate"):
        pieces = [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: "
                  + coding + b"\r\ntransfer-encoding: chunked\r\n\r\n" + chunk(b"not-gzip")
                  + b"0\r\n\r\n"]

        async def body(pool: WirePool) -> None:
            with pytest.raises(httpx.DecodingError, match="not what its content-encoding says"):
                await stream(pool)

        asyncio.run(serving(sse_server(pieces), body))


def test_a_body_that_inflates_without_end_stops_at_the_readers_cap() -> None:
    # a gzip bomb: 64 MiB of one byte, 64 KiB on the wire. Inflated in 1 MiB pieces, each
    # handed to the reader first: an error body's reader stops at its cap after the first
    # piece, and the stream's SSE decoder at its line limit (1 MiB), with at most a piece or
    # two in memory, not the 64 MiB
    bomb = gzip.compress(b"data: " + b"A" * (64 << 20), compresslevel=9)
    assert len(bomb) < 128 << 10

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 500 X\r\ncontent-encoding: gzip\r\ncontent-length: "
                     + str(len(bomb)).encode() + b"\r\n\r\n" + bomb)
        await writer.drain()
        writer.close()

    async def body(pool: WirePool) -> None:
        conn = await pool.get()
        await conn.send(pool.request_bytes("/x", {}, {}), stall_s=5)
        raw, more = await conn.read_capped(10_000)
        assert raw == b"data: " + b"A" * 9_994 and more
        pool.put(conn)

    asyncio.run(serving(handle, body))
    sse = [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip"
           b"\r\ncontent-length: " + str(len(bomb)).encode() + b"\r\n\r\n" + bomb]

    async def streamed(pool: WirePool) -> None:
        with pytest.raises(SseTooLarge):
            await stream(pool)

    asyncio.run(serving(sse_server(sse), streamed))


def test_an_error_body_is_read_up_to_its_cap() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 500 X\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n")
        with_more = True
        while with_more:  # an endless body, until the client hangs up
            writer.write(b"e" * 4096)
            try:
                await writer.drain()
            except ConnectionError:
                with_more = False
            await asyncio.sleep(0)

    async def body(pool: WirePool) -> None:
        conn = await pool.get()
        resp = await conn.send(pool.request_bytes("/x", {}, {}), stall_s=5)
        assert resp.status_code == 500 and resp.headers["content-type"] == "text/plain"
        raw, more = await conn.read_capped(10_000)
        assert raw == b"e" * 10_000 and more and not conn.usable
        pool.put(conn)
        assert conn.transport is not None and conn.transport.is_closing()

    asyncio.run(serving(handle, body))


def test_a_stall_is_a_read_timeout() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(SSE_HEAD + chunk(token(1)))
        await reader.read()  # then nothing

    async def body(pool: WirePool) -> None:
        with pytest.raises(httpx.ReadTimeout, match="no bytes for 0.2 s"):
            await stream(pool, stall_s=0.2)

    asyncio.run(serving(handle, body))


@pytest.mark.parametrize("answer, error", [
    pytest.param(b"", httpx.RemoteProtocolError, id="closed-before-answering"),
    pytest.param(SSE_HEAD + chunk(token(1)), httpx.RemoteProtocolError, id="closed-mid-body"),
    pytest.param(b"HTTP/1.1 abc\r\n\r\n", httpx.RemoteProtocolError, id="malformed"),
    pytest.param(b"HTTP/1.1 200 OK\r\nx: " + b"a" * (MAX_HEAD_BYTES + 10),
                 httpx.RemoteProtocolError, id="endless-header"),
])
def test_broken_answers_raise_httpx_errors(answer: bytes, error: type[Exception]) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer)
        await writer.drain()
        writer.close()

    async def body(pool: WirePool) -> None:
        with pytest.raises(error):
            await stream(pool)

    asyncio.run(serving(handle, body))


def test_a_sink_error_ends_the_answer_and_closes_the_connection() -> None:
    huge = b"data: " + b"x" * (1 << 20) + b"\n\n"  # one line over the decoder's 1 MiB

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(SSE_HEAD + chunk(token(1)) + chunk(huge))
        await reader.read()

    async def body(pool: WirePool) -> None:
        st = StreamState(3)
        conn = await pool.get()
        await conn.send(pool.request_bytes("/x", {}, {}), stall_s=5)
        with pytest.raises(SseTooLarge):
            await conn.stream_into(SseSink(st, 3))
        assert len(st.token_ns) == 1  # the token before the huge line was counted
        pool.put(conn)
        assert not conn.usable and conn.transport is not None and conn.transport.is_closing()

    asyncio.run(serving(handle, body))


def test_header_injection_is_refused() -> None:
    pool = WirePool("http://127.0.0.1:1/v1", connect_timeout_s=1)
    with pytest.raises(httpx.LocalProtocolError):
        pool.request_bytes("/x", {}, {"Authorization": "Bearer k\r\nX-Evil: 1"})
    assert pool.request_bytes("/x", {"a": "é"}, {}).endswith('{"a":"é"}'.encode())
    assert WirePool("https://h.example/v1/", connect_timeout_s=1).port == 443


def test_refused_connection_is_a_connect_error() -> None:
    async def go() -> None:
        server = await asyncio.start_server(sse_server([]), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()  # the port is free again: nothing listens
        with pytest.raises(httpx.ConnectError):
            await WirePool(f"http://127.0.0.1:{port}", connect_timeout_s=2).get()

    asyncio.run(go())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's")
def test_reads_carry_the_kernels_receive_time() -> None:
    """Bytes that arrive while the event loop is busy keep the time they arrived: the loop
    is blocked for 200 ms after the answer is sent, the token is stamped before that."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(0.05)
        writer.write(SSE_HEAD + chunk(token(1) + FINISH) + b"0\r\n\r\n")
        await writer.drain()
        await reader.read()

    async def body(pool: WirePool) -> None:
        import time

        st = StreamState(3)
        conn = await pool.get()
        assert conn.stamp_source == "kernel"
        resp_task = asyncio.ensure_future(conn.send(pool.request_bytes("/x", {}, {}), stall_s=5))
        await asyncio.sleep(0)  # the request is written
        time.sleep(0.15)  # the server cannot answer: its loop is this one
        await resp_task
        sink = SseSink(st, 3)
        blocked_until = time.perf_counter_ns()
        time.sleep(0.2)  # the answer's bytes wait in the socket
        await conn.stream_into(sink)
        assert len(st.token_ns) == 1 and blocked_until - st.token_ns[0] > -1e6
        pool.put(conn)

    asyncio.run(serving(handle, body))


def test_a_run_through_the_wire_matches_the_simulators_token_count(tmp_path: Any) -> None:
    """End to end: a run on the client's own connections against the simulated endpoint
    records 8 output tokens per request from usage, 8 token events each, kernel stamps."""
    from capacity.bench.client import run_bench
    from capacity.bench.config import BenchConfig
    from capacity.model.scenario import make_scenario
    from capacity.sim.scheduler import SimConfig
    from capacity.sim.server import create_app, serve_in_thread

    app = create_app(make_scenario("qwen3.5-9b-awq", "rtx-4090"), SimConfig(speedup=50.0))
    with serve_in_thread(app) as url:
        cfg = BenchConfig(base_url=url, concurrency=(4,), requests=8, warmup=0,
                          max_tokens=8, prompt_chars=200, out_dir=str(tmp_path), label="w")
        result = asyncio.run(run_bench(cfg, emit=lambda m: None))
    from capacity.bench.store import RunStore

    with RunStore(str(tmp_path)) as store:
        df = store.query("SELECT output_tokens, output_tokens_source, token_events, success, "
                         "stamp_source FROM requests WHERE label = 'w'")
    assert result.summaries[0].requests_ok == 8
    assert df["output_tokens"].tolist() == [8] * 8 and df["token_events"].tolist() == [8] * 8
    assert set(df["output_tokens_source"]) == {"usage"} and df["success"].all()
    expected = "kernel" if sys.platform.startswith("linux") else "loop"
    assert set(df["stamp_source"]) == {expected}


class _Written:
    """A stand-in for a connection in the send clock: records when it was written."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def write_now(self) -> None:
        self.log.append(self.name)


def test_the_send_clock_writes_what_is_due_in_time_order() -> None:
    import time

    from capacity.bench.wire import SendClock

    async def go() -> None:
        clock = SendClock()
        log: list[str] = []
        now = time.perf_counter_ns()
        clock.add(now + 3_600 * 10**9, _Written(log, "in an hour"))  # type: ignore[arg-type]
        clock.add(now - 2_000_000, _Written(log, "b"))  # type: ignore[arg-type]
        clock.add(now - 5_000_000, _Written(log, "a"))  # type: ignore[arg-type]
        clock.run_due()
        assert log == ["a", "b"] and len(clock.due) == 1
        # a read on any connection makes a due write first, before its own parsing
        conn = WireConnection(clock)
        clock.add(time.perf_counter_ns() - 1, _Written(log, "c"))  # type: ignore[arg-type]
        conn.data_received(b"stray")
        assert log == ["a", "b", "c"] and not conn.usable  # and a stray read is not reused

    asyncio.run(go())


def test_a_scheduled_send_leaves_at_its_time_not_before() -> None:
    import time

    pieces = [SSE_HEAD + chunk(token(1) + FINISH) + b"0\r\n\r\n"]

    async def body(pool: WirePool) -> None:
        st = StreamState(3)
        conn = await pool.get()
        at = time.perf_counter_ns() + 80_000_000  # 80 ms from now
        resp = await conn.send(pool.request_bytes("/x", {}, {}), stall_s=5, on_sent=st.sent,
                               at_ns=at)
        assert resp.status_code == 200
        assert st.sent_ns is not None and st.sent_ns >= at
        sink = SseSink(st, 3)
        await conn.stream_into(sink)
        assert len(st.token_ns) == 1 and st.token_ns[0] > st.sent_ns
        pool.put(conn)

    asyncio.run(serving(sse_server(pieces), body))
