"""The benchmark client against httpx.MockTransport: every SSE case of docs/bench.md, and failures."""

from __future__ import annotations

import asyncio
import csv
import itertools
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest

from capacity.bench.client import run_bench
from capacity.bench.config import BenchConfig
from capacity.bench.metrics import cached_prompt_tokens
from capacity.bench.runner import make_prompt, request_nonce
from capacity.bench.storage import url_secrets
from capacity.bench.transport import OneWriteBackend
from capacity.errors import BenchError

Frames = list[tuple[float, bytes]]  # (delay before, bytes)

MODELS = {"object": "list", "data": [{"id": "m1", "object": "model"}]}


def ev(obj: object) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    return ev({"id": "r1", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


ROLE = chunk({"role": "assistant", "content": ""})
DONE = b"data: [DONE]\n\n"


def usage(n: int, prompt: int = 10) -> bytes:
    return ev({"id": "r1", "choices": [], "usage": {"prompt_tokens": prompt,
                                                     "completion_tokens": n,
                                                     "total_tokens": prompt + n}})


def streaming(frames: Frames) -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        for delay, data in frames:
            if delay:
                await asyncio.sleep(delay)
            yield data
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


Handler = Callable[[httpx.Request], httpx.Response]


class Ran:
    def __init__(self, result: Any, bodies: list[dict[str, Any]]) -> None:
        self.result, self.bodies = result, bodies
        self.run_dir, self.warnings = result.run_dir, result.warnings
        self.summaries = result.summaries


def run(tmp_path: Path, handler: Handler, **kw: Any) -> tuple[list[dict[str, str]], Ran]:
    seen: list[dict[str, Any]] = []

    def route(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json=MODELS)
        seen.append(json.loads(request.content))
        return handler(request)

    args: dict[str, Any] = {"base_url": "http://test/v1", "concurrency": (1,), "requests": 1,
                            "warmup": 0, "prompt_chars": 50, "max_tokens": 4,
                            "out_dir": str(tmp_path), "label": "t"} | kw
    result = asyncio.run(run_bench(BenchConfig(**args), transport=httpx.MockTransport(route),
                                   emit=lambda m: None))
    with open(Path(result.run_dir) / "requests.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return rows, Ran(result, seen)


def test_role_chunk_is_not_the_first_token(tmp_path: Path) -> None:
    frames = [(0, ROLE), (0.08, chunk({"content": "a"})), (0.02, chunk({"content": "b"})),
              (0.02, chunk({"content": "c"})), (0.02, chunk({"content": "d"}, "length")),
              (0, usage(4)), (0, DONE)]
    [row], res = run(tmp_path, lambda r: streaming(frames))
    assert row["success"] == "true"
    # only lower bounds on time (a busy machine can add to any gap, never take from it: the
    # mock stream sleeps after the client asked for the next frame), no upper bound to flake
    assert float(row["ttft_ms"]) - float(row["first_chunk_ms"]) >= 80
    itl = [float(g) for g in row["itl_ms"].split()]
    assert min(itl) >= 20
    # TPOT is (last - first token) / 3: the gaps between content tokens, not the role chunk's
    assert float(row["tpot_ms"]) == pytest.approx(sum(itl) / 3, abs=0.01)  # ITLs in 0.001 ms
    assert row["output_tokens"] == "4" and row["output_tokens_source"] == "usage"
    assert row["output_length_mismatch"] == "false"
    assert len(row["itl_ms"].split()) == 3
    body = res.bodies[0]
    assert body["stream_options"] == {"include_usage": True} and body["ignore_eos"] is True
    assert body["max_tokens"] == 4 and body["stream"] is True


def test_multi_token_chunks_use_usage(tmp_path: Path) -> None:
    frames = [(0, chunk({"content": "ab"})), (0.05, chunk({"content": "cd"}, "length")),
              (0, usage(4)), (0, DONE)]
    [row], _ = run(tmp_path, lambda r: streaming(frames))
    assert row["output_tokens"] == "4" and row["token_events"] == "2"
    # TPOT divides by output tokens - 1 = 3, the ITL is the 50 ms gap between chunks
    assert float(row["tpot_ms"]) == pytest.approx(float(row["itl_mean_ms"]) / 3, rel=1e-6)


def test_reasoning_delta_is_the_first_token(tmp_path: Path) -> None:
    frames = [(0, ROLE), (0.05, chunk({"reasoning_content": "hmm"})),
              (0.05, chunk({"content": "x"})), (0, chunk({}, "stop")), (0, usage(2)), (0, DONE)]
    [row], _ = run(tmp_path, lambda r: streaming(frames))
    ttft = float(row["ttft_ms"])
    # the first token came with the reasoning delta, 50 ms before the content one
    assert ttft >= 45 and float(row["e2e_ms"]) - ttft >= 50
    assert row["finish_reason"] == "stop"
    assert row["output_length_mismatch"] == "true"  # 2 tokens, 4 asked


def test_no_usage_counts_chunks(tmp_path: Path) -> None:
    frames = [(0, chunk({"content": "a"})), (0, chunk({"content": "b"}, "length")), (0, DONE)]
    [row], _ = run(tmp_path, lambda r: streaming(frames))
    assert row["output_tokens"] == "2" and row["output_tokens_source"] == "chunks"
    assert row["success"] == "true"


def test_data_without_space_comments_and_split_frames(tmp_path: Path) -> None:
    raw = (b": ping\n\n" + b'data:{"id":"r9","choices":[{"delta":{"content":"a"}}]}\n\n'
           + b': ping\r\n\r\n' + chunk({"content": "b"}, "length").replace(b"\n", b"\r\n")
           + usage(2) + b"data:[DONE]\n\n")
    frames = [(0, raw[i:i + 7]) for i in range(0, len(raw), 7)]
    [row], _ = run(tmp_path, lambda r: streaming(frames))
    assert row["success"] == "true", row["error_message"]
    assert row["output_tokens"] == "2" and row["token_events"] == "2"
    assert row["response_id"] == "r9"


def test_error_event_inside_200_stream(tmp_path: Path) -> None:
    frames = [(0, chunk({"content": "a"})),
              (0, ev({"error": {"message": "engine crashed", "code": 500}}))]
    [row], _ = run(tmp_path, lambda r: streaming(frames))
    assert row["success"] == "false" and row["error_type"] == "error_event"
    assert "engine crashed" in row["error_message"] and row["http_status"] == "200"


def test_stream_without_done_or_finish_is_partial(tmp_path: Path) -> None:
    frames = [(0, chunk({"content": "a"})), (0, chunk({"content": "b"}))]
    [row], _ = run(tmp_path, lambda r: streaming(frames))
    assert row["success"] == "false" and row["error_type"] == "partial"


def test_finish_reason_without_done_is_complete(tmp_path: Path) -> None:
    frames = [(0, chunk({"content": "a"})), (0, chunk({"content": "b"}, "length"))]
    [row], _ = run(tmp_path, lambda r: streaming(frames))
    assert row["success"] == "true"


def test_no_tokens(tmp_path: Path) -> None:
    [row], _ = run(tmp_path, lambda r: streaming([(0, ROLE), (0, chunk({}, "stop")),
                                                  (0, DONE)]))
    assert row["error_type"] == "no_tokens"


def test_malformed_stream(tmp_path: Path) -> None:
    [row], _ = run(tmp_path, lambda r: streaming([(0, b"data: {oops\n\n")]))
    assert row["error_type"] == "malformed"


def test_retry_once_without_stream_options(tmp_path: Path) -> None:
    frames = [(0, chunk({"content": "a"})), (0, chunk({"content": "b"}, "length")), (0, DONE)]

    def handler(request: httpx.Request) -> httpx.Response:
        if "stream_options" in json.loads(request.content):
            return httpx.Response(400, json={"error": {"message": "unknown field"}})
        return streaming(frames)

    rows, res = run(tmp_path, handler, requests=3)
    assert [r["success"] for r in rows] == ["true"] * 3
    assert {r["output_tokens_source"] for r in rows} == {"chunks"}
    assert len(res.bodies) == 4  # one rejected attempt, then three without stream_options
    assert any("stream_options" in w for w in res.warnings)
    meta = json.loads((Path(res.run_dir) / "meta.json").read_text())
    assert meta["dropped_fields"] == ["stream_options"] and meta["status"] == "finished"


def test_rejected_ignore_eos_is_dropped_and_flagged(tmp_path: Path) -> None:
    frames = [(0, chunk({"content": "a"}, "stop")), (0, usage(1)), (0, DONE)]

    def handler(request: httpx.Request) -> httpx.Response:
        if "ignore_eos" in json.loads(request.content):
            return httpx.Response(422, text="extra field ignore_eos not permitted")
        return streaming(frames)

    [row], res = run(tmp_path, handler)
    assert row["success"] == "true" and row["output_length_mismatch"] == "true"
    assert "stream_options" in res.bodies[-1]


@pytest.mark.parametrize("make, kind", [
    pytest.param(lambda r: httpx.Response(500, text="boom"), "http_error", id="http-500"),
    pytest.param(lambda r: httpx.Response(200, json={"choices": [], "usage": {
        "completion_tokens": 4}}), "not_streaming", id="not-streaming"),
])
def test_failures_are_recorded(tmp_path: Path, make: Handler, kind: str) -> None:
    rows, res = run(tmp_path, make, requests=2)
    assert [r["error_type"] for r in rows] == [kind, kind]
    assert res.summaries[0].requests_failed == 2
    assert res.summaries[0].error_types == f"{kind}:2"


@pytest.mark.parametrize("exc, kind", [
    pytest.param(httpx.ReadTimeout("slow"), "timeout", id="timeout"),
    pytest.param(httpx.RemoteProtocolError("peer closed"), "disconnected", id="disconnect"),
])
def test_transport_errors_are_recorded(tmp_path: Path, exc: Exception, kind: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    [row], _ = run(tmp_path, handler)
    assert row["error_type"] == kind and row["success"] == "false"


def test_unauthorized_fails_early(tmp_path: Path) -> None:
    def route(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": "bad key"})

    cfg = BenchConfig(base_url="http://test/v1", out_dir=str(tmp_path), warmup=0)
    with pytest.raises(BenchError, match="api-key"):
        asyncio.run(run_bench(cfg, transport=httpx.MockTransport(route), emit=lambda m: None))
    assert not any(tmp_path.iterdir())


def test_unreachable_server_fails_early(tmp_path: Path) -> None:
    def route(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    cfg = BenchConfig(base_url="http://test/v1", out_dir=str(tmp_path))
    with pytest.raises(BenchError, match="cannot reach"):
        asyncio.run(run_bench(cfg, transport=httpx.MockTransport(route), emit=lambda m: None))


def test_prompt_starts_with_a_unique_nonce(tmp_path: Path) -> None:
    frames = [(0, chunk({"content": "a"}, "length")), (0, DONE)]
    _, res = run(tmp_path, lambda r: streaming(frames), requests=5, prompt_chars=300)
    prompts = [b["messages"][0]["content"] for b in res.bodies]
    assert all(len(p) == 300 for p in prompts)
    assert len({p[:40] for p in prompts}) == 5
    # unique from the first characters: llama.cpp and SGLang reuse a shared start of any length
    common = [len(os.path.commonprefix([a, b])) for a, b in itertools.combinations(prompts, 2)]
    assert max(common) <= 4, common
    assert make_prompt("n", "x" * 100, 10) == "n: xxxxxxx"
    assert request_nonce("run", "c1-0") != request_nonce("run", "c1-1")
    assert request_nonce("run", "c1-0").endswith(" c1-0")


def test_completions_endpoint(tmp_path: Path) -> None:
    frames = [(0, ev({"id": "c", "choices": [{"text": ""}]})),
              (0.03, ev({"id": "c", "choices": [{"text": "hi", "finish_reason": "length"}]})),
              (0, DONE)]
    [row], res = run(tmp_path, lambda r: streaming(frames), endpoint="completions")
    assert row["success"] == "true" and float(row["ttft_ms"]) >= 25
    assert "prompt" in res.bodies[0] and "messages" not in res.bodies[0]


@pytest.mark.parametrize("status, fatal", [pytest.param(404, True, id="404-stops"),
                                           pytest.param(503, False, id="503-recorded")])
def test_warmup_failure(tmp_path: Path, status: int, fatal: bool) -> None:
    """A 4xx on the first warm-up is a configuration error; a 5xx is the server's to record."""
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json={"error": {"message": "model 'm1' not found"}})

    if fatal:
        with pytest.raises(BenchError, match="warm-up request failed: HTTP 404"):
            run(tmp_path, handler, warmup=1)
    else:
        [row], _ = run(tmp_path, handler, warmup=1)
        assert row["error_type"] == "http_error" and row["http_status"] == "503"


def test_start_is_when_the_first_byte_is_written() -> None:
    """docs/bench.md: start just before the request is sent. httpx's trace hook marks the moment the
    request headers start going out; the earlier client-side work belongs to queue_ms."""
    import asyncio

    from capacity.bench.stream import StreamState

    st = StreamState()
    asyncio.run(st.trace("connection.connect_tcp.started", {}))
    assert st.sent_ns is None
    asyncio.run(st.trace("http11.send_request_headers.started", {}))
    first = st.sent_ns
    assert first is not None
    asyncio.run(st.trace("http11.send_request_headers.started", {}))  # a retry keeps the first
    assert st.sent_ns == first


class _RecordingStream(httpcore.AsyncNetworkStream):
    """A fake connection: records every write, answers one small HTTP response."""

    def __init__(self, writes: list[bytes]) -> None:
        self.writes = writes
        self.answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        out, self.answer = self.answer[:max_bytes], self.answer[max_bytes:]
        return out

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.writes.append(buffer)

    async def aclose(self) -> None:
        pass


class _RecordingBackend(httpcore.AsyncNetworkBackend):
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        return _RecordingStream(self.writes)


@pytest.mark.parametrize("wrapped", [pytest.param(True, id="one-write"),
                                     pytest.param(False, id="httpcore-alone")])
def test_a_request_leaves_in_one_write(wrapped: bool) -> None:
    """httpcore writes headers and body separately (anyio yields to the loop after each);
    the client's backend sends them in one write, so the body does not trail the start
    clock by a loop round."""
    fake = _RecordingBackend()
    backend: httpcore.AsyncNetworkBackend = OneWriteBackend(fake) if wrapped else fake
    body = json.dumps({"prompt": "x" * 3000}).encode()

    async def go() -> bytes:
        async with httpcore.AsyncConnectionPool(network_backend=backend) as pool:
            resp = await pool.request("POST", "http://127.0.0.1:9/v1/completions",
                                      headers={"content-type": "application/json"},
                                      content=body)
            return resp.content

    assert asyncio.run(go()) == b"ok"
    sent = b"".join(fake.writes)
    assert sent.startswith(b"POST /v1/completions HTTP/1.1\r\n") and sent.endswith(body)
    assert len([w for w in fake.writes if w]) == (1 if wrapped else 2)


@pytest.mark.parametrize(("usage", "timings", "prompt", "cached"), [
    pytest.param({"prompt_tokens_details": {"cached_tokens": 37}}, None, 202, 37, id="openai"),
    pytest.param({}, {"cache_n": 12, "prompt_n": 90}, 102, 12, id="llamacpp-timings"),
    pytest.param({"prompt_tokens_details": {"cached_tokens": 0}}, {"cache_n": 5}, 50, 0,
                 id="usage-first"),
    pytest.param({"prompt_tokens_details": {"cached_tokens": 900}}, None, 100, None,
                 id="more-than-the-prompt"),
    pytest.param({"prompt_tokens_details": {"cached_tokens": -1}}, None, 100, None,
                 id="negative"),
    pytest.param({"prompt_tokens_details": {"cached_tokens": 2.5}}, None, 100, None,
                 id="not-a-count"),
    pytest.param({"prompt_tokens_details": "x"}, None, 100, None, id="not-an-object"),
    pytest.param(None, None, None, None, id="absent"),
])
def test_cached_prompt_tokens_are_read_and_checked(usage: dict[str, object] | None,
                                                   timings: dict[str, object] | None,
                                                   prompt: int | None, cached: int | None) -> None:
    assert cached_prompt_tokens(usage, timings, prompt) == cached


def test_run_warnings_are_bounded_and_deduplicated() -> None:
    from capacity.bench.storage import RUN_WARNING_CHARS, RUN_WARNINGS_SHOWN, run_warnings

    assert run_warnings({}) == [] and run_warnings({"warnings": "one string"}) == []
    many = [f"level {i}: x" for i in range(50)]
    assert run_warnings({"warnings": many}) == many[:RUN_WARNINGS_SHOWN]
    [long] = run_warnings({"warnings": ["a  b\n" + "y" * 10_000, None, "   "]})
    assert long.startswith("a b y") and len(long) == RUN_WARNING_CHARS


def test_secrets_in_the_base_url_reach_no_file(tmp_path: Path) -> None:
    # a base URL with a user and a password (an audit, 2026-12-07: written to meta.json's
    # base_url and shown by `capacity runs`): the password redacted everywhere the API key
    # is; the user name stays (a token given as the user, with no password, is redacted)
    url = "http://user:sk-SECRETURL@test/v1"
    frames = [(0, ROLE), (0, chunk({"content": "a"}, "length")), (0, usage(1)), (0, DONE)]
    [row], res = run(tmp_path, lambda r: streaming(frames), base_url=url)
    assert row["success"] == "true"
    written = "".join(p.read_text(encoding="utf-8") for p in Path(res.result.run_dir).iterdir()
                      if p.suffix in (".json", ".csv"))
    assert "SECRET" not in written
    meta = json.loads((Path(res.result.run_dir) / "meta.json").read_text(encoding="utf-8"))
    assert meta["args"]["base_url"] == "http://user:[redacted]@test/v1"
    # a query's secret-named values are secrets too; a parameter that is none stays
    assert url_secrets("http://h/v1?api-version=2024-06-01&key=sk-2&access_token=t-3") == (
        "sk-2", "t-3")
    assert url_secrets("http://u:sk-1@h/v1?key=sk-2&v=3") == ("sk-1", "sk-2")
    assert url_secrets("https://sk-TOKEN-3@h/v1") == ("sk-TOKEN-3",)   # a token as the user
    assert url_secrets("http://[::1/v1") == ()


def test_a_body_that_is_not_its_content_encoding_is_a_malformed_row(tmp_path: Path) -> None:
    # httpx's path (the custom transport): the body says gzip and is not; the request is one
    # `malformed` row and the run goes on (the client's own connections: tests/test_bench_wire.py)
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream",
                                            "content-encoding": "gzip"}, content=b"not-gzip")

    [row], _ = run(tmp_path, handler)
    assert (row["success"], row["error_type"]) == ("false", "malformed"), row


def test_a_level_where_every_request_failed_says_why(tmp_path: Path) -> None:
    # with --warmup 0 nothing else said it: "0 ok / 1 failed" and no reason (an audit,
    # 2026-12-07); the run's warnings (printed at its end) now carry the first failure's
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text="engine exploded")

    [row], res = run(tmp_path, handler)
    assert row["success"] == "false"
    # (a busy machine may add the client-bottleneck warning: not what this test is about)
    failed = [w for w in res.warnings if "every request failed" in w]
    assert failed == ["level 1: every request failed (the first: http_error: HTTP 500: "
                      "engine exploded)"]
    assert all("failed" not in w for w in res.warnings if w not in failed)
