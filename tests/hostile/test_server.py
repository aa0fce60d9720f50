"""A hostile or broken server cannot crash or stall a run (issue 15, items 5, 6, 7, 8 usage, 9, 10).

Every server here is a raw socket on 127.0.0.1 (servers_server.py); every run is bounded by
`asyncio.wait_for` or a subprocess timeout, so a regression fails instead of hanging.
docs/reliability.md states the limits these tests hold the client to.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from servers_server import (
    DONE,
    HostileServer,
    Request,
    Route,
    bench_rows,
    event,
    head,
    json_answer,
    models_or,
    token,
    usage_event,
)

from capacity.bench.engine_info import probe_engine
from capacity.bench.metrics import check_usage
from capacity.bench.sse import SseDecoder, SseTooLarge, classify
from capacity.bench.store import list_runs
from capacity.cli.main import main
from capacity.errors import BenchError, InputError
from capacity.fit.imports import read_measured

BOUND_S = 20.0
"""No run here may take longer (a stalled client fails the test instead of hanging it)."""
DEEP = "[" * 200_000



def bench(tmp_path: Path, server: HostileServer, **kw: Any) -> tuple[list[dict[str, str]], Any]:
    """One bounded run (1 request, 4 tokens, no warm-up unless given); its rows."""
    return bench_rows(tmp_path, server, BOUND_S, **({"max_tokens": 4} | kw))


def send_forever(conn: socket.socket, stop: threading.Event, piece: bytes,
                 pause_s: float = 0.0) -> None:
    while not stop.is_set():
        conn.sendall(piece)
        if pause_s:
            time.sleep(pause_s)


# -- item 5: deeply nested JSON ------------------------------------------------------------

@pytest.mark.parametrize("bad", [
    pytest.param(f"data: {DEEP}\n\n".encode(), id="200000-brackets"),
    pytest.param(event({"error": json.loads("[" * 900 + "]" * 900)}), id="900-deep-error"),
])
def test_deep_json_event_is_a_malformed_event_not_a_crash(tmp_path: Path, serve: Any,
                                                          bad: bytes) -> None:
    def route(req: Request, conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head() + bad + token("a") + token("b", finish="stop") + DONE)

    rows, _ = bench(tmp_path, serve(models_or(route)))
    assert rows[0]["success"] == "true"
    assert rows[0]["error_message"] == "1 malformed events skipped"


def test_only_deep_json_events_is_malformed(tmp_path: Path, serve: Any) -> None:
    def route(req: Request, conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head() + f"data: {DEEP}\n\n".encode())

    rows, _ = bench(tmp_path, serve(models_or(route)))
    assert (rows[0]["success"], rows[0]["error_type"]) == ("false", "malformed")


def test_deep_json_in_models_is_ignored(tmp_path: Path, serve: Any) -> None:
    def route(req: Request, conn: socket.socket, stop: threading.Event) -> None:
        if req.path.endswith("/models"):
            conn.sendall(head(200, "application/json") + DEEP.encode())
        else:
            conn.sendall(head() + token("a", finish="stop") + DONE)

    rows, result = bench(tmp_path, serve(route), model="m1")
    assert rows[0]["success"] == "true"
    meta = json.loads((Path(result.run_dir) / "meta.json").read_text())
    assert meta["server_models"] is None


def test_deep_json_non_streaming_body(tmp_path: Path, serve: Any) -> None:
    def route(req: Request, conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head(200, "application/json") + DEEP.encode())

    rows, _ = bench(tmp_path, serve(models_or(route)))
    assert rows[0]["error_type"] == "not_streaming"


@pytest.mark.parametrize("text", [DEEP, '{"a":' * 200_000, "[" * 900 + "]" * 900])
def test_deep_json_import_is_an_input_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "deep.json"
    path.write_text(text)
    with pytest.raises(InputError, match="deep.json"):
        read_measured(path)
    assert main(["calibrate", "--measured", str(path)]) == 2


def test_classify_never_recurses() -> None:
    for text in (DEEP, '{"error":' * 100_000, '{"choices":' + "[" * 100_000):
        assert classify(text).malformed


# -- item 6: a per-request deadline ----------------------------------------------------------

def keepalive_after_one_token(req: Request, conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(head() + token("a"))
    send_forever(conn, stop, b": keepalive\n\n", pause_s=0.2)


def test_keepalives_cannot_hold_a_request_past_the_default_deadline(tmp_path: Path,
                                                                   serve: Any) -> None:
    """Stall limit 0.5 s (keep-alives every 0.2 s never trip it), one max token: the default
    deadline is 1.5 s."""
    t0 = time.perf_counter()
    rows, _ = bench(tmp_path, serve(models_or(keepalive_after_one_token)), timeout_s=0.5,
                    max_tokens=1)
    assert rows[0]["error_type"] == "timeout"
    assert "deadline of 1.5 s" in rows[0]["error_message"]
    assert time.perf_counter() - t0 < 10


def test_request_deadline_flag(tmp_path: Path, serve: Any) -> None:
    t0 = time.perf_counter()
    rows, _ = bench(tmp_path, serve(models_or(keepalive_after_one_token)),
                    request_deadline_s=0.5)
    assert rows[0]["error_type"] == "timeout"
    assert time.perf_counter() - t0 < 10


# -- item 7: sizes and linear decoding ---------------------------------------------------

@pytest.mark.timing
def test_decoder_is_linear_on_a_long_line() -> None:
    """40 MB without a newline, fed in 64 KiB frames: CPU time far below a second (was 7.6 s,
    quadratic; now ~0.03 s), so the margin is about 30x either way."""
    dec = SseDecoder(max_line_bytes=1 << 30)
    piece = b"x" * 65536
    t0 = time.process_time()
    for _ in range(640):
        assert dec.feed(piece) == []
    assert time.process_time() - t0 < 1.0
    assert dec.feed(b"\n\n") == []  # a line that is no field: ignored


def test_decoder_caps_a_line() -> None:
    dec = SseDecoder()
    with pytest.raises(SseTooLarge):
        for _ in range(40):
            dec.feed(b"x" * 65536)


def test_decoder_caps_an_event() -> None:
    dec = SseDecoder(max_event_bytes=1000)
    with pytest.raises(SseTooLarge):
        dec.feed(b"data: " + b"y" * 600 + b"\ndata: " + b"y" * 600 + b"\n")


@pytest.mark.parametrize("what, route", [
    pytest.param("line", lambda req, conn, stop: (conn.sendall(head() + b"data: " + b"x" * (3 << 20)),
                                                  stop.wait(30)), id="endless-line"),
    pytest.param("stream", lambda req, conn, stop: (conn.sendall(head() + token("a")),
                                                    send_forever(conn, stop, b": " + b"p" * 65000 + b"\n")),
                 id="endless-stream"),
    pytest.param("body", lambda req, conn, stop: (conn.sendall(head(200, "application/json")),
                                                  send_forever(conn, stop, b" " * 65536)),
                 id="endless-json-body"),
])
def test_oversized_answers_are_too_large(tmp_path: Path, serve: Any, what: str,
                                         route: Route) -> None:
    rows, _ = bench(tmp_path, serve(models_or(route)))
    assert rows[0]["error_type"] == "too_large", rows[0]["error_message"]


def test_endless_error_body_is_read_only_in_part(tmp_path: Path, serve: Any) -> None:
    def route(req: Request, conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head(500, "text/plain"))
        send_forever(conn, stop, b"e" * 65536)

    rows, _ = bench(tmp_path, serve(models_or(route)))
    assert (rows[0]["error_type"], rows[0]["http_status"]) == ("http_error", "500")
    assert rows[0]["error_message"].startswith("HTTP 500: eee")


def test_huge_ids_are_cut_before_they_are_stored(tmp_path: Path, serve: Any) -> None:
    def route(req: Request, conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head() + event({"id": "i" * 500_000, "choices": [
            {"index": 0, "delta": {"content": "a"}, "finish_reason": "f" * 500_000}]}) + DONE)

    rows, _ = bench(tmp_path, serve(models_or(route)))
    assert rows[0]["success"] == "true"
    assert len(rows[0]["response_id"]) == len(rows[0]["finish_reason"]) == 200


# -- item 8 (usage): impossible usage is not trusted -------------------------------------------

@pytest.mark.parametrize("completion, source, tokens", [
    pytest.param(8, "usage", 8, id="plausible"),
    pytest.param(1000, "chunks_usage_rejected", 8, id="above-max-tokens"),
    pytest.param(3, "chunks_usage_rejected", 8, id="fewer-than-token-events"),
    pytest.param(-1, "chunks_usage_rejected", 8, id="negative"),
    pytest.param(True, "chunks_usage_rejected", 8, id="boolean"),
    pytest.param(7.5, "chunks_usage_rejected", 8, id="fraction"),
    pytest.param("8", "chunks_usage_rejected", 8, id="text"),
])
def test_impossible_usage_falls_back_to_chunks(tmp_path: Path, serve: Any, completion: object,
                                               source: str, tokens: int) -> None:
    def route(req: Request, conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head())
        for i in range(8):
            conn.sendall(token("t", finish="length" if i == 7 else None))
            time.sleep(0.01)
        conn.sendall(usage_event(completion) + DONE)

    rows, result = bench(tmp_path, serve(models_or(route)), max_tokens=8)
    row = rows[0]
    assert (row["success"], row["output_tokens_source"]) == ("true", source)
    assert int(row["output_tokens"]) == tokens
    assert float(row["tpot_ms"]) > 5  # 8 tokens 10 ms apart: ~10 ms, never 0.07 ms
    assert ("usage rejected" in row["error_message"]) == (source != "usage")
    assert result.summaries[0].output_tokens_source == source


@pytest.mark.parametrize("prompt", [10 ** 30, -5, True, 1.5])
def test_impossible_prompt_tokens_are_dropped(tmp_path: Path, serve: Any, prompt: object) -> None:
    def route(req: Request, conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head() + token("a") + token("b", finish="length") + usage_event(2, prompt)
                     + DONE)

    rows, _ = bench(tmp_path, serve(models_or(route)), max_tokens=2)
    assert rows[0]["prompt_tokens"] == ""
    assert rows[0]["output_tokens_source"] == "usage"
    assert "usage.prompt_tokens" in rows[0]["error_message"]


def test_check_usage_keeps_plausible_usage() -> None:
    ok = check_usage({"completion_tokens": 128, "prompt_tokens": 300}, token_events=120,
                     max_tokens=128, prompt_chars=1000)
    assert (ok.output_tokens, ok.source, ok.prompt_tokens, ok.note) == (128, "usage", 300, None)
    none = check_usage(None, token_events=5, max_tokens=8, prompt_chars=10)
    assert (none.output_tokens, none.source, none.note) == (5, "chunks", None)


# -- item 10: redirects and rate limits named as what they are ---------------------------------

def redirect(req: Request, conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(head(307, "text/html", {"location": "http://127.0.0.1:9/v1/chat/completions"},
                      length=0))


def rate_limited(req: Request, conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(json_answer({"error": {"message": "slow down"}}, status=429)
                 .replace(b"connection: close", b"connection: close\r\nretry-after: 7"))


def test_redirect_is_an_http_error(tmp_path: Path, serve: Any) -> None:
    rows, _ = bench(tmp_path, serve(models_or(redirect)))
    assert (rows[0]["error_type"], rows[0]["http_status"]) == ("http_error", "307")
    assert "redirect to http://127.0.0.1:9/v1/chat/completions" in rows[0]["error_message"]


def test_redirect_in_warmup_says_so(tmp_path: Path, serve: Any) -> None:
    with pytest.raises(BenchError, match="redirect") as exc:
        bench(tmp_path, serve(models_or(redirect)), warmup=1)
    assert "--api-key" not in str(exc.value)


def test_redirected_models_says_so(tmp_path: Path, serve: Any) -> None:
    with pytest.raises(BenchError, match="HTTP 307: redirect"):
        bench(tmp_path, serve(redirect))


def test_rate_limit_in_warmup_says_retry_after(tmp_path: Path, serve: Any) -> None:
    with pytest.raises(BenchError, match="rate limited, retry after 7 s") as exc:
        bench(tmp_path, serve(models_or(rate_limited)), warmup=1)
    assert "--api-key" not in str(exc.value)


def test_rate_limit_mid_run_is_recorded(tmp_path: Path, serve: Any) -> None:
    rows, _ = bench(tmp_path, serve(models_or(rate_limited)))
    assert (rows[0]["error_type"], rows[0]["http_status"]) == ("http_error", "429")
    assert "rate limited, retry after 7 s" in rows[0]["error_message"]


# -- item 9: SIGTERM and killed runs -----------------------------------------------------------

CHILD = """
import signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # as in a job started with '&' from a script
from capacity.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def start_bench(server: HostileServer, out: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """A `capacity bench` child whose one request never ends; its meta.json once written."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, "bench", "--base-url", server.base_url, "--out", str(out),
         "--label", "sig", "--concurrency", "1", "--requests", "2", "--warmup", "0",
         "--max-tokens", "4", "--timeout", "60"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        cwd=Path(__file__).resolve().parents[2])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        metas = list(out.glob("sig/*/meta.json"))
        if metas and server.requests and any(r.path.endswith("/completions")
                                             for r in server.requests):
            return proc, metas[0]
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    proc.wait(timeout=10)
    raise AssertionError("the bench child did not start its run")


def test_sigterm_ends_a_run_as_interrupted(tmp_path: Path, serve: Any) -> None:
    proc, meta = start_bench(serve(models_or(keepalive_after_one_token)), tmp_path)
    try:
        assert json.loads(meta.read_text())["status"] == "running"
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert rc == 143
    assert json.loads(meta.read_text())["status"] == "interrupted"


def test_a_killed_run_reads_as_interrupted(tmp_path: Path, serve: Any) -> None:
    proc, meta = start_bench(serve(models_or(keepalive_after_one_token)), tmp_path)
    try:
        owner = json.loads(meta.read_text())["owner"]
        assert owner["pid"] == proc.pid
        assert list_runs(tmp_path)["status"].tolist() == ["running"]  # alive: running
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert json.loads(meta.read_text())["status"] == "running"  # it could not say
    assert list_runs(tmp_path)["status"].tolist() == ["interrupted"]


def test_a_running_run_of_another_host_stays_running(tmp_path: Path) -> None:
    run = tmp_path / "x" / "20260101T000000Z-abcdef"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({
        "run_id": run.name, "label": "x", "status": "running", "args": {},
        "owner": {"pid": os.getpid() + 10_000_000, "host": "elsewhere", "process_start": "1"}}))
    assert list_runs(tmp_path)["status"].tolist() == ["running"]


def test_connect_survives_a_hostile_model_list_and_an_endless_stream() -> None:
    """The Measure page's Connect: 200,000 nested brackets in /v1/models, and a streamed answer
    that never sends a data line, are reports, not crashes or hangs."""
    import httpx

    from capacity.bench.connect import connect_check
    from capacity.bench.guard import measure_guard

    def deep(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"[" * 200_000)

    rep = connect_check("http://127.0.0.1:9/v1", guard=measure_guard({}),
                        transport=httpx.MockTransport(deep))
    assert rep.reachable and not rep.models and "model list" in rep.message

    def endless_models(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        return httpx.Response(200, content=iter([b": keepalive\n"] * 1_000_000))

    rep = connect_check("http://127.0.0.1:9/v1", guard=measure_guard({}),
                        transport=httpx.MockTransport(endless_models))
    assert rep.models == ("m",) and not rep.streams and "not a stream" in rep.message


def test_engine_probe_is_bounded_by_a_server_that_trickles_forever(serve: Any) -> None:
    """`capacity bench` reads /health, /slots and /metrics before a run: a server that answers
    200 and then sends a keep-alive every 0.2 s forever (never tripping httpx's read timeout)
    costs the probe at most its deadline per answer, not the run."""
    server = serve(keepalive_after_one_token)
    t0 = time.perf_counter()
    info = probe_engine(server.base_url, timeout_s=1.0)
    assert time.perf_counter() - t0 < 6
    assert "health" not in info and "metrics" not in info


# -- the stream ends at [DONE] ----------------------------------------------------------------

def test_tokens_after_done_are_ignored_and_said(tmp_path: Path, serve: Any) -> None:
    """[DONE] ends the stream (the OpenAI SDK stops reading there): tokens a server sends
    after it are not counted. [DONE] first and every token after it is a request that got no
    token; tokens, [DONE], then more tokens is a success of the tokens before it, noted."""
    def first(req: Request, conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head() + DONE + token("a") + token("b", finish="stop"))

    rows, _ = bench(tmp_path / "first", serve(models_or(first)))
    assert (rows[0]["success"], rows[0]["error_type"]) == ("false", "no_tokens")
    assert rows[0]["error_message"] == ("no token-bearing event in 1 events before [DONE] "
                                        "(2 after it, ignored)")

    def after(req: Request, conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head() + token("a") + token("b", finish="stop") + DONE
                     + token("c") + token("d") + token("e"))

    rows, _ = bench(tmp_path / "after", serve(models_or(after)))
    assert (rows[0]["success"], rows[0]["token_events"]) == ("true", "2")
    assert rows[0]["error_message"] == "3 events after [DONE] ignored"
