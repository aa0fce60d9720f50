"""A simulated OpenAI-compatible endpoint whose timings come from the capacity formulas.

See docs/bench.md (sim-server).

It behaves like a catalog model on a catalog GPU: continuous batching with at most
`slots = min(C_vram (F3, at the scenario's context), max_num_seqs)` sequences in the batch; a
request that finds every slot busy waits in a FIFO queue. One asyncio scheduler loop runs the
engine: when sequences are waiting and slots are free it prefills them (F6, "with attention",
summed over the admitted prompts; the running sequences wait, as without chunked prefill) and the
prefill emits each one's first token; otherwise it runs one decode step of F4 for the current
batch size and the batch's mean context (prompt + tokens so far), emitting one token to every
running sequence. `speedup` divides every delay.

The server records its own ground truth per request (`/sim/truth`): when the request arrived,
when its first and last tokens were emitted, hence the true TTFT and TPOT that a perfect client
would measure. The benchmark client's error is its measurement minus this truth.

Prompt tokens are counted as `ceil(chars / chars_per_token)` (there is no tokenizer here).
Fault injection draws one uniform number per request (seeded) against the shares of HTTP errors,
mid-stream disconnects, error events inside a 200 stream and stalls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import random
import socket
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from capacity.errors import InputError
from capacity.model.scenario import Scenario, evaluate

FAULT_KINDS = ("http_error", "disconnect", "error_event", "stall")
"""Injected faults, in the order their shares are stacked on the unit interval."""

_WORDS = ("the", " capacity", " of", " a", " GPU", " is", " bounded", " by", " memory", ",",
          " bandwidth", " and", " compute", ".")
_TRUTH_KEEP = 200_000
_UNIX_MINUS_PERF = time.time() - time.perf_counter()
"""Offset from perf_counter to wall-clock seconds (for comparing with a client's timestamps)."""


class SimulatedDisconnect(Exception):
    """Raised inside a stream to drop the connection on purpose (fault injection)."""


@dataclass(frozen=True, kw_only=True)
class SimConfig:
    """Knobs of the simulated server that are not physics."""

    speedup: float = 1.0
    max_num_seqs: int = 256
    chars_per_token: float = 4.0
    eos_after_tokens: int = 0
    """Without `ignore_eos`, stop after this many tokens (finish_reason "stop"); 0 = never."""
    default_max_tokens: int = 256
    fail_http: float = 0.0
    fail_disconnect: float = 0.0
    fail_error_event: float = 0.0
    fail_stall: float = 0.0
    stall_s: float = 3600.0
    reject_stream_options: bool = False
    """Answer 400 to requests that carry `stream_options` (servers that predate it)."""
    seed: int = 0
    served_model_name: str | None = None
    api_key: str | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.speedup) and self.speedup > 0):
            raise InputError(f"speedup must be > 0, got {self.speedup}")
        if self.max_num_seqs < 1:
            raise InputError(f"max-num-seqs must be >= 1, got {self.max_num_seqs}")
        if self.chars_per_token <= 0:
            raise InputError(f"chars per token must be > 0, got {self.chars_per_token}")
        shares = (self.fail_http, self.fail_disconnect, self.fail_error_event, self.fail_stall)
        if any(not 0 <= s <= 1 for s in shares) or sum(shares) > 1:
            raise InputError("fault shares must each be in [0, 1] and sum to at most 1, "
                             f"got {shares}")


@dataclass(kw_only=True, eq=False)
class _Seq:
    id: str
    prompt_tokens: int
    target_tokens: int
    finish_reason: str
    fault: str | None
    arrival_s: float
    out: asyncio.Queue[int | None] = field(default_factory=asyncio.Queue)
    emitted: int = 0
    admitted_s: float = math.nan
    first_s: float = math.nan
    last_s: float = math.nan
    cancelled: bool = False
    done: bool = False


class SimPhysics:
    """Prefill and decode-step times (seconds, before speedup) from a Scenario, cached."""

    def __init__(self, scenario: Scenario, max_num_seqs: int) -> None:
        self.scenario = scenario
        ev = evaluate(scenario, [1])
        self.c_vram = int(ev.max_concurrency_vram)
        if self.c_vram < 1:
            raise InputError(
                f"{scenario.variant.key} leaves no room for KV cache on {scenario.gpu.name} at "
                f"{scenario.context_tokens} tokens: pick a bigger GPU, a smaller format or context")
        self.slots = min(self.c_vram, max_num_seqs)
        self._step: dict[tuple[int, int], float] = {}
        self._prefill: dict[int, float] = {}

    def prefill_s(self, prompt_tokens: int) -> float:
        """F6 prefill time (s) of one prompt, with the attention term."""
        t = self._prefill.get(prompt_tokens)
        if t is None:
            ev = evaluate(self.scenario, [1], [float(max(prompt_tokens, 1))])
            t = float(ev.ttft_s.reshape(-1)[0])
            self._prefill[prompt_tokens] = t
        return t

    def step_s(self, batch: int, mean_context_tokens: float) -> float:
        """F4 decode step time (s) for `batch` sequences at a mean context (16-token buckets)."""
        bucket = max(1, int(round(mean_context_tokens / 16.0)))
        key = (batch, bucket)
        t = self._step.get(key)
        if t is None:
            ev = evaluate(self.scenario, [float(batch)], [bucket * 16.0])
            t = float(ev.decode.step_ms.reshape(-1)[0]) / 1e3
            self._step[key] = t
        return t


class Simulator:
    """The engine: a FIFO of waiting sequences, a running batch, one scheduler task."""

    def __init__(self, scenario: Scenario, config: SimConfig) -> None:
        self.config = config
        self.physics = SimPhysics(scenario, config.max_num_seqs)
        self.model_name = config.served_model_name or scenario.variant.key
        self.max_model_len = scenario.model.max_context_tokens
        self.waiting: deque[_Seq] = deque()
        self.running: list[_Seq] = []
        self.truth: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._rng = random.Random(config.seed)
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._lag_task: asyncio.Task[None] | None = None
        self.loop_lag_ms: deque[float] = deque(maxlen=6000)
        self.max_batch_seen = 0
        self.fault_counts: dict[str, int] = dict.fromkeys(FAULT_KINDS, 0)

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="sim-scheduler")
        self._lag_task = asyncio.create_task(self._lag(), name="sim-lag")

    async def stop(self) -> None:
        for task in (self._task, self._lag_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _lag(self) -> None:
        """Oversleep of a 10 ms ticker: how late this server's event loop runs (ms)."""
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            self.loop_lag_ms.append((time.perf_counter() - t - 0.01) * 1e3)

    # -- requests ----------------------------------------------------------------------------
    def draw_fault(self) -> str | None:
        c = self.config
        u = self._rng.random()
        edge = 0.0
        for kind, share in zip(FAULT_KINDS, (c.fail_http, c.fail_disconnect, c.fail_error_event,
                                             c.fail_stall), strict=True):
            edge += share
            if u < edge:
                self.fault_counts[kind] += 1
                return kind
        return None

    def submit(self, *, prompt_tokens: int, max_tokens: int, ignore_eos: bool,
               fault: str | None, arrival_s: float) -> _Seq:
        eos = self.config.eos_after_tokens
        if not ignore_eos and 0 < eos < max_tokens:
            target, reason = eos, "stop"
        else:
            target, reason = max_tokens, "length"
        seq = _Seq(id=f"sim-{uuid.uuid4().hex[:24]}", prompt_tokens=prompt_tokens,
                   target_tokens=target, finish_reason=reason, fault=fault, arrival_s=arrival_s)
        self.waiting.append(seq)
        assert self._wake is not None, "the simulator is not started"
        self._wake.set()
        return seq

    def record(self, seq: _Seq, status: str) -> None:
        """Store the ground truth of a finished, failed or abandoned request."""
        n = seq.emitted
        tpot = (seq.last_s - seq.first_s) / (n - 1) * 1e3 if n > 1 else math.nan
        self.truth[seq.id] = {
            "id": seq.id, "status": status, "fault": seq.fault,
            "prompt_tokens": seq.prompt_tokens, "output_tokens": n,
            "arrival_s": seq.arrival_s,
            "arrival_unix_s": seq.arrival_s + _UNIX_MINUS_PERF,
            "first_token_unix_s": seq.first_s + _UNIX_MINUS_PERF,
            "queue_ms": (seq.admitted_s - seq.arrival_s) * 1e3,
            "ttft_ms": (seq.first_s - seq.arrival_s) * 1e3,
            "tpot_ms": tpot,
            "e2e_ms": (seq.last_s - seq.arrival_s) * 1e3,
        }
        while len(self.truth) > _TRUTH_KEEP:
            self.truth.popitem(last=False)

    # -- the engine --------------------------------------------------------------------------
    async def _loop(self) -> None:
        assert self._wake is not None
        speed = self.config.speedup
        target = time.perf_counter()
        while True:
            if not self.waiting and not self.running:
                self._wake.clear()
                await self._wake.wait()
                target = time.perf_counter()
            self.running = [s for s in self.running if not s.cancelled]
            admitted: list[_Seq] = []
            while self.waiting and len(self.running) + len(admitted) < self.physics.slots:
                s = self.waiting.popleft()
                if not s.cancelled:
                    s.admitted_s = target
                    admitted.append(s)
            if admitted:
                dur = sum(self.physics.prefill_s(s.prompt_tokens) for s in admitted)
                batch = admitted
            elif self.running:
                ctx = sum(s.prompt_tokens + s.emitted for s in self.running) / len(self.running)
                dur = self.physics.step_s(len(self.running), ctx)
                batch = self.running
            else:
                continue
            target += dur / speed
            # always yield, even when behind: the streams must send this step's tokens before
            # the next step is emitted, or delivery turns bursty and the truth runs ahead
            await asyncio.sleep(max(0.0, target - time.perf_counter()))
            now = time.perf_counter()
            if now - target > 0.002:  # overloaded or a long pause: do not replay missed steps
                target = now
            self._emit(batch, now)
            if admitted:
                self.running.extend(s for s in admitted if not s.done)
            self.max_batch_seen = max(self.max_batch_seen, len(self.running))

    def _emit(self, batch: list[_Seq], now: float) -> None:
        for s in batch:
            if s.cancelled or s.done:
                continue
            s.emitted += 1
            if s.emitted == 1:
                s.first_s = now
            s.last_s = now
            s.out.put_nowait(s.emitted)
            if s.emitted >= s.target_tokens:
                s.done = True
                s.out.put_nowait(None)
                self.record(s, "ok")
        if any(s.done or s.cancelled for s in batch):
            self.running = [s for s in self.running if not (s.done or s.cancelled)]


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

    async def info(request: Request) -> Response:
        p = sim.physics
        return JSONResponse({
            "model": sim.model_name, "gpu": scenario.gpu.key, "slots": p.slots,
            "c_vram": p.c_vram, "speedup": cfg.speedup, "chars_per_token": cfg.chars_per_token,
            "max_batch_seen": sim.max_batch_seen, "waiting": len(sim.waiting),
            "running": len(sim.running), "faults": sim.fault_counts,
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
            # the request has arrived when its body has: a real server (vLLM stamps
            # arrival_time when the engine gets the parsed request) cannot start earlier, so
            # a client that sends its body late is measured late, as it should be
            arrival = time.perf_counter()
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            chars = _prompt_chars(body, chat)
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
        seq = sim.submit(prompt_tokens=prompt_tokens, max_tokens=max_tokens,
                         ignore_eos=bool(body.get("ignore_eos", False)), fault=fault,
                         arrival_s=arrival)
        created = int(time.time())
        kind = "chat.completion" if chat else "text_completion"
        if not stream:
            return await whole(seq, chat, kind, created)
        return StreamingResponse(stream_body(seq, chat, kind, created, include_usage),
                                 media_type="text/event-stream",
                                 headers={"x-sim-request-id": seq.id})

    def usage(seq: _Seq) -> dict[str, int]:
        return {"prompt_tokens": seq.prompt_tokens, "completion_tokens": seq.emitted,
                "total_tokens": seq.prompt_tokens + seq.emitted}

    async def whole(seq: _Seq, chat: bool, kind: str, created: int) -> Response:
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

    async def stream_body(seq: _Seq, chat: bool, kind: str, created: int,
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
            while True:
                i = await seq.out.get()
                if i is None:
                    break
                text = json.dumps(_token_text(i))
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


def uvicorn_config(app: Starlette, *, log_level: str = "warning") -> Any:
    import uvicorn

    quiet_injected_faults()
    return uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="on",
                          timeout_keep_alive=30, backlog=2048, loop="asyncio", http="h11")


@contextlib.contextmanager
def serve_in_thread(app: Starlette, host: str = "127.0.0.1", port: int = 0,
                    timeout_s: float = 10.0) -> Iterator[str]:
    """Run the app with uvicorn in a daemon thread; yields its base URL ('http://h:p/v1').

    The server is stopped (and the thread joined) when the block ends.
    """
    import uvicorn

    sock = bind_socket(host, port)
    server = uvicorn.Server(uvicorn_config(app))
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
