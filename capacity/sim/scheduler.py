"""The simulated engine's scheduler: continuous batching on the capacity formulas, one clock.

See `capacity.sim.server` (the HTTP endpoint that streams it) and docs/bench.md (sim-server).
It behaves like a catalog model on a catalog GPU scheduled the way one engine profile says
(`capacity.catalog.engines`, data/engines.toml; `SimConfig.engine`):

- `chapter` (the default): at most `slots = min(C_vram (F3, at the scenario's context),
  max_num_seqs)` sequences; when sequences are waiting and slots are free it prefills them (F6,
  "with attention", summed over the admitted prompts; the running sequences wait, as without
  chunked prefill) and the prefill emits each one's first token; otherwise one decode step of F4
  for the current batch size and the batch's mean context (prompt + tokens so far), emitting one
  token to every running sequence.
- `vllm` / `llamacpp` (mixed steps): each step carries one decode token per running sequence
  and prompt chunks of the admitted prompts (in admission order) up to the token budget; a
  prompt's first token comes at the end of the step that prefills its last chunk.
- `sglang` (prefill batches): a prefill batch of at most the token budget (its last prompt may
  be cut, and continues in the next batch) runs before the next decode step; decode waits.
- KV admission: `context` reserves the whole context per request (the slots above; llama.cpp's
  slots own n_ctx / n_parallel each); `tokens` admits a request when the KV pool (F3's KV budget)
  holds the pages of the tokens the running requests really hold plus its own (with SGLang's
  reserve for their remaining output), and preempts the newest request (it is recomputed:
  prompt and tokens so far are prefilled again) when a step finds the pool full.

A mixed step is one forward pass: the decode step of its decoding sequences with the prefill
time of its prompt chunks added to the arithmetic (`SimPhysics.mixed_step_s`); the chunks' GEMMs
run at the efficiency of the pass's tokens, step_mfu(decode + chunk tokens) (F6c,
`SimPhysics.prefill_pass_s`, the event model's formula). A request that finds no room waits in a FIFO queue;
`speedup` divides every delay. Under a profile that schedules one step ahead (vLLM since 0.14.0,
SGLang since 0.4.0: `EngineProfile.schedules_ahead`) a step admits only the requests that
arrived before the step ending at its start began: one arriving mid-step joins the step after
the next.

Speculative decoding (a Scenario with a draft, F12): every decode step is an engine step, one
verify pass over k + 1 tokens per sequence and the draft's k passes (`SimPhysics` takes its
terms from the drafted step at an acceptance of 1, which is `DecodeStep.engine_step_ms`), and
each decoding sequence keeps the tokens it draws (`capacity.sim.drafts.Acceptance`: 1..k+1,
mean tau, seeded), emitted together at the step's end; it holds k + 1 tokens' KV room and
takes k + 1 tokens of a mixed step's budget.

The scheduler keeps its own clock and advances it from event to event (a prefill batch or a
decode step ends after its computed duration), one implementation under two clocks: real time
(the HTTP server paces token streams against the wall clock) and virtual time
(`capacity.sim.virtual.run_virtual`: a scripted workload runs in-process with no sleeping at
all; deterministic, and fast). The ground truth per request is in simulated time.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from typing import Any

from capacity.catalog.engines import DEFAULT_ENGINE, engine_profile
from capacity.errors import InputError
from capacity.model.forward_pass import eager_scenario
from capacity.model.prefix import TOKEN_GRAIN, PrefixGrain, prefix_grain
from capacity.model.scenario import Scenario
from capacity.sim.drafts import Acceptance
from capacity.sim.physics import SimPhysics as SimPhysics  # re-exported: the engine's times

FAULT_KINDS = ("http_error", "disconnect", "error_event", "stall")
"""Injected faults, in the order their shares are stacked on the unit interval."""

_TRUTH_KEEP = 200_000
_UNIX_MINUS_PERF = time.time() - time.perf_counter()
"""Offset from perf_counter to wall-clock seconds (for comparing with a client's timestamps)."""


class SimulatedDisconnect(Exception):
    """Raised inside a stream to drop the connection on purpose (fault injection)."""


@dataclass(frozen=True, kw_only=True)
class SimConfig:
    """Knobs of the simulated server that are not physics."""

    speedup: float = 1.0
    engine: str = DEFAULT_ENGINE
    """The engine profile the scheduler follows (data/engines.toml `[profile.*]`)."""
    max_num_seqs: int | None = None
    """Sequences decoded together at most; None = the engine's default (256 for the chapter)."""
    max_num_batched_tokens: int | None = None
    """Tokens one step may carry (vLLM's max_num_batched_tokens, SGLang's chunked_prefill_size,
    llama.cpp's n_batch); None = the engine's. A chunked profile only."""
    block_tokens: int | None = None
    """The KV page of tokens admission (vLLM's --block-size); None = the engine's."""
    offload_gib: float = 0.0
    """vLLM's --cpu-offload-gb, GiB per GPU (`SimPhysics`: a larger KV pool, a slower pass)."""
    enforce_eager: bool = False
    """No CUDA graphs: every pass pays the profile's eager cost (`forward_pass.eager_scenario`,
    as the event model's `enforce_eager`)."""
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
        if self.max_num_seqs is not None and self.max_num_seqs < 1:
            raise InputError(f"max-num-seqs must be >= 1, got {self.max_num_seqs}")
        engine_profile(self.engine)  # an unknown engine is a clear error here
        if not (math.isfinite(self.offload_gib) and self.offload_gib >= 0):
            raise InputError(f"CPU offload must be >= 0 GiB, got {self.offload_gib}")
        if not (math.isfinite(self.chars_per_token) and self.chars_per_token > 0):
            raise InputError(f"chars per token must be a finite number > 0, got "
                             f"{self.chars_per_token}")
        if not (math.isfinite(self.stall_s) and self.stall_s >= 0):
            raise InputError(f"stall must be a finite number of seconds >= 0, got {self.stall_s}")
        for name, n, lo in (("eos-after", self.eos_after_tokens, 0),
                            ("default max_tokens", self.default_max_tokens, 1),
                            ("fault seed", self.seed, 0)):
            if n < lo:
                raise InputError(f"{name} must be >= {lo}, got {n}")
        shares = (self.fail_http, self.fail_disconnect, self.fail_error_event, self.fail_stall)
        if any(not 0 <= s <= 1 for s in shares) or sum(shares) > 1:
            raise InputError("fault shares must each be in [0, 1] and sum to at most 1, "
                             f"got {shares}")


@dataclass(kw_only=True, eq=False)
class SimSequence:
    """One request inside the simulator, from `Simulator.submit` to its last token: its
    lengths, where it is in prefill and decode, its timestamps on the simulator's clock, and
    the tokens it has emitted (`capacity.sim.server` streams them from `out`). Compared by
    identity (it keys the scheduler's plans)."""

    id: str
    prompt_tokens: int
    target_tokens: int
    finish_reason: str
    fault: str | None
    arrival_s: float
    """When the engine sees the request (simulator clock, s)."""
    sent_s: float | None = None
    """When the client sent it, where that is earlier (the server's front end: the scenario's
    `request_latency_ms`); None: `arrival_s`. The truth's TTFT and E2E count from it."""
    stream: bool = True
    """Put every emitted token on `out` (an HTTP response reads it); not in virtual time."""
    out: asyncio.Queue[int | None] = field(default_factory=asyncio.Queue)
    emitted: int = 0
    admitted_s: float = math.nan
    prefill_left: int = 0
    """Tokens to prefill before its next token (the prompt; after a preemption, the prompt and
    the tokens so far)."""
    cached: int = 0
    """Tokens whose KV the engine holds for it."""
    preempted: int = 0
    """Times it was preempted (its KV freed, to be recomputed)."""
    first_s: float = math.nan
    last_s: float = math.nan
    cancelled: bool = False
    done: bool = False
    prefix_key: int = -1
    """The cached prefix this request may reuse (`PrefixCache`); -1 none."""
    prefix_tokens: int = 0
    """Leading prompt tokens that prefix holds."""
    conversation_key: int = -1
    """A conversation turn: when it finishes, its whole context is cached under this key."""
    cached_tokens: int = 0
    """Prompt tokens the prefix cache served at admission (not prefilled)."""


@dataclass(frozen=True, kw_only=True)
class SimStep:
    """One scheduling decision: the sequences that get a token when it ends, and its length."""

    emit: list[SimSequence]
    duration_s: float
    """Its duration on the simulator's clock (seconds, after the speed-up)."""
    tokens: tuple[int, ...] = ()
    """Tokens each of `emit` gets when it ends (a draft's accepted tokens); empty: one each."""


class PrefixCache:
    """The engine's prefix cache, by key: how many leading tokens of each prefix are cached.

    A request that names a prefix gets a hit when the cache already holds at least its
    `prefix_tokens` (then those tokens are not prefilled, as much of a shared prefix as the
    engine's `grain` serves, `prefix.prefix_grain`); its prefill puts them in. A finished
    conversation turn leaves its whole context (prompt + output) as the next turn's prefix.
    Nothing is evicted (the model holds a shared prefix once, docs/method.md "Prefix caching").
    """

    def __init__(self, grain: PrefixGrain = TOKEN_GRAIN) -> None:
        self.grain = grain
        self.tokens: dict[int, int] = {}
        self.hits = 0
        self.misses = 0

    def peek(self, seq: SimSequence) -> int:
        """Prompt tokens of `seq` the cache would serve now (0 on a miss); changes nothing. At
        least one prompt token is always prefilled (it yields the first output token)."""
        if seq.prefix_key < 0 or seq.prefix_tokens <= 0:
            return 0
        if self.tokens.get(seq.prefix_key, 0) < seq.prefix_tokens:
            return 0
        if seq.prefix_key == seq.conversation_key:   # a conversation's own history
            return min(seq.prefix_tokens, seq.prompt_tokens - 1)
        return self.grain.shared(seq.prefix_tokens, seq.prompt_tokens)

    def admit(self, seq: SimSequence) -> int:
        """Cached prompt tokens for `seq` now (0 on a miss); records its prefix as cached."""
        if seq.prefix_key < 0 or seq.prefix_tokens <= 0:
            return 0
        hit = self.peek(seq)
        self.hits += hit > 0
        self.misses += hit == 0
        self.tokens[seq.prefix_key] = max(self.tokens.get(seq.prefix_key, 0), seq.prefix_tokens)
        return hit

    def finish(self, seq: SimSequence) -> None:
        """A finished conversation turn: its context is cached for the next turn."""
        if seq.conversation_key >= 0:
            self.tokens[seq.conversation_key] = max(self.tokens.get(seq.conversation_key, 0),
                                                    seq.prompt_tokens + seq.emitted)


class Simulator:
    """The engine: a FIFO of waiting sequences, a running batch and the simulated clock `now_s`.

    `next_step` (admission and batching at a scheduling point) and `complete` (emit the step's
    tokens at its end) are the scheduler; the real-time loop (`start`, for the HTTP server) and
    `capacity.sim.virtual.run_virtual` drive the same two methods, on the wall clock or on no
    clock at all.
    """

    def __init__(self, scenario: Scenario, config: SimConfig, *, clock: str = "real") -> None:
        if clock not in ("real", "virtual"):
            raise InputError(f"clock must be 'real' or 'virtual', got {clock!r}")
        self.config = config
        self.clock = clock
        if config.enforce_eager:
            scenario = eager_scenario(scenario, engine_profile(config.engine))
        self.physics = SimPhysics(scenario, config.max_num_seqs, engine_profile(config.engine),
                                  token_budget=config.max_num_batched_tokens,
                                  block_tokens=config.block_tokens,
                                  offload_gib=config.offload_gib)
        self.profile = self.physics.profile
        self.model_name = config.served_model_name or scenario.variant.key
        self.max_model_len = scenario.model.max_context_tokens
        if self.profile.kv_admission == "tokens":  # as vLLM: no request longer than the KV pool
            self.max_model_len = min(self.max_model_len, self._pool_tokens())
        self.waiting: deque[SimSequence] = deque()
        self.running: list[SimSequence] = []
        prof = self.profile
        self.prefix_cache = PrefixCache(prefix_grain(scenario.model, scenario.kv_dtype,
                                                     scenario.tp, prof,
                                                     prof.token_budget_tokens or None))
        self.truth: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.now_s = -math.inf
        """Simulated time (s; in real time on perf_counter's scale, in virtual time from 0)."""
        self._rng = random.Random(config.seed)
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._lag_task: asyncio.Task[None] | None = None
        self.loop_lag_ms: deque[float] = deque(maxlen=6000)
        self.behind_max_ms = 0.0
        """Real time: how far the wall clock ran past a step's simulated end before its tokens
        could be emitted (ms, the worst seen): the delivery delay of a busy machine."""
        self.max_batch_seen = 0
        self.preemptions = 0
        """Requests preempted (and later recomputed) because the KV pool ran out."""
        self.fault_counts: dict[str, int] = dict.fromkeys(FAULT_KINDS, 0)
        self.acceptance = (None if scenario.draft is None
                           else Acceptance(scenario.draft, seed=config.seed))
        """A draft's per-step acceptances and their counters (None without a draft)."""
        self.schedule_ahead = scenario.schedule_ahead and self.profile.schedules_ahead()
        """The engine fixes each step's batch when the step before it starts (vLLM's async
        scheduling, `EngineProfile.schedules_ahead`): a request that arrives while a step runs
        joins the step after the next, as in the event model (`events.run_trace`)."""
        self._started_s: float | None = None
        """Scheduled ahead: when the step that just ended began (None: the engine was idle)."""

    # -- lifecycle (real time) ---------------------------------------------------------------
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
               fault: str | None, arrival_s: float, seq_id: str | None = None,
               prefix_key: int = -1, prefix_tokens: int = 0,
               conversation_key: int = -1, sent_s: float | None = None) -> SimSequence:
        """Queue a request that arrived at `arrival_s` (on the simulator's clock; in arrival
        order). It is admitted at the first scheduling point at or after its arrival. `sent_s`:
        when its client sent it, if earlier (a request latency outside the GPU)."""
        eos = self.config.eos_after_tokens
        if not ignore_eos and 0 < eos < max_tokens:
            target, reason = eos, "stop"
        else:
            target, reason = max_tokens, "length"
        if prompt_tokens < 1 or prompt_tokens + max_tokens > self.max_model_len:
            raise InputError(f"a request of {prompt_tokens} prompt and {max_tokens} output tokens "
                             f"does not fit this engine's maximum of {self.max_model_len} tokens")
        seq = SimSequence(id=seq_id or f"sim-{uuid.uuid4().hex[:24]}", prompt_tokens=prompt_tokens,
                   target_tokens=target, finish_reason=reason, fault=fault, arrival_s=arrival_s,
                   sent_s=sent_s,
                   stream=self.clock == "real", prefill_left=prompt_tokens,
                   prefix_key=prefix_key, prefix_tokens=prefix_tokens,
                   conversation_key=conversation_key)
        self.waiting.append(seq)
        if self.clock == "real":
            assert self._wake is not None, "the simulator is not started"
            self._wake.set()
        return seq

    def record(self, seq: SimSequence, status: str) -> None:
        """Store the ground truth of a finished, failed or abandoned request (simulated time)."""
        n = seq.emitted
        tpot = (seq.last_s - seq.first_s) / (n - 1) * 1e3 if n > 1 else math.nan
        unix = _UNIX_MINUS_PERF if self.clock == "real" else 0.0
        sent = seq.arrival_s if seq.sent_s is None else seq.sent_s
        self.truth[seq.id] = {
            "id": seq.id, "status": status, "fault": seq.fault,
            "prompt_tokens": seq.prompt_tokens, "output_tokens": n,
            "cached_tokens": seq.cached_tokens,
            "arrival_s": sent,
            "arrival_unix_s": sent + unix,
            "first_token_unix_s": seq.first_s + unix,
            "queue_ms": (seq.admitted_s - seq.arrival_s) * 1e3,
            "ttft_ms": (seq.first_s - sent) * 1e3,
            "tpot_ms": tpot,
            "e2e_ms": (seq.last_s - sent) * 1e3,
            "preemptions": seq.preempted,
            "clock": self.clock,
        }
        while len(self.truth) > _TRUTH_KEEP:
            self.truth.popitem(last=False)

    # -- the scheduler (both clocks) ---------------------------------------------------------
    def _pool_tokens(self) -> int:
        """Most tokens one request can hold in the KV pool (tokens admission)."""
        lo, hi = 1, 1
        while self.physics.kv_bytes(hi) <= self.physics.kv_budget_bytes and hi < 1 << 24:
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self.physics.kv_bytes(mid) <= self.physics.kv_budget_bytes \
                else (lo, mid)
        return lo

    def _claim_bytes(self, s: SimSequence, extra_tokens: int) -> float:
        """KV bytes `s` claims with `extra_tokens` more: the pages of what it holds and, with a
        reserve (SGLang), that share of its remaining output."""
        left = max(s.target_tokens - s.emitted, 0)
        ahead = math.ceil(self.profile.reserve_output_share * left)
        return self.physics.kv_bytes(s.cached + extra_tokens + ahead)

    def _fits(self, plan: dict[SimSequence, int]) -> bool:
        """Tokens admission: every running sequence's claim, with this step's tokens, fits."""
        if self.profile.kv_admission == "context":
            return True
        used = sum(self._claim_bytes(s, plan.get(s, 0)) for s in self.running)
        return used <= self.physics.kv_budget_bytes

    def _preempt_last(self) -> SimSequence:
        """Preempt the newest running sequence: its KV is freed and it goes back to the head of
        the queue, to prefill its prompt and its tokens so far again (recompute)."""
        s = self.running.pop()
        s.prefill_left = s.prompt_tokens + s.emitted
        s.cached = 0
        s.preempted += 1
        self.waiting.appendleft(s)
        self.preemptions += 1
        return s

    def _admissible(self) -> bool:
        while self.waiting and self.waiting[0].cancelled:
            self.waiting.popleft()
        cutoff = self.now_s if self._started_s is None else self._started_s
        return bool(self.waiting and self.waiting[0].arrival_s <= cutoff
                    and len(self.running) < self.physics.slots)

    def _try_admit(self, plan: dict[SimSequence, int], budget_left: float) -> bool:
        """Admit the head of the queue with its first chunk (at most `budget_left` tokens) when
        the KV pool holds it; False (and nothing changed) when it does not."""
        s = self.waiting[0]
        first = math.isnan(s.admitted_s)
        # a first admission skips the prompt tokens the prefix cache holds: their KV is there,
        # and its chunks are F6 of the rest (`chunk_s` from `cached`). After a preemption the
        # request recomputes all it held.
        hit = self.prefix_cache.peek(s) if first else 0
        s.cached += hit
        s.prefill_left -= hit
        self.running.append(s)
        plan[s] = int(min(s.prefill_left, budget_left))
        if not self._fits(plan):
            del plan[s]
            self.running.pop()
            s.cached -= hit
            s.prefill_left += hit
            return False
        self.waiting.popleft()
        if first:
            s.admitted_s = self.now_s
            s.cached_tokens = self.prefix_cache.admit(s)
        return True

    def next_step(self) -> SimStep | None:
        """Admission and batching at the scheduling point `now_s` (see the module docstring):
        a prefill batch (chapter, SGLang), a mixed step (vLLM, llama.cpp) or a decode step. An
        idle engine first moves its clock to the next arrival. None when nothing is left to
        run. The prompt tokens a step prefills are counted when it is planned; its tokens are
        emitted by `complete` when it ends."""
        self.running = [s for s in self.running if not s.cancelled]
        while self.waiting and self.waiting[0].cancelled:
            self.waiting.popleft()
        if not self.running:   # idle: whoever arrives is scheduled at once
            self._started_s = None
            if self.waiting:
                self.now_s = max(self.now_s, self.waiting[0].arrival_s)
        step = self._mixed() if self.profile.mixed else self._prefill_or_decode()
        if step is None:
            self._started_s = None
            return None
        # scheduled ahead, the step after this one admits only who arrived before it began
        self._started_s = self.now_s if self.schedule_ahead else None
        return replace(step, duration_s=step.duration_s / self.config.speedup)

    def _chunks(self, plan: dict[SimSequence, int]
                ) -> tuple[list[SimSequence], list[tuple[int, int]], float]:
        """Apply the planned prompt tokens: the sequences whose prompt completes, the chunks,
        and what prefix hits' first chunks add (s, `SimPhysics.hit_first_s`)."""
        done: list[SimSequence] = []
        chunks: list[tuple[int, int]] = []
        extra = 0.0
        for s, n in plan.items():
            if s.cached_tokens > 0 and s.cached == s.cached_tokens and not s.emitted:
                extra += self.physics.hit_first_s(s.prompt_tokens, s.cached_tokens)
            chunks.append((s.cached, n))
            s.cached += n
            s.prefill_left -= n
            if s.prefill_left == 0:
                done.append(s)
        return done, chunks, extra

    def _decode_room(self, decoding: list[SimSequence]) -> list[SimSequence]:
        """Preempt the newest sequences until the decoding ones' next token (k + 1 with a
        draft) fits the pool."""
        while decoding and not self._fits(dict.fromkeys(decoding, self.physics.verify_tokens)):
            gone = self._preempt_last()
            decoding = [s for s in decoding if s is not gone]
        return decoding

    def _prefill_or_decode(self) -> SimStep | None:
        """Chapter and SGLang: a prefill batch of the prompts in progress and those admitted now
        (at most the token budget, when there is one), or else a decode step."""
        budget = self.profile.token_budget_tokens or math.inf
        plan: dict[SimSequence, int] = {}
        used = 0
        for s in self.running:
            if s.prefill_left and used < budget:
                plan[s] = int(min(s.prefill_left, budget - used))
                used += plan[s]
        while used < budget and self._admissible() and self._try_admit(plan, budget - used):
            used += plan[self.running[-1]]
        if plan:
            done, chunks, extra = self._chunks(plan)
            return SimStep(emit=done, duration_s=self.physics.prefill_batch_s(chunks, extra))
        decoding = self._decode_room([s for s in self.running if not s.prefill_left])
        if not decoding:
            return None
        tokens = self._accept(decoding)
        ctx = sum(s.prompt_tokens + s.emitted for s in decoding) / len(decoding)
        return SimStep(emit=decoding, duration_s=self.physics.step_s(len(decoding), ctx),
                       tokens=tokens)

    def _accept(self, decoding: list[SimSequence]) -> tuple[int, ...]:
        """The tokens each decoding sequence keeps from this step (1 without a draft; a
        draft's draw, at most what its output has left), added to the KV it holds."""
        acc = self.acceptance
        tokens = tuple(1 if acc is None else min(acc.draw(), s.target_tokens - s.emitted)
                       for s in decoding)
        for s, n in zip(decoding, tokens, strict=True):
            s.cached += n
        return tokens

    def _mixed(self) -> SimStep | None:
        """vLLM and llama.cpp: one token for every decoding sequence, then prompt chunks of the
        sequences in progress and of those admitted now, within the token budget."""
        budget = self.profile.token_budget_tokens
        width = self.physics.verify_tokens
        decoding = self._decode_room([s for s in self.running
                                      if not s.prefill_left])[:budget // width]
        plan: dict[SimSequence, int] = dict.fromkeys(decoding, width)
        used = len(decoding) * width
        for s in self.running:
            if s.prefill_left and used < budget:
                plan[s] = min(s.prefill_left, budget - used)
                if not self._fits(plan):
                    del plan[s]
                    break
                used += plan[s]
        preempted = self.preemptions
        while (used < budget and self.preemptions == preempted and self._admissible()
               and self._try_admit(plan, budget - used)):
            used += plan[self.running[-1]]
        for s in decoding:
            del plan[s]
        if not decoding and not plan:
            return None
        tokens = self._accept(decoding)
        done, chunks, extra = self._chunks(plan)
        ctx = sum(s.prompt_tokens + s.emitted for s in decoding) / max(len(decoding), 1)
        return SimStep(emit=decoding + done,
                       duration_s=self.physics.mixed_step_s(len(decoding), ctx, chunks, extra),
                       tokens=tokens + (1,) * len(done))

    def complete(self, step: SimStep) -> list[SimSequence]:
        """The step has ended at `now_s`: emit its tokens; returns the sequences it finished."""
        finished = self._emit(step.emit, self.now_s, step.tokens)
        self.max_batch_seen = max(self.max_batch_seen, len(self.running))
        return finished

    async def _loop(self) -> None:
        """Real time: the simulated clock runs ahead by each step's duration; the step's
        tokens are emitted when the wall clock reaches its end (at once when it is late)."""
        assert self._wake is not None
        while True:
            if not self.waiting and not self.running:
                self._wake.clear()
                await self._wake.wait()
            step = self.next_step()
            if step is None:
                continue
            self.now_s += step.duration_s
            # always yield, even when behind: the streams must send this step's tokens before
            # the next step is emitted, or delivery turns bursty
            await asyncio.sleep(max(0.0, self.now_s - time.perf_counter()))
            self.behind_max_ms = max(self.behind_max_ms,
                                     (time.perf_counter() - self.now_s) * 1e3)
            self.complete(step)

    def _emit(self, batch: list[SimSequence], now: float, tokens: tuple[int, ...] = ()
              ) -> list[SimSequence]:
        """Each of `batch` gets its tokens (`SimStep.tokens`; one each when empty) at `now`:
        its stream gets the index of its last token so far (several tokens: one item)."""
        finished: list[SimSequence] = []
        for j, s in enumerate(batch):
            if s.cancelled or s.done:
                continue
            n = tokens[j] if tokens else 1
            s.emitted += n
            if s.emitted == n:
                s.first_s = now
            s.last_s = now
            if s.stream:
                s.out.put_nowait(s.emitted)
            if s.emitted >= s.target_tokens:
                s.done = True
                if s.stream:
                    s.out.put_nowait(None)
                self.prefix_cache.finish(s)
                self.record(s, "ok")
                finished.append(s)
        if finished or any(s.cancelled for s in batch):
            self.running = [s for s in self.running if not (s.done or s.cancelled)]
        return finished
