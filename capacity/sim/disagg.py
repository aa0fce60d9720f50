"""The simulated endpoint run disaggregated, in virtual time: prefill engines, a transfer delay
and decode engines, each engine the HTTP server's own scheduler (`scheduler.Simulator`), driven
on one virtual clock (docs/disaggregation.md, "The check").

- a request goes to prefill engine i mod X as a request of its prompt and one output token
  (`max_tokens=1`): the engine prefills it as its profile schedules prompts and emits the first
  token;
- its KV then crosses the link: FIFO on the sending engine's NICs and the receiving engine's
  NICs (a hand-over starts when both are free and holds both for its bytes' time, then the
  fixed latency);
- it lands on decode engine i mod Y as a request of the same prompt whose prefix the engine's
  prefix cache already holds (the transferred KV: `PrefixCache.tokens[key] = prompt`), so the
  engine computes only the prompt's last token (the cache always leaves one) and decodes on,
  as vLLM's P/D connectors do; the client's tokens are the decode engine's.
Composed from the simulator's public classes; nothing in them is changed. Each engine decides
at every step end whom it admits, as the two-pool event model's pools do: neither schedules one
step ahead (`Scenario.schedule_ahead` off): the decode side's admission delay, sourced from a
measurement of vLLM's async-scheduling era, holds it, and the prefill side's extra pass is not
modelled (docs/disaggregation.md, "Limits").
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from capacity.errors import InputError
from capacity.model.scenario import Scenario
from capacity.sim.scheduler import SimConfig, SimStep, Simulator
from capacity.types import FloatArray


@dataclass(frozen=True, kw_only=True)
class DisaggRun:
    """Per-request times of one disaggregated run (s on the virtual clock, arrival order)."""

    arrival_s: FloatArray
    first_s: FloatArray
    """The decode engine's first token (what the client sees)."""
    last_s: FloatArray
    output_tokens: int

    @property
    def ttft_ms(self) -> FloatArray:
        return np.asarray((self.first_s - self.arrival_s) * 1e3)

    @property
    def tpot_ms(self) -> FloatArray:
        return np.asarray((self.last_s - self.first_s) * 1e3 / max(self.output_tokens - 1, 1))


def run_disaggregated(prefill: Scenario, decode: Scenario, *, prompt_tokens: int,
                      output_tokens: int, arrivals_s: list[float], prefill_engines: int = 1,
                      decode_engines: int = 1, transfer_s: float, transfer_latency_s: float = 0.0,
                      config: SimConfig | None = None) -> DisaggRun:
    """Run open-loop `arrivals_s` (s, increasing) through X prefill and Y decode simulated
    engines in virtual time. `transfer_s`: one hand-over on idle links (latency included);
    `transfer_latency_s`: its part that holds no NIC."""
    if prompt_tokens < 2 or output_tokens < 1 or not arrivals_s:
        raise InputError("a disaggregated run needs prompts of >= 2 tokens, >= 1 output token "
                         "and at least one arrival")
    if not (transfer_s >= transfer_latency_s >= 0):
        raise InputError("transfer time must be >= its latency >= 0 s")
    cfg = config or SimConfig()
    pre = [Simulator(prefill.with_(schedule_ahead=False), cfg, clock="virtual")
           for _ in range(prefill_engines)]
    dec = [Simulator(decode.with_(schedule_ahead=False), cfg, clock="virtual")
           for _ in range(decode_engines)]
    engines = pre + dec
    for e in engines:
        e.now_s = 0.0
    n = len(arrivals_s)
    first = np.full(n, np.nan)
    last = np.full(n, np.nan)
    busy: list[SimStep | None] = [None] * len(engines)
    send_free = [0.0] * prefill_engines
    recv_free = [0.0] * decode_engines
    events: list[tuple[float, int, int, int, int]] = []   # (time, order, kind, engine, request)
    order = 0

    def push(at: float, kind: int, engine: int, req: int) -> None:
        nonlocal order
        heapq.heappush(events, (at, order, kind, engine, req))
        order += 1

    def kick(k: int, now: float) -> None:
        """Plan engine k's next step when it is idle and has work."""
        e = engines[k]
        if busy[k] is not None:
            return
        e.now_s = max(e.now_s, now)
        step = e.next_step()
        if step is not None:
            busy[k] = step
            push(e.now_s + step.duration_s, 1, k, -1)

    # kinds: 0 arrival at a prefill engine, 1 a step ends, 2 a hand-over lands; a request sent
    # at a reaches its prefill engine the request latency later (`Scenario.request_latency_ms`)
    lat_s = prefill.request_latency_ms / 1e3 / cfg.speedup
    for i, a in enumerate(arrivals_s):
        push(a + lat_s, 0, i % prefill_engines, i)
    hold = transfer_s - transfer_latency_s
    while events:
        now, _, kind, k, i = heapq.heappop(events)
        if kind == 0:
            e = engines[k]
            e.now_s = max(e.now_s, now)
            e.submit(prompt_tokens=prompt_tokens, max_tokens=1, ignore_eos=True, fault=None,
                     arrival_s=now, seq_id=f"p-{i:07d}")
            kick(k, now)
        elif kind == 2:
            d = k - prefill_engines
            e = engines[k]
            e.now_s = max(e.now_s, now)
            e.prefix_cache.tokens[i] = prompt_tokens      # the KV that crossed the link
            e.submit(prompt_tokens=prompt_tokens, max_tokens=output_tokens, ignore_eos=True,
                     fault=None, arrival_s=now, seq_id=f"d-{i:07d}", prefix_key=i,
                     prefix_tokens=prompt_tokens)
            kick(k, now)
        else:
            step = busy[k]
            assert step is not None
            busy[k] = None
            e = engines[k]
            e.now_s = now
            for s in e.complete(step):
                req = int(s.id[2:])
                if k < prefill_engines:
                    d = req % decode_engines
                    start = max(now, send_free[k], recv_free[d])
                    send_free[k] = recv_free[d] = start + hold
                    push(start + transfer_s, 2, prefill_engines + d, req)
                else:
                    first[req], last[req] = s.first_s, s.last_s
            kick(k, now)
    if np.isnan(first).any():  # pragma: no cover - every request runs to its end
        raise RuntimeError("a disaggregated request did not finish")
    return DisaggRun(arrival_s=np.asarray(arrivals_s, dtype=np.float64), first_s=first,
                     last_s=last, output_tokens=output_tokens)


def poisson_arrivals_s(rate_per_s: float, n_requests: int, seed: int = 0) -> list[float]:
    """The same seeded Poisson draw as `capacity.plan.events.simulate` (s)."""
    if not (math.isfinite(rate_per_s) and rate_per_s > 0):
        raise InputError(f"arrival rate must be > 0 requests/s, got {rate_per_s}")
    rng = np.random.default_rng(seed)
    return [float(t) / 1e3 for t in np.cumsum(rng.exponential(1e3 / rate_per_s, size=n_requests))]
