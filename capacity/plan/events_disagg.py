"""The discrete-event model with two pools (docs/disaggregation.md): requests queue at a prefill
pool, hand their KV over a link, then decode on a decode pool. Seeded, event to event.

- routing: request i goes to prefill replica i mod X and decode replica i mod Y (a round-robin
  router, as Dynamo's and llm-d's defaults spread requests);
- prefill replica: its own FIFO queue; at each scheduling point it runs, as its engine profile
  says (`events.ServiceModel` of the prefill scenario), one batch of every waiting prompt
  (the chapter's: the batch takes the sum of their prefill times), or prompt chunks within the
  token budget (vLLM: one forward pass, `mixed_step_ms` at batch 0; SGLang: the chunks' sum),
  at most `slots` prompts at once; a prompt leaves when its last token is prefilled;
- transfer: FIFO on the sending replica's NICs and on the receiving replica's NICs: a
  hand-over starts when both are free (`start = max(ready, send free, receive free)`) and
  holds both for its bytes' time; `transfer_ms` includes the fixed latency;
- decode replica: its own admission queue and `slots`; a request joins at a step boundary and
  its first token comes with that step (vLLM: its last prompt token rides in the decode step,
  `mixed_step_time_ms` with F6(P) - F6(P - 1); the chapter's: a one-token prefill batch that
  pauses decoding), then one token per decode step (F4 at the batch, the `ServiceModel`'s
  steps, the same StepModel as the planner).
TTFT is the decode pool's first token (the client's stream comes from the decode pool), TPOT
(last - first) / (n - 1). The first `warmup_fraction` of requests are left out.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capacity.catalog.engines import DEFAULT_ENGINE, EngineProfile
from capacity.errors import InputError
from capacity.model.roofline import mixed_step_time_ms
from capacity.model.scenario import Scenario, evaluate
from capacity.plan.events import ServiceModel, quantiles, service_from_scenario
from capacity.types import FloatArray, IntArray


@dataclass(frozen=True, kw_only=True)
class TwoPools:
    """Timings of one prefill replica and one decode replica, their counts and the hand-over."""

    prefill: ServiceModel
    """One prefill replica (output_tokens = 1: a prompt leaves when prefilled)."""
    decode: ServiceModel
    """One decode replica (its steps at batch 0..slots)."""
    prefill_replicas: int
    decode_replicas: int
    transfer_ms: float
    """One hand-over on idle links, ms (`disagg.transfer_ms`, latency included)."""
    transfer_latency_ms: float = 0.0
    """The part of `transfer_ms` that holds no NIC (fixed latency), ms."""
    join_ms: float
    """F6(P) - F6(P - 1): the decode pool's pass over the prompt's last token, ms."""

    def __post_init__(self) -> None:
        if self.prefill_replicas < 1 or self.decode_replicas < 1:
            raise InputError("each pool needs at least one replica")
        if not (self.transfer_ms >= self.transfer_latency_ms >= 0 and self.join_ms >= 0):
            raise InputError("transfer and join times must be >= 0 ms")


def two_pools(prefill: Scenario, decode: Scenario, *, output_tokens: int, transfer_ms: float,
              prefill_replicas: int, decode_replicas: int, transfer_latency_ms: float = 0.0,
              engine: str | EngineProfile = DEFAULT_ENGINE,
              max_num_seqs: int | None = None) -> TwoPools:
    """The two pools of scenarios `prefill` and `decode` (one replica each: n_gpus = tp) under
    an engine profile (`events.service_from_scenario`, the same numbers as the Explorer)."""
    p = prefill.prompt
    if p < 2:
        raise InputError("a disaggregated prompt needs at least 2 tokens")
    sp = service_from_scenario(prefill, output_tokens=1, engine=engine, max_num_seqs=max_num_seqs)
    sd = service_from_scenario(decode, output_tokens=output_tokens, engine=engine,
                               max_num_seqs=max_num_seqs)
    ev = evaluate(decode.with_(prompt_tokens=None), [decode.replicas], [float(p), float(p - 1)])
    t = np.asarray(ev.prefill_s, dtype=np.float64).reshape(-1) * 1e3
    return TwoPools(prefill=sp, decode=sd, prefill_replicas=prefill_replicas,
                    decode_replicas=decode_replicas, transfer_ms=transfer_ms,
                    transfer_latency_ms=transfer_latency_ms, join_ms=float(t[0] - t[1]))


@dataclass(frozen=True, kw_only=True)
class DisaggResult:
    """What the two-pool event model measured over the counted requests (ms, p50/p90/p99)."""

    requests: int
    rate_per_s: float | None
    concurrency: int | None
    ttft_ms: dict[float, float]
    tpot_ms: dict[float, float]
    e2e_ms: dict[float, float]
    prefill_wait_ms: dict[float, float]
    """Arrival to the end of its prefill, less one prefill (queue and batch-mates), ms."""
    transfer_wait_ms: dict[float, float]
    """Prefill done to hand-over start (link contention), ms."""
    decode_wait_ms: dict[float, float]
    """Hand-over done to the decode pool's first token, ms."""
    mean_ttft_ms: float
    mean_tpot_ms: float
    mean_e2e_ms: float
    throughput_req_s: float
    output_tok_s: float


class _Prefill:
    """One prefill replica's queue and progress."""

    def __init__(self) -> None:
        self.queue: deque[int] = deque()
        self.left: dict[int, int] = {}
        self.busy = False


class _Decode:
    """One decode replica's admission queue, joining and decoding requests."""

    def __init__(self) -> None:
        self.waiting: deque[int] = deque()
        self.running: list[int] = []
        self.remaining: list[int] = []
        self.busy = False
        self.steps = 1
        """Decode steps the pass in flight runs (pure decode passes jump several at once)."""
        self.start_ms = 0.0
        self.step_ms = 0.0
        self.version = 0


def _prefill_batch(svc: ServiceModel, r: _Prefill) -> tuple[float, list[int]]:
    """The next prefill pass of replica `r`: (ms, the prompts it completes)."""
    budget = svc.chunk_tokens
    if budget is None:   # every waiting prompt (up to the slots) in one batch
        ids = [r.queue.popleft() for _ in range(min(len(r.queue), svc.slots))]
        # each prompt alone counts the pass's per-layer prefill launches; the batch pays once
        return (svc.prefill_ms * len(ids) - svc.pass_prefill_ms * max(len(ids) - 1, 0)), ids
    used = 0
    pieces: list[tuple[int, int]] = []
    done: list[int] = []
    for i in list(r.queue)[: svc.slots]:
        if used >= budget:
            break
        left = r.left.setdefault(i, svc.prompt_tokens)
        take = min(budget - used, left)
        pieces.append((svc.prompt_tokens - left, take))
        r.left[i] = left - take
        used += take
        if r.left[i] == 0:
            del r.left[i]
            done.append(i)
    for i in done:
        r.queue.remove(i)
    dur = (svc.mixed_step_ms(0, pieces) if svc.mixed
           else sum(svc.chunk_ms(d, n) for d, n in pieces)
           + (svc.pass_prefill_ms if pieces else 0.0))
    return dur, done


def _decode_step(pools: TwoPools, r: _Decode) -> tuple[float, list[int]]:
    """The next pass of decode replica `r`: admit, then (ms, the requests joining in it). A
    pass without joiners runs every step until the first request ends (`r.steps`); a landing
    cuts it short at the next step boundary (`_run`)."""
    svc = pools.decode
    joining: list[int] = []
    while r.waiting and len(r.running) + len(joining) < svc.slots:
        joining.append(r.waiting.popleft())
    b = len(r.running)
    if joining and (svc.chunk_tokens is None or not svc.mixed):
        # the chapter's and SGLang's scheduling: a one-token prefill batch pauses decoding
        return pools.join_ms * len(joining), joining
    if joining:
        serial = 0.0 if svc.serial_ms is None else float(svc.serial_ms[b])
        return mixed_step_time_ms(
            bandwidth_ms=float(svc.bandwidth_ms[b]), compute_ms=float(svc.compute_ms[b]),
            comm_ms=float(svc.comm_ms[b]), overhead_ms=svc.overhead_ms, serial_ms=serial,
            prefill_ms=pools.join_ms * len(joining)), joining
    r.steps = min(r.remaining) if not (r.waiting and b < svc.slots) else 1
    r.step_ms = float(svc.step_ms[b])
    return r.step_ms * r.steps, joining


def _run(pools: TwoPools, arrivals: FloatArray | None, clients: int | None,
         outs: IntArray) -> dict[str, FloatArray]:
    """The event loop over both pools; per-request times (ms). Request i generates `outs[i]`
    tokens."""
    n = int(outs.size)
    t = {k: np.full(n, np.nan) for k in ("arrival", "prefilled", "sent", "landed", "first",
                                         "finish")}
    pre = [_Prefill() for _ in range(pools.prefill_replicas)]
    dec = [_Decode() for _ in range(pools.decode_replicas)]
    send_free = [0.0] * pools.prefill_replicas
    recv_free = [0.0] * pools.decode_replicas
    events: list[tuple[float, int, int, int, list[int]]] = []
    seq = 0

    def push(at: float, kind: int, who: int, ids: list[int]) -> None:
        nonlocal seq
        heapq.heappush(events, (at, seq, kind, who, ids))
        seq += 1

    # kinds: 0 arrival, 1 prefill pass done, 2 hand-over landed, 3 decode pass done; a request
    # sent at t reaches the prefill pool at t + the request latency outside the GPU
    lat = pools.prefill.request_latency_ms
    issued = 0
    if arrivals is not None:
        for i, a in enumerate(arrivals.tolist()):
            t["arrival"][i] = a
            push(a + lat, 0, i % pools.prefill_replicas, [i])
        issued = n
    else:
        assert clients is not None
        for i in range(min(clients, n)):
            t["arrival"][i] = 0.0
            push(lat, 0, i % pools.prefill_replicas, [i])
        issued = min(clients, n)

    def kick_prefill(now: float, k: int) -> None:
        r = pre[k]
        if r.busy or not r.queue:
            return
        dur, done = _prefill_batch(pools.prefill, r)
        r.busy = True
        push(now + dur, 1, k, done)

    def kick_decode(now: float, k: int) -> None:
        r = dec[k]
        if r.busy or not (r.waiting or r.running):
            return
        r.steps = 1
        dur, joining = _decode_step(pools, r)
        r.busy = True
        r.start_ms = now
        r.version += 1
        push(now + dur, 3, k, [r.version, *joining])

    hold = pools.transfer_ms - pools.transfer_latency_ms
    while events:
        now, _, kind, k, ids = heapq.heappop(events)
        if kind == 0:
            pre[k].queue.append(ids[0])
            kick_prefill(now, k)
        elif kind == 1:
            pre[k].busy = False
            for i in ids:
                t["prefilled"][i] = now
                d = i % pools.decode_replicas
                start = max(now, send_free[k], recv_free[d])
                send_free[k] = recv_free[d] = start + hold
                t["sent"][i] = start
                push(start + pools.transfer_ms, 2, d, [i])
            kick_prefill(now, k)
        elif kind == 2:
            t["landed"][ids[0]] = now
            r = dec[k]
            r.waiting.append(ids[0])
            if r.busy and r.steps > 1:   # end the pass at the next step boundary
                done = max(1, math.ceil((now - r.start_ms) / r.step_ms - 1e-9))
                if done < r.steps:
                    r.steps = done
                    r.version += 1
                    push(r.start_ms + done * r.step_ms, 3, k, [r.version])
            kick_decode(now, k)
        else:
            r = dec[k]
            if ids[0] != r.version:
                continue   # a pass cut short: its old end
            ids = ids[1:]
            r.busy = False
            if not ids or pools.decode.chunk_tokens is not None and pools.decode.mixed:
                # a decode step (or a mixed one): every running request's token
                r.remaining = [m - r.steps for m in r.remaining]
            for i in ids:
                t["first"][i] = now
                r.running.append(i)
                r.remaining.append(int(outs[i]) - 1)
            keep = [(i, m) for i, m in zip(r.running, r.remaining, strict=True) if m > 0]
            for i, m in zip(r.running, r.remaining, strict=True):
                if m <= 0:
                    t["finish"][i] = now
                    if clients is not None and issued < n:
                        t["arrival"][issued] = now
                        push(now + lat, 0, issued % pools.prefill_replicas, [issued])
                        issued += 1
            r.running = [i for i, _ in keep]
            r.remaining = [m for _, m in keep]
            kick_decode(now, k)
    return t


def simulate_two_pools(pools: TwoPools, *, rate_per_s: float | None = None,
                       concurrency: int | None = None, n_requests: int = 2000, seed: int = 0,
                       warmup_fraction: float = 0.1,
                       output_lengths: npt.ArrayLike | None = None) -> DisaggResult:
    """Run the two-pool event model: Poisson arrivals at `rate_per_s` (the whole deployment's,
    seeded as `events.simulate`) or a closed loop of `concurrency` clients with no think time.
    Deterministic for a given seed.

    `output_lengths`: each request's output tokens (n_requests of them; default the decode
    pool's `output_tokens` each), as a benchmark run whose requests stop at end-of-sequence
    generates them (`capacity.model.output_lengths.eos_lengths`). With them, TPOT is each
    request's (last - first) / (n_i - 1) over the requests of two or more tokens (vLLM
    `bench serve`'s), and the output rate is the counted requests' tokens over their span:
    with `warmup_fraction` 0, a whole run's tokens over its duration, drain included."""
    if (rate_per_s is None) == (concurrency is None):
        raise InputError("give an arrival rate or a closed-loop concurrency")
    if not 10 <= n_requests <= 1_000_000:
        raise InputError(f"simulate 10..1,000,000 requests, got {n_requests}")
    if not 0 <= warmup_fraction < 0.9:
        raise InputError("warm-up fraction must be in [0, 0.9)")
    arrivals = None
    if rate_per_s is not None:
        if not (math.isfinite(rate_per_s) and rate_per_s > 0):
            raise InputError(f"arrival rate must be > 0 requests/s, got {rate_per_s}")
        rng = np.random.default_rng(seed)
        arrivals = np.cumsum(rng.exponential(1e3 / rate_per_s, size=n_requests))
    elif concurrency is not None and concurrency < 1:
        raise InputError(f"closed-loop concurrency must be >= 1, got {concurrency}")
    if output_lengths is None:
        outs = np.full(n_requests, pools.decode.output_tokens, dtype=np.int64)
    else:
        outs = np.asarray(output_lengths, dtype=np.int64).reshape(-1)
        if outs.size != n_requests or np.any(outs < 1):
            raise InputError(f"give {n_requests} output lengths of at least 1 token")
    t = _run(pools, arrivals, concurrency, outs)
    sl = slice(int(n_requests * warmup_fraction), None)
    arr, first, fin = t["arrival"][sl], t["first"][sl], t["finish"][sl]
    n_i = outs[sl]
    ttft = first - arr
    many = n_i > 1 if output_lengths is not None else np.ones(n_i.size, dtype=bool)
    tpot = (fin - first)[many] / np.maximum(n_i[many] - 1, 1)
    span_s = max((float(np.max(fin)) - float(np.min(arr))) / 1e3, 1e-9)
    return DisaggResult(
        requests=int(arr.size), rate_per_s=rate_per_s, concurrency=concurrency,
        ttft_ms=quantiles(ttft), tpot_ms=quantiles(tpot), e2e_ms=quantiles(fin - arr),
        prefill_wait_ms=quantiles(t["prefilled"][sl] - arr - pools.prefill.prefill_ms
                                  - pools.prefill.request_latency_ms),
        transfer_wait_ms=quantiles(t["sent"][sl] - t["prefilled"][sl]),
        decode_wait_ms=quantiles(first - t["landed"][sl]),
        mean_ttft_ms=float(np.mean(ttft)), mean_tpot_ms=float(np.mean(tpot)),
        mean_e2e_ms=float(np.mean(fin - arr)),
        throughput_req_s=arr.size / span_s, output_tok_s=float(np.sum(n_i)) / span_s)
