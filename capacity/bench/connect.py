"""The Measure page's Connect check (`connect_check`): whether a base URL is reachable, accepts the
key, lists models and streams a tiny request; every body it reads is capped (docs/reliability.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import httpx

from capacity.bench.engine_info import deadline_transport
from capacity.bench.guard import Guard, check_url, url_host
from capacity.bench.storage import redact, run_secrets
from capacity.bench.transport import MAX_BODY_BYTES, auth_headers
from capacity.untrusted import loads_json


@dataclass(frozen=True, kw_only=True)
class ConnectReport:
    """What a base URL answered: reachable, key accepted, models, and whether it streams."""

    reachable: bool
    auth_ok: bool | None = None
    status: int | None = None
    models: tuple[str, ...] = ()
    streams: bool | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.reachable and bool(self.auth_ok) and bool(self.models) and bool(self.streams)


def connect_check(base_url: str, api_key: str | None = None, *, endpoint: str = "chat",
                  timeout_s: float = 10.0,
                  transport: httpx.BaseTransport | None = None, guard: Guard | None = None,
                  simulator_urls: Sequence[str] = ()) -> ConnectReport:
    """GET {base}/models (reachability, auth, model list), then a 2-token streamed request.

    Each of the two exchanges ends within `timeout_s` (s), whole: connecting, the head and
    the body (`capacity.bench.engine_info.deadline_transport`), so a server that trickles a
    byte now and then (never tripping a read timeout) cannot hold the page. With `guard`, a
    URL the guard refuses raises InputError before anything is connected or resolved, so the
    report (reachable or not, HTTP statuses) only ever describes hosts the deployment allows.
    The report names neither the key nor a secret of the URL (`run_secrets`: the password of
    `http://user:pw@host`, a `?key=` value)."""
    if guard is not None:
        check_url(base_url, guard, simulator_urls)
    url_host(base_url)
    report = _connect(base_url, api_key, endpoint=endpoint, timeout_s=timeout_s,
                      transport=transport)
    secrets = run_secrets(api_key, base_url)
    return replace(report, message=redact(report.message, secrets),
                   models=tuple(redact(m, secrets) for m in report.models))


def _connect(base_url: str, api_key: str | None, *, endpoint: str, timeout_s: float,
             transport: httpx.BaseTransport | None) -> ConnectReport:
    base = base_url.rstrip("/")
    with _client(api_key, timeout_s, transport) as client:
        try:
            with client.stream("GET", base + "/models") as r:
                # a hostile server cannot stall or flood Connect: the body is read up to a cap
                raw, too_large = _read_capped(r, MAX_BODY_BYTES) if r.status_code < 400 \
                    else (b"", False)
        except httpx.TimeoutException as exc:
            return ConnectReport(reachable=False, message=f"{base}/models did not answer in "
                                 f"full within {timeout_s:g} s ({type(exc).__name__})")
        except httpx.HTTPError as exc:
            return ConnectReport(reachable=False, message=f"cannot reach {base}/models: "
                                 f"{type(exc).__name__}: {exc}")
        if r.status_code in (401, 403):
            return ConnectReport(reachable=True, auth_ok=False, status=r.status_code,
                                 message=f"{base}/models answered {r.status_code}: the API key "
                                         "is missing or wrong")
        if r.status_code >= 400:
            return ConnectReport(reachable=True, status=r.status_code,
                                 message=f"{base}/models answered HTTP {r.status_code}: is this "
                                         "an OpenAI-compatible base URL (ending in /v1)?")
        try:
            if too_large:
                raise ValueError("model list too large")
            data = loads_json(raw.decode("utf-8", "replace")).get("data", [])
            models = tuple(str(m["id"])[:200] for m in data[:MAX_MODELS]
                           if isinstance(m, dict) and "id" in m)
        except (ValueError, AttributeError, TypeError):
            return ConnectReport(reachable=True, auth_ok=True, status=r.status_code,
                                 message=f"{base}/models did not answer an OpenAI model list")
        if not models:
            return ConnectReport(reachable=True, auth_ok=True, status=r.status_code,
                                 message=f"{base}/models lists no model")
    with _client(api_key, timeout_s, transport) as client:  # the probe's own deadline
        streams, note = _stream_probe(client, base, models[0], endpoint)
        return ConnectReport(reachable=True, auth_ok=True, status=r.status_code, models=models,
                             streams=streams, message=note)


@contextmanager
def _client(api_key: str | None, timeout_s: float,
            transport: httpx.BaseTransport | None) -> Iterator[httpx.Client]:
    """A client for one exchange, every step of it ending `timeout_s` from now (a custom
    `transport`, in tests, keeps only httpx's own timeouts)."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=timeout_s, trust_env=False, follow_redirects=False,
                      headers=auth_headers(api_key),
                      transport=transport or deadline_transport(deadline)) as client:
        yield client


MAX_MODELS = 1000
"""Models of a `/models` answer listed (the page offers them in one select box)."""
PROBE_BYTES = 64 << 10
"""Connect's stream probe reads at most this much of the streamed answer (bytes)."""


def _has_data_line(buf: bytes) -> bool:
    return buf.startswith(b"data:") or b"\ndata:" in buf


def _read_capped(resp: httpx.Response, limit: int,
                 until: Callable[[bytes], bool] | None = None) -> tuple[bytes, bool]:
    """At most `limit` bytes of a streamed response (stopping early once `until` holds), and
    whether more was there: Connect never reads an unbounded body."""
    buf = bytearray()
    for chunk in resp.iter_bytes():
        buf += chunk
        if len(buf) > limit:
            return bytes(buf[:limit]), True
        if until is not None and until(bytes(buf)):
            break
    return bytes(buf), False


def _stream_probe(client: httpx.Client, base: str, model: str, endpoint: str
                  ) -> tuple[bool, str]:
    chat = endpoint == "chat"
    body: dict[str, Any] = {"model": model, "max_tokens": 2, "stream": True}
    if chat:
        body["messages"] = [{"role": "user", "content": "ping"}]
    else:
        body["prompt"] = "ping"
    path = "/chat/completions" if chat else "/completions"
    try:
        with client.stream("POST", base + path, json=body) as resp:
            if resp.status_code >= 400:
                return False, f"a streamed request answered HTTP {resp.status_code}"
            kind = resp.headers.get("content-type", "")
            head, _ = _read_capped(resp, PROBE_BYTES, until=_has_data_line)
            if _has_data_line(head):
                return True, "streams (server-sent events)"
            return False, f"the response is not a stream (content-type {kind or 'none'})"
    except httpx.HTTPError as exc:
        return False, f"a streamed request failed: {type(exc).__name__}: {exc}"
