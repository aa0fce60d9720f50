"""Misbehaving OpenAI-style servers on 127.0.0.1 for tests/hostile/test_server.py.

A `HostileServer` accepts connections on 127.0.0.1 (an ephemeral port) and hands each parsed
request to a route function that writes whatever bytes it likes to the socket: raw HTTP, so a
server can send what no framework would (a line that never ends, a body that never ends, a
stream of keep-alive comments). Every connection is closed after its answer; a route that
writes for ever stops when the client goes away or the server is closed.
"""

from __future__ import annotations

import asyncio
import csv
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODELS = {"object": "list", "data": [{"id": "m1", "object": "model"}]}


@dataclass(frozen=True, kw_only=True)
class Request:
    method: str
    path: str
    body: bytes


Route = Callable[[Request, socket.socket, threading.Event], None]


def head(status: int = 200, content_type: str = "text/event-stream",
         extra: dict[str, str] | None = None, length: int | None = None) -> bytes:
    """A status line and headers; no Content-Length unless given: the body ends at close."""
    lines = [f"HTTP/1.1 {status} X", f"content-type: {content_type}", "connection: close"]
    lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
    if length is not None:
        lines.append(f"content-length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def json_answer(obj: object, status: int = 200) -> bytes:
    body = json.dumps(obj).encode()
    return head(status, "application/json", length=len(body)) + body


def event(obj: object) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def token(text: str = "x", finish: str | None = None) -> bytes:
    return event({"id": "r1", "object": "chat.completion.chunk",
                  "choices": [{"index": 0, "delta": {"content": text},
                               "finish_reason": finish}]})


DONE = b"data: [DONE]\n\n"


def usage_event(completion: object, prompt: object = 10) -> bytes:
    return event({"id": "r1", "choices": [],
                  "usage": {"prompt_tokens": prompt, "completion_tokens": completion}})


def _read_request(conn: socket.socket) -> Request | None:
    data = b""
    while b"\r\n\r\n" not in data:
        got = conn.recv(65536)
        if not got:
            return None
        data += got
    header, _, rest = data.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    while len(rest) < length:
        got = conn.recv(65536)
        if not got:
            break
        rest += got
    return Request(method=method, path=path, body=rest[:length])


class HostileServer:
    """Serves `route` on 127.0.0.1 until `close`; the route answers every path (`models_or`
    adds the usual /v1/models)."""

    def __init__(self, route: Route) -> None:
        self.route = route
        self.stop = threading.Event()
        self.requests: list[Request] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            t = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(10)
            req = _read_request(conn)
            if req is None:
                return
            self.requests.append(req)
            self.route(req, conn, self.stop)
        except OSError:
            pass  # the client went away
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self._sock.close()
        self._accept.join(timeout=5)
        for t in self._threads:
            t.join(timeout=5)


def models_or(route: Callable[[Request, socket.socket, threading.Event], None]) -> Route:
    """`route` for completions, MODELS for /v1/models."""
    def both(req: Request, conn: socket.socket, stop: threading.Event) -> None:
        if req.path.endswith("/models"):
            conn.sendall(json_answer(MODELS))
        else:
            route(req, conn, stop)
    return both


def bench_rows(tmp_path: Path, server: HostileServer, bound_s: float, **kw: Any
               ) -> tuple[list[dict[str, str]], Any]:
    """One run against `server` within `bound_s` seconds (1 request at concurrency 1, no
    warm-up, 50 prompt characters, 4 tokens unless `kw` says otherwise): its requests.csv rows
    and the run's result."""
    from capacity.bench.client import run_bench
    from capacity.bench.config import BenchConfig

    args: dict[str, Any] = {"base_url": server.base_url, "concurrency": (1,), "requests": 1,
                            "warmup": 0, "prompt_chars": 50, "max_tokens": 4, "timeout_s": 30.0,
                            "out_dir": str(tmp_path), "label": "h"} | kw
    result = asyncio.run(asyncio.wait_for(
        run_bench(BenchConfig(**args), emit=lambda m: None), timeout=bound_s))
    with open(Path(result.run_dir) / "requests.csv", newline="") as fh:
        return list(csv.DictReader(fh)), result
