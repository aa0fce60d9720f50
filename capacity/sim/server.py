"""A simulated OpenAI-compatible endpoint that streams the simulated engine's tokens over HTTP.

See docs/bench.md (sim-server). The engine (continuous batching on the capacity formulas, its
clock, its truth records) is `capacity.sim.scheduler`; this module is its HTTP face: the
OpenAI-compatible routes, token streams paced against the wall clock (the simulated clock starts
at a request's arrival, when its body has been read; a stall of this process delays the delivery
of tokens but not the simulated times), `/sim/truth`, `/sim/info`, `/metrics` (Prometheus text:
with a draft, vLLM's speculative-decoding counters, `capacity.sim.drafts`), fault injection on
the streams, and the uvicorn plumbing. The tokens one engine step gives a sequence (several with
a draft) go out in one SSE chunk, as vLLM streams them.

The ground truth per request (`/sim/truth`) is in simulated time: when the request arrived, when
its first and last tokens were emitted, hence the true TTFT and TPOT that a perfect client would
measure. The benchmark client's error is its measurement minus this truth (in real time it
includes the server's own delivery delay under load).

Prompt tokens are counted as `ceil(chars / chars_per_token)` (there is no tokenizer here).
Fault injection draws one uniform number per request (seeded) against the shares of HTTP errors,
mid-stream disconnects, error events inside a 200 stream and stalls.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import json
import logging
import math
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal, cast

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from capacity.errors import InputError
from capacity.model.scenario import Scenario
from capacity.netstamp import kernel_stamps
from capacity.sim.drafts import prometheus_text
from capacity.sim.scheduler import SimConfig, SimSequence, SimulatedDisconnect, Simulator
from capacity.untrusted import loads_json

_WORDS = ("the", " capacity", " of", " a", " GPU", " is", " bounded", " by", " memory", ",",
          " bandwidth", " and", " compute", ".")

# -- HTTP ------------------------------------------------------------------------------------

def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}},
                        status_code=status)


def _prompt_chars(body: dict[str, Any], chat: bool) -> int:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("'messages' must be a non-empty list")
        total = 0
        for m in messages:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, str):
                total += len(content)
            elif isinstance(content, list):
                total += sum(len(str(p.get("text", ""))) for p in content if isinstance(p, dict))
        return total
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        prompt = "".join(str(p) for p in prompt)
    if not isinstance(prompt, str):
        raise ValueError("'prompt' must be a string")
    return len(prompt)


def shared_prefix(body: dict[str, Any], chat: bool) -> tuple[int, int]:
    """(key, characters) of the prompt's shared leading text, as a prefix cache sees it:
    a chat's leading system message(s), which chat templates put first, so every request
    with the same system text starts with the same tokens (key: a 56-bit hash of that text);
    (-1, 0) when there is none. A completion's prompt is one text and is not split (a real
    engine's block hashes would find a common start; this endpoint does not guess one)."""
    if not chat:
        return -1, 0
    messages = body.get("messages")
    parts: list[str] = []
    for m in messages if isinstance(messages, list) else []:
        if not (isinstance(m, dict) and m.get("role") == "system"
                and isinstance(m.get("content"), str)):
            break
        parts.append(m["content"])
    text = "".join(parts)
    if not text:
        return -1, 0
    key = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                         digest_size=7).digest(), "big")
    return key, len(text)


def _token_text(i: int) -> str:
    return _WORDS[(i - 1) % len(_WORDS)]


def create_app(scenario: Scenario, config: SimConfig | None = None) -> Starlette:
    """The ASGI app; `app.state.sim` is the Simulator (its `truth` is the ground truth)."""
    cfg = config or SimConfig()
    sim = Simulator(scenario, cfg)

    def authorized(request: Request) -> bool:
        if cfg.api_key is None:
            return True
        return request.headers.get("authorization", "") == f"Bearer {cfg.api_key}"

    async def models(request: Request) -> Response:
        if not authorized(request):
            return _error(401, "invalid API key", "authentication_error")
        return JSONResponse({"object": "list", "data": [{
            "id": sim.model_name, "object": "model", "created": 0, "owned_by": "capacity-sim",
            "max_model_len": sim.max_model_len}]})

    async def truth(request: Request) -> Response:
        return JSONResponse({"requests": list(sim.truth.values())})

    async def metrics(request: Request) -> Response:
        return Response(prometheus_text(sim.model_name, sim.acceptance, speedup=cfg.speedup,
                                        running=len(sim.running),
                                        waiting=len(sim.waiting)),
                        media_type="text/plain; version=0.0.4; charset=utf-8")

    async def info(request: Request) -> Response:
        p = sim.physics
        acc = sim.acceptance
        draft = None if acc is None else {
            "draft": acc.draft.key, "acceptance_length": acc.draft.acceptance_length,
            "acceptance_rate": acc.rate, "drafts": acc.drafts,
            "draft_tokens": acc.draft_tokens, "accepted_tokens": acc.accepted_tokens}
        return JSONResponse({"speculative": draft,
            "model": sim.model_name, "gpu": scenario.gpu.key, "slots": p.slots,
            "engine": sim.profile.key, "token_budget_tokens": sim.profile.token_budget_tokens,
            "kv_block_tokens": sim.profile.kv_block_tokens, "kv_pool_bytes": p.kv_budget_bytes,
            "offload_ms_per_pass": p.offload_s * 1e3,
            "c_vram": p.c_vram, "speedup": cfg.speedup, "chars_per_token": cfg.chars_per_token,
            "http_stack": getattr(request.app.state, "http_stack", None),
            "max_batch_seen": sim.max_batch_seen, "waiting": len(sim.waiting),
            "running": len(sim.running), "faults": sim.fault_counts, "clock": sim.clock,
            "behind_max_ms": sim.behind_max_ms,
            "prefix_hits": sim.prefix_cache.hits, "prefix_misses": sim.prefix_cache.misses,
            "loop_lag_max_ms": max(sim.loop_lag_ms, default=0.0),
            "loop_lag_p99_ms": sorted(sim.loop_lag_ms)[int(0.99 * (len(sim.loop_lag_ms) - 1))]
            if sim.loop_lag_ms else 0.0})

    async def completions(request: Request) -> Response:
        return await handle(request, chat=request.url.path.endswith("/chat/completions"))

    async def handle(request: Request, chat: bool) -> Response:
        if not authorized(request):
            return _error(401, "invalid API key", "authentication_error")
        try:
            raw = await request.body()
            # the request has arrived when its body has: a real server cannot start earlier,
            # so a client that sends its body late is measured late, as it should be. With
            # httptools the time is when the body's last byte reached the socket (stamped by
            # the protocol, before this handler's turn among a burst of requests), else now
            arrival = request.scope.get(ARRIVAL_KEY) or time.perf_counter()
            body = loads_json(raw.decode("utf-8"))  # UnicodeDecodeError is a ValueError
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            chars = _prompt_chars(body, chat)
            prefix_key, prefix_chars = shared_prefix(body, chat)
        except ValueError as exc:
            return _error(400, f"bad request: {exc}")
        model = body.get("model", sim.model_name)
        if model != sim.model_name:
            return _error(404, f"the model '{model}' does not exist", "not_found_error")
        stream = bool(body.get("stream", False))
        if cfg.reject_stream_options and "stream_options" in body:
            return _error(400, "unknown field: stream_options")
        opts = body.get("stream_options") or {}
        include_usage = stream and isinstance(opts, dict) and bool(opts.get("include_usage"))
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens",
                                                     cfg.default_max_tokens))
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return _error(400, f"max_tokens must be a whole number >= 1, got {max_tokens!r}")
        prompt_tokens = max(1, math.ceil(chars / cfg.chars_per_token))
        if prompt_tokens + max_tokens > sim.max_model_len:
            return _error(400, f"this model's maximum context length is {sim.max_model_len} "
                               f"tokens; the request has {prompt_tokens} prompt + {max_tokens} "
                               "output tokens")
        fault = sim.draw_fault()
        if fault == "http_error":
            return _error(500, "injected fault: internal server error", "server_error")
        # the shared leading text's whole tokens (the cache holds whole tokens of it)
        prefix_tokens = min(prompt_tokens - 1, math.floor(prefix_chars / cfg.chars_per_token))
        sent = arrival
        lat_s = scenario.request_latency_ms / 1e3 / cfg.speedup
        if lat_s > 0:  # the server's front end: the engine sees the request this much later
            await asyncio.sleep(max(0.0, arrival + lat_s - time.perf_counter()))
            arrival += lat_s
        seq = sim.submit(prompt_tokens=prompt_tokens, max_tokens=max_tokens,
                         ignore_eos=bool(body.get("ignore_eos", False)), fault=fault,
                         arrival_s=arrival, prefix_key=prefix_key if prefix_tokens > 0 else -1,
                         prefix_tokens=max(0, prefix_tokens),
                         sent_s=sent if lat_s > 0 else None)
        created = int(time.time())
        kind = "chat.completion" if chat else "text_completion"
        if not stream:
            return await whole(seq, chat, kind, created)
        return StreamingResponse(stream_body(seq, chat, kind, created, include_usage),
                                 media_type="text/event-stream",
                                 headers={"x-sim-request-id": seq.id})

    def usage(seq: SimSequence) -> dict[str, Any]:
        # the prefix cache's hits as vLLM reports them (--enable-prompt-tokens-details)
        return {"prompt_tokens": seq.prompt_tokens, "completion_tokens": seq.emitted,
                "total_tokens": seq.prompt_tokens + seq.emitted,
                "prompt_tokens_details": {"cached_tokens": seq.cached_tokens}}

    async def whole(seq: SimSequence, chat: bool, kind: str, created: int) -> Response:
        try:
            while await seq.out.get() is not None:
                pass
        finally:
            if not seq.done:
                seq.cancelled = True
                sim.record(seq, "abandoned")
        text = "".join(_token_text(i) for i in range(1, seq.emitted + 1))
        choice: dict[str, Any] = ({"index": 0, "message": {"role": "assistant", "content": text},
                                   "finish_reason": seq.finish_reason} if chat else
                                  {"index": 0, "text": text, "finish_reason": seq.finish_reason})
        return JSONResponse({"id": seq.id, "object": kind, "created": created,
                             "model": sim.model_name, "choices": [choice], "usage": usage(seq)},
                            headers={"x-sim-request-id": seq.id})

    async def stream_body(seq: SimSequence, chat: bool, kind: str, created: int,
                          include_usage: bool) -> AsyncIterator[bytes]:
        obj = kind + (".chunk" if chat else "")
        head = (f'{{"id":"{seq.id}","object":"{obj}","created":{created},'
                f'"model":{json.dumps(sim.model_name)},"choices":[')
        tail = "]}"
        if include_usage:
            tail = ']' + ',"usage":null}'
        fault_at = max(1, seq.target_tokens // 2)
        try:
            if chat:  # the early role chunk that must not count as the first token
                yield (f'data: {head}{{"index":0,"delta":{{"role":"assistant","content":""}},'
                       f'"finish_reason":null}}{tail}\n\n').encode()
            shown = 0  # tokens streamed so far; an item is the index of a step's last token
            while True:
                i = await seq.out.get()
                if i is None:
                    break
                text = json.dumps("".join(_token_text(j) for j in range(shown + 1, i + 1)))
                shown = i
                piece = (f'{{"index":0,"delta":{{"content":{text}}},"finish_reason":null}}' if chat
                         else f'{{"index":0,"text":{text},"finish_reason":null}}')
                yield f"data: {head}{piece}{tail}\n\n".encode()
                if seq.fault is not None and i >= fault_at:
                    seq.cancelled = True
                    sim.record(seq, seq.fault)
                    if seq.fault == "disconnect":
                        raise SimulatedDisconnect("injected fault: connection dropped mid-stream")
                    if seq.fault == "error_event":
                        err = {"error": {"message": "injected fault: engine error mid-stream",
                                         "type": "server_error", "code": 500}}
                        yield f"data: {json.dumps(err)}\n\n".encode()
                        return
                    await asyncio.sleep(cfg.stall_s / cfg.speedup)
                    return
            final = (f'{{"index":0,"delta":{{}},"finish_reason":"{seq.finish_reason}"}}' if chat
                     else f'{{"index":0,"text":"","finish_reason":"{seq.finish_reason}"}}')
            yield f"data: {head}{final}{tail}\n\n".encode()
            if include_usage:
                u = {"id": seq.id, "object": obj, "created": created, "model": sim.model_name,
                     "choices": [], "usage": usage(seq)}
                yield f"data: {json.dumps(u)}\n\n".encode()
            yield b"data: [DONE]\n\n"
        finally:
            if not seq.done and not seq.cancelled:
                seq.cancelled = True
                sim.record(seq, "abandoned")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group():  # import anyio's backend now, not on request 1
            pass
        await sim.start()
        try:
            yield
        finally:
            await sim.stop()

    app = Starlette(routes=[
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/sim/truth", truth, methods=["GET"]),
        Route("/sim/info", info, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ], lifespan=lifespan)
    app.state.sim = sim
    return app


class _QuietDisconnects(logging.Filter):
    """Drop uvicorn's traceback for the disconnects we inject on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        seen = 0
        while exc is not None and seen < 10:
            if isinstance(exc, SimulatedDisconnect):
                return False
            if isinstance(exc, BaseExceptionGroup):
                if any(isinstance(e, SimulatedDisconnect) for e in exc.exceptions):
                    return False
            exc = exc.__cause__ or exc.__context__
            seen += 1
        return True


def quiet_injected_faults() -> None:
    """Install the filter on uvicorn's error logger (idempotent)."""
    log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietDisconnects) for f in log.filters):
        log.addFilter(_QuietDisconnects())


def bind_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening TCP socket (port 0 = a free port)."""
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted connections only when
    # the listening socket says it is TCP; without it Nagle + delayed ACK hold small SSE
    # chunks for up to 40 ms
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port} ({exc.strerror}); "
                         "pick another --port") from None
    sock.listen(2048)
    return sock


HttpStack = Literal["auto", "plain"]
ARRIVAL_KEY = "capacity.arrival_s"
"""ASGI scope key: when the request's last byte reached the socket (perf_counter s)."""


def _stamping_httptools() -> Any:
    """uvicorn's httptools protocol, stamping when each request's last byte arrived (the
    chunk that completed it) into its scope: the same place as the client's receive stamps
    (capacity.bench.stamped), so the truth's arrival does not include the time the request
    waited behind a burst of others for the handler's turn."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class StampingHttpTools(HttpToolsProtocol):
        _rx_s = 0.0
        _kernel_ns = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            # on Linux, the kernel's receive time of each read (capacity.netstamp): a burst of
            # requests is stamped as it arrived, not as the loop got to each one
            kernel_stamps(transport, self._on_kernel_stamp)

        def _on_kernel_stamp(self, ns: int) -> None:
            self._kernel_ns = ns

        def data_received(self, data: bytes) -> None:
            stamp, self._kernel_ns = self._kernel_ns, 0
            self._rx_s = stamp / 1e9 if stamp else time.perf_counter()
            super().data_received(data)

        def on_message_complete(self) -> None:
            cast(dict[str, Any], self.scope)[ARRIVAL_KEY] = self._rx_s
            super().on_message_complete()

    return StampingHttpTools


def http_stack(stack: HttpStack = "auto") -> tuple[str, str]:
    """uvicorn's (loop, http) for a stack: `auto` takes httptools where installed (an HTTP
    parser in C: the endpoint then serves more streams per core, docs/benchmarks.md), `plain`
    is h11 (pure Python). The loop stays asyncio's: uvloop's timers have 1 ms resolution and
    may fire up to 1 ms early, which would deliver tokens before their simulated time (a
    perfect client would then read a TTFT below the truth)."""
    if stack == "plain":
        return "asyncio", "h11"
    return "asyncio", "httptools" if importlib.util.find_spec("httptools") is not None else "h11"


def uvicorn_config(app: Starlette, *, log_level: str = "warning", stack: HttpStack = "auto"
                   ) -> Any:
    import uvicorn

    quiet_injected_faults()
    loop, http = http_stack(stack)
    app.state.http_stack = f"{loop}+{http}"
    return uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="on",
                          timeout_keep_alive=30, backlog=2048, loop=loop,
                          http=_stamping_httptools() if http == "httptools" else http)


@contextlib.contextmanager
def serve_in_thread(app: Starlette, host: str = "127.0.0.1", port: int = 0,
                    timeout_s: float = 10.0, stack: HttpStack = "auto") -> Iterator[str]:
    """Run the app with uvicorn in a daemon thread; yields its base URL ('http://h:p/v1').

    The server is stopped (and the thread joined) when the block ends.
    """
    import uvicorn

    sock = bind_socket(host, port)
    server = uvicorn.Server(uvicorn_config(app, stack=stack))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name="sim-server")
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError("the simulated server did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout_s)
        sock.close()
