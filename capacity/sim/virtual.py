"""The simulated engine on a virtual clock: a scripted workload run in-process, no sleeping.

`run_virtual(scenario, Workload(...))` drives the HTTP server's scheduler
(`capacity.sim.scheduler.Simulator`, `next_step`/`complete`) with its clock jumping from event
to event (an arrival, a prefill or decode step done): deterministic, and fast. `Workload` says
what arrives: closed-loop clients, Poisson arrivals (the same seeded draw as
`capacity.plan.events.simulate`), given arrival times, or a per-request sample
(`capacity.model.traffic.TrafficSample`). The ground truth per request is in simulated time.
See docs/bench.md (sim-server) and docs/method.md.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from capacity.errors import InputError
from capacity.model.scenario import Scenario
from capacity.model.traffic import TrafficSample
from capacity.sim.scheduler import SimConfig, Simulator


@dataclass(frozen=True, kw_only=True)
class Workload:
    """A scripted workload for `run_virtual`: `requests` requests of `prompt_tokens` prompt and
    `output_tokens` output tokens (ignore_eos), arriving in one of three ways:
    - `clients`: closed loop, that many users with no think time (each sends its next request
      when its previous one finishes), all starting at 0;
    - `rate_per_s`: Poisson arrivals, the same seeded draw as `capacity.plan.events.simulate`;
    - `arrivals_s`: these arrival times (s, increasing)."""

    prompt_tokens: int
    output_tokens: int
    requests: int
    clients: int | None = None
    rate_per_s: float | None = None
    arrivals_s: tuple[float, ...] | None = None
    seed: int = 0
    sample: TrafficSample | None = None
    """Per-request lengths and prefixes (`Traffic.sample`); build it with `from_sample`."""

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.clients, self.rate_per_s, self.arrivals_s)) != 1:
            raise InputError("give one of: closed-loop clients, an arrival rate, or arrival times")
        if self.prompt_tokens < 1 or self.output_tokens < 1 or self.requests < 1:
            raise InputError("prompt, output and requests must each be >= 1")
        if self.clients is not None and self.clients < 1:
            raise InputError(f"clients must be >= 1, got {self.clients}")
        if self.rate_per_s is not None and not (math.isfinite(self.rate_per_s)
                                                and self.rate_per_s > 0):
            raise InputError(f"arrival rate must be > 0 requests/s, got {self.rate_per_s}")
        if self.arrivals_s is not None and (
                len(self.arrivals_s) != self.requests
                or any(not math.isfinite(a) for a in self.arrivals_s)
                or any(b < a for a, b in itertools.pairwise(self.arrivals_s))):
            raise InputError("arrival times must be `requests` finite times in increasing order")

    @classmethod
    def from_sample(cls, sample: TrafficSample) -> Workload:
        """Replay a per-request workload: its arrivals, prompts, outputs and prefix keys."""
        t0 = float(sample.arrival_ms[0])
        return cls(prompt_tokens=int(np.max(sample.prompt_tokens)),
                   output_tokens=int(np.max(sample.output_tokens)), requests=sample.size,
                   arrivals_s=tuple(float(a - t0) / 1e3 for a in sample.arrival_ms),
                   sample=sample)

    def open_arrivals_s(self) -> list[float] | None:
        """The open-loop arrival times (s), None for a closed loop."""
        if self.arrivals_s is not None:
            return list(self.arrivals_s)
        if self.rate_per_s is not None:
            rng = np.random.default_rng(self.seed)
            return [float(t) / 1e3 for t in
                    np.cumsum(rng.exponential(1e3 / self.rate_per_s, size=self.requests))]
        return None


def run_virtual(scenario: Scenario, workload: Workload,
                config: SimConfig | None = None) -> list[dict[str, Any]]:
    """Run `workload` on the simulated engine in virtual time: no sleeping, no HTTP, the clock
    jumps from event to event (arrival, prefill done, decode step done). Returns the truth
    records (as `/sim/truth`'s, `clock: "virtual"`; every time, `*_unix_s` included, counts
    from 0 on the virtual clock) in arrival order.

    The scheduler is the HTTP server's (`Simulator.next_step`/`complete`); fault injection,
    which acts on HTTP streams, does not apply. Deterministic: the same inputs give the same
    numbers on any machine, however busy.
    """
    sim = Simulator(scenario, config or SimConfig(), clock="virtual")
    sim.now_s = 0.0
    w = workload
    opened = w.open_arrivals_s()
    pending = deque(opened or [])
    issued = 0
    # the server's front end (`Scenario.request_latency_ms`): the engine sees a request this
    # long after it is sent, on the scaled clock as every other delay
    lat_s = scenario.request_latency_ms / 1e3 / sim.config.speedup

    def send(at_s: float) -> None:
        nonlocal issued
        one = w.sample
        sent = at_s if lat_s > 0 else None
        if one is None:
            sim.submit(prompt_tokens=w.prompt_tokens, max_tokens=w.output_tokens,
                       ignore_eos=True, fault=None, arrival_s=at_s + lat_s,
                       seq_id=f"virtual-{issued:06d}", sent_s=sent)
        else:
            key = int(one.prefix_ids[issued])
            sim.submit(prompt_tokens=int(one.prompt_tokens[issued]),
                       max_tokens=int(one.output_tokens[issued]), ignore_eos=True, fault=None,
                       arrival_s=at_s + lat_s, seq_id=f"virtual-{issued:06d}", prefix_key=key,
                       prefix_tokens=int(one.cached_tokens[issued]) if key >= 0 else 0,
                       conversation_key=int(one.conversation_ids[issued]), sent_s=sent)
        issued += 1

    if opened is None:
        assert w.clients is not None
        for _ in range(min(w.clients, w.requests)):
            send(0.0)
    while True:
        # an idle engine's clock moves to the next arrival (next_step does it for the queue)
        if pending and not sim.running and not sim.waiting:
            sim.now_s = max(sim.now_s, pending[0])
        while pending and pending[0] <= sim.now_s:
            send(pending.popleft())
        step = sim.next_step()
        if step is None:
            if not pending:
                break
            continue
        sim.now_s += step.duration_s
        for _ in sim.complete(step):
            if opened is None and issued < w.requests:
                send(sim.now_s)
    return sorted(sim.truth.values(), key=lambda r: (r["arrival_s"], r["id"]))
