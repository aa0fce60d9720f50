"""What a serving engine says about itself beside its OpenAI API: llama.cpp's `/health`,
`/slots` and `/props`, and the Prometheus `/metrics` of llama.cpp (`--metrics`), vLLM and SGLang
(docs/bench.md, "Real engines").

`capacity bench` reads them before and after a run (GET only, on the base URL's host; every
failure is silent: most servers have some of them) and stores in meta.json the engine, its
slots (llama.cpp's fixed number of parallel sequences, each with its share of the context) and
the server's own counters over the run: for llama.cpp the mean time per output token
(`tokens_predicted_seconds_total / tokens_predicted_total`) and the prompt rate, which need no
client clock at all; for an engine that decodes speculatively, the run's mean acceptance length
(`spec_acceptance`: vLLM's draft counters, SGLang's gauge).
"""

from __future__ import annotations

import math
import re
import ssl
import time
from collections.abc import Iterable, Mapping
from typing import Any, Final

import httpcore
import httpx

from capacity.bench.transport import auth_headers
from capacity.errors import InputError
from capacity.untrusted import loads_json

MAX_BODY_BYTES = 1 << 20
"""Largest introspection answer read, bytes (a /metrics page is a few KiB)."""
SIM_ENGINE: Final = "capacity sim-server"
"""How `probe_engine` names the simulated endpoint (its `/metrics` prefix `capacity_sim:`)."""
ENGINE_PREFIXES: tuple[tuple[str, str], ...] = (
    ("capacity_sim:", SIM_ENGINE), ("llamacpp:", "llama.cpp"), ("vllm:", "vLLM"),
    ("sglang:", "SGLang"))
"""Metric prefixes that name the engine, the first found wins (the simulated endpoint exposes
vLLM's speculative-decoding counters beside its own metrics)."""
VLLM_SPEC = "vllm:spec_decode_num_"
"""vLLM's speculative-decoding counters: `drafts` (one per sequence per step), `draft_tokens`,
`accepted_tokens` (the bonus token not counted), each `_total` or without the suffix."""
SGLANG_SPEC = "sglang:spec_accept_length"
"""SGLang's gauge of the mean acceptance length (its last logging interval's)."""
MAX_ACCEPTANCE_LENGTH = 17.0
"""The longest acceptance length believed (tokens per step: a draft of 16 and the bonus token,
`capacity.model.speculative.MAX_DEPTH` + 1); beyond it a server's figure is unknown."""


def server_root(base_url: str) -> str:
    """The server's root URL: the base URL without a trailing `/v1`."""
    root = base_url.rstrip("/")
    return root[:-3] if root.endswith("/v1") else root


_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text format -> {metric name: value}, summed over label sets; comments,
    histograms' `_bucket` lines and non-finite values are skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if m is None or m.group(1).endswith("_bucket"):
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if math.isfinite(value):
            out[m.group(1)] = out.get(m.group(1), 0.0) + value
    return out


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write ends by `deadline` (monotonic clock, s): each
    waits at most the time left, and none starts once it has passed (`ReadTimeout`)."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline

    def _left(self, timeout: float | None, late: type[Exception]) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise late("the exchange passed its deadline")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(
            ssl_context, server_hostname, self._left(timeout, httpcore.ConnectTimeout)),
            self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """The synchronous sockets of httpcore, every step of every exchange (connect, TLS, the
    request, the status line and headers, the body) ending by one `deadline`."""

    def __init__(self, deadline: float) -> None:
        self._inner = httpcore.SyncBackend()
        self._deadline = deadline

    def _left(self, timeout: float | None) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise httpcore.ConnectTimeout("the exchange passed its deadline")
        return left if timeout is None else min(timeout, left)

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_tcp(
            host, port, timeout=self._left(timeout), local_address=local_address,
            socket_options=socket_options), self._deadline)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None
                            ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(
            path, timeout=self._left(timeout), socket_options=socket_options), self._deadline)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(min(seconds, max(0.0, self._deadline - time.monotonic())))


def deadline_transport(deadline: float) -> httpx.HTTPTransport:
    """An httpx transport whose exchanges all end by `deadline` (monotonic clock, s). httpx
    takes no network backend, so its pool is replaced by the pool it would build on
    `_DeadlineBackend` (as `capacity.bench.transport.one_write_transport` does). The engine
    probe and the Measure page's Connect check (`capacity.bench.connect`) go through it."""
    tls = ssl.create_default_context()
    transport = httpx.HTTPTransport(verify=tls, trust_env=False)
    transport._pool = httpcore.ConnectionPool(ssl_context=tls,
                                              network_backend=_DeadlineBackend(deadline))
    return transport


def _get(client: httpx.Client, url: str, deadline: float) -> str | None:
    """The body of a 200 answer (at most MAX_BODY_BYTES, UTF-8, complete before `deadline` on
    the monotonic clock), else None. The deadline bounds the whole exchange: the connection,
    the status line and headers (`_DeadlineBackend`) and the body, since a server that sends a
    byte now and then never trips httpx's read timeout, and a hostile one would hold the
    run's start forever."""
    try:
        with client.stream("GET", url) as resp:
            if resp.status_code != 200:
                return None
            body = bytearray()
            for block in resp.iter_bytes():
                body += block
                if len(body) > MAX_BODY_BYTES or time.monotonic() > deadline:
                    return None
            return body.decode("utf-8", errors="replace")
    except httpx.HTTPError:
        return None


def _json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return loads_json(text)
    except ValueError:
        return None


def probe_engine(base_url: str, api_key: str | None = None, *, timeout_s: float = 3.0,
                 transport: httpx.BaseTransport | None = None) -> dict[str, Any]:
    """The engine's self-description: {"engine", "slots", "slot_ctx_tokens", "health",
    "metrics"} with whatever the server answered (missing keys: it did not). The whole probe,
    its three exchanges together (connecting, the headers, the bodies), ends within
    `timeout_s` (s): what has not answered by then is missing. (Resolving a host name is the
    system resolver's, outside this deadline.)"""
    root = server_root(base_url)
    headers = auth_headers(api_key)
    info: dict[str, Any] = {}
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=timeout_s, headers=headers, trust_env=False,
                      transport=transport or deadline_transport(deadline),
                      follow_redirects=False) as client:
        health_text = _get(client, f"{root}/health", deadline)
        if health_text is not None:
            health = _json(health_text)
            info["health"] = str(health.get("status"))[:40] if isinstance(health, dict) else "ok"
        slots = _json(_get(client, f"{root}/slots", deadline))
        if isinstance(slots, list) and slots and all(isinstance(s, dict) for s in slots):
            info["engine"] = "llama.cpp"
            info["slots"] = len(slots)
            ctx = slots[0].get("n_ctx")
            if isinstance(ctx, int) and ctx > 0:
                info["slot_ctx_tokens"] = ctx
        metrics = parse_prometheus(_get(client, f"{root}/metrics", deadline) or "")
        if metrics:
            info["metrics"] = metrics
            for prefix, engine in ENGINE_PREFIXES:
                if any(k.startswith(prefix) for k in metrics):
                    info.setdefault("engine", engine)
            speedup = metrics.get(SIM_SPEEDUP)
            if info.get("engine") == SIM_ENGINE and speedup is not None \
                    and math.isfinite(speedup) and speedup > 0:
                info["sim_speedup"] = speedup
        if info.get("engine") == SIM_ENGINE:   # its scheduling profile
            sim = _json(_get(client, f"{root}/sim/info", deadline))
            profile = sim.get("engine") if isinstance(sim, dict) else None
            if isinstance(profile, str) and re.fullmatch(r"[a-z0-9_]{1,32}", profile):
                info["sim_engine"] = profile
    return info


ENGINE_PROFILES: dict[str, str] = {"vLLM": "vllm", "SGLang": "sglang", "llama.cpp": "llamacpp"}
"""The engine `probe_engine` names -> the scheduling profile of data/engines.toml that models
it (the simulated endpoint: its own profile, `sim_engine`)."""


def engine_profile_of(meta: Mapping[str, Any]) -> str | None:
    """The scheduling profile (data/engines.toml's key) of the engine a run measured, from its
    meta.json's `engine_info`: vLLM -> 'vllm', SGLang -> 'sglang', llama.cpp -> 'llamacpp', the
    simulated endpoint -> the profile it ran (`sim_engine`); None where the engine is unknown.
    The Results page predicts a run's levels under load with it."""
    info = meta.get("engine_info")
    if not isinstance(info, Mapping):
        return None
    engine = info.get("engine")
    if engine == SIM_ENGINE:
        sim = info.get("sim_engine")
        return sim if isinstance(sim, str) and sim else None
    return ENGINE_PROFILES.get(engine) if isinstance(engine, str) else None


SIM_SPEEDUP = "capacity_sim:speedup"
"""The simulated endpoint's gauge of its `--speedup` (`capacity.sim.drafts.prometheus_text`):
`probe_engine` stores it as `sim_speedup`."""


def sim_speedup(meta: Mapping[str, Any]) -> float:
    """The speedup of the simulated endpoint a run measured (its meta.json's
    `engine_info["sim_speedup"]`), 1 for any other server or a run stored before it was
    recorded: every time the run measured is that many times shorter than the simulated GPU's."""
    info = meta.get("engine_info")
    value = info.get("sim_speedup") if isinstance(info, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 1.0
    return float(value) if math.isfinite(value) and value > 0 else 1.0


def speedup_warning(meta: Mapping[str, Any]) -> str | None:
    """The warning a run of a sped-up simulated endpoint carries (None: real time)."""
    x = sim_speedup(meta)
    if x == 1.0:
        return None
    return (f"the endpoint is capacity sim-server at --speedup {x:g}: every time measured is "
            f"{x:g} times shorter than the simulated GPU's, so this run cannot be calibrated on "
            "or compared with a GPU's prediction (run the simulator with --speedup 1 for that)")


def check_real_time(meta: Mapping[str, Any], what: str) -> None:
    """InputError where the run (its meta.json) measured a simulated endpoint at a speedup
    other than 1: a fit of its times would read a GPU `speedup` times faster than the one
    simulated (`what`: the run, as the message names it)."""
    x = sim_speedup(meta)
    if x != 1.0:
        raise InputError(f"{what} measured capacity sim-server at --speedup {x:g}: its times "
                         f"are {x:g} times shorter than the simulated GPU's; calibrate on a "
                         "run of the simulator at --speedup 1")


def spec_acceptance(before: Mapping[str, float], after: Mapping[str, float]) -> float | None:
    """The run's mean acceptance length (tokens per sequence per verify step, the bonus token
    included) from two scrapes, or None (unknown).

    vLLM: 1 + delta accepted / delta drafts over the run (`VLLM_SPEC` counters, with or without
    `_total`). SGLang: its gauge after the run (`SGLANG_SPEC`). None when neither is there, no
    draft ran, or the figures are impossible (a counter going back, more accepted than drafted
    tokens, a length outside 1..`MAX_ACCEPTANCE_LENGTH`): a server's page is not trusted.
    Unit: tokens. Source: vLLM's SpecDecodingProm metrics; docs/bench.md.
    """
    def delta(name: str) -> float | None:
        for key in (f"{VLLM_SPEC}{name}_total", f"{VLLM_SPEC}{name}"):
            if key in after:
                return after[key] - before.get(key, 0.0)
        return None

    drafts, tokens, accepted = delta("drafts"), delta("draft_tokens"), delta("accepted_tokens")
    tau: float | None = None
    if drafts is not None and accepted is not None and drafts > 0 and accepted >= 0:
        if tokens is None or accepted <= tokens:
            tau = 1.0 + accepted / drafts
    elif SGLANG_SPEC in after:
        tau = after[SGLANG_SPEC]
    return tau if tau is not None and 1.0 <= tau <= MAX_ACCEPTANCE_LENGTH else None


def metrics_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """What the server's own counters say about the run between two scrapes: every counter's
    increase (`*_total`), and for llama.cpp the mean time per output token of a sequence (ms)
    and the prompt rate of a sequence (tokens/s) over the run (llama.cpp adds up the time of
    each slot, so these are per sequence, not per batched step); with speculative decoding,
    the run's mean acceptance length `spec_acceptance_length` (tokens, `spec_acceptance`;
    absent: unknown)."""
    out = {k: after[k] - before.get(k, 0.0) for k in after if k.endswith("_total")}
    tau = spec_acceptance(before, after)
    if tau is not None:
        out["spec_acceptance_length"] = tau
    tokens = out.get("llamacpp:tokens_predicted_total", 0.0)
    decode_s = out.get("llamacpp:tokens_predicted_seconds_total", 0.0)
    if tokens > 0 and decode_s > 0:  # each slot adds its own generation time: per sequence
        out["llamacpp_tpot_ms"] = 1e3 * decode_s / tokens
    prompt_s = out.get("llamacpp:prompt_seconds_total", 0.0)
    prompt_n = out.get("llamacpp:prompt_tokens_total", 0.0)
    if prompt_s > 0 and prompt_n > 0:
        out["llamacpp_prompt_tok_s"] = prompt_n / prompt_s
    return out
