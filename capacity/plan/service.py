"""One replica as the discrete-event model runs it (docs/method.md, queueing and "Engine
profiles"): `ServiceModel`, its step and prefill times, and the paged pool it may keep
(`PagedKv`). `capacity.plan.service_build.service_from_scenario` builds it from a Scenario
under an engine profile and its knobs; `capacity.plan.events` runs it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from capacity.errors import InputError
from capacity.model.forward_pass import (
    UnifiedKv,
    pass_slowdown,
)
from capacity.model.moe import DENSE, Routing
from capacity.model.parallel import CommLine
from capacity.model.prefix import (
    TOKEN_GRAIN,
)
from capacity.model.roofline import mixed_step_time_ms, step_time_ms
from capacity.types import BoolArray, FloatArray, IntArray


@dataclass(frozen=True, kw_only=True)
class PagedKv:
    """A paged KV pool that grows with the tokens and preempts (vLLM, SGLang: profiles with
    `kv_admission = "tokens"` and `preempt = true`; docs/method.md, "Engine profiles"), as the
    event model runs it. A request holding t tokens takes `held_bytes[t]` of `pool_bytes` (its
    pages, F2 rounded up to `block_tokens`; a prefix hit `shared_bytes` less), and reserves
    `reserve_output_share` of its remaining output ahead (SGLang). The step and prefill arrays
    extend the ServiceModel's beyond its `slots` and its prompt, element for element the same
    where they overlap."""

    pool_bytes: float
    """The KV pool of one replica (per GPU), bytes: the ServiceModel's (F3's budget, with an
    offload, less a shared prefix held once)."""
    held_bytes: FloatArray
    """KV bytes (per GPU) of a request holding t tokens, t = 0..prompt + output + one block."""
    shared_bytes: float
    """What a prefix hit does not hold itself (the shared prefix's pages), bytes."""
    block_tokens: int
    reserve_output_share: float
    max_batch: int
    """Requests that can run at once: min(max_seqs, budget - 1 for mixed steps, pool / the
    pages of one prompt), at least the ServiceModel's slots."""
    bandwidth_ms: FloatArray
    compute_ms: FloatArray
    comm_ms: FloatArray
    serial_ms: FloatArray
    """F4's terms for every batch 0..max_batch (ms)."""
    prefill_cum_ms: FloatArray
    """F6 of a prompt's first k tokens (ms), k = 0..prompt + output: a preempted request
    recomputes its prompt and the tokens it had generated."""
    mfu_cum_ms: FloatArray | None = None
    """The MFU-bound part of `prefill_cum_ms`, same lengths (None: nothing stretches)."""

    @functools.cached_property
    def held_bytes_list(self) -> list[float]:
        """`held_bytes` as Python floats (the same values): the event loop reads one element
        at a time (`PagedPool.claim_at`), for every run of this pool."""
        out: list[float] = np.asarray(self.held_bytes, dtype=np.float64).tolist()
        return out

    def __post_init__(self) -> None:
        n = self.max_batch + 1
        if any(len(a) != n for a in (self.bandwidth_ms, self.compute_ms, self.comm_ms,
                                     self.serial_ms)):
            raise InputError("a paged pool needs F4's terms for every batch 0..max_batch")
        if not (self.pool_bytes > 0 and self.block_tokens >= 1 and self.max_batch >= 1):
            raise InputError("a paged pool needs > 0 bytes, >= 1-token pages and >= 1 request")
        if self.mfu_cum_ms is not None and len(self.mfu_cum_ms) != len(self.prefill_cum_ms):
            raise InputError("mfu_cum_ms needs one time per prefill length of prefill_cum_ms")


@dataclass(frozen=True)
class _PassTables:
    """The arrays `ServiceModel.mixed_step_ms` and `chunk_ms` read, as lists
    (`ServiceModel._tables`)."""

    prefill_cum: list[float] | None
    mfu_cum: list[float] | None
    bandwidth: list[float]
    compute: list[float]
    comm: list[float]
    serial: list[float]
    no_comm: bool
    """No TP: the all-reduce line is zero everywhere."""
    slowdown: dict[int, float]
    """`pass_slowdown` by a pass's tokens, as the event loop meets them."""


@dataclass(frozen=True, kw_only=True)
class ServiceModel:
    """Timings of one replica: step terms for every batch size 0..slots, and prefill."""

    slots: int
    bandwidth_ms: FloatArray
    compute_ms: FloatArray
    comm_ms: FloatArray
    overhead_ms: float
    prefill_ms: float
    prompt_tokens: int
    output_tokens: int
    chunk_tokens: int | None = None
    """Tokens one step may carry (the engine's token budget); None = whole prompts."""
    mixed: bool = True
    """With a budget: decode tokens and prompt chunks share a step (vLLM, llama.cpp); False: a
    prefill batch of at most the budget pauses decoding (SGLang)."""
    prefill_cum_ms: FloatArray | None = None
    """F6 prefill time (ms) of a prompt's first k tokens at the plateau MFU, k =
    0..prompt_tokens (chunk times are differences of it); None = linear, k x prefill_ms /
    prompt_tokens."""
    mfu_cum_ms: FloatArray | None = None
    """The part of `prefill_cum_ms` that runs at MFU (the GEMMs; the attention too without an
    attn_mfu), per prompt length 0..prompt_tokens, ms at the plateau: what a pass's efficiency
    (F6c, `mfu_half_tokens`) stretches. None: nothing stretches."""
    mfu_half_tokens: float = 0.0
    """Tokens of a forward pass at which the prompt GEMMs reach half their plateau MFU (F6c,
    `Scenario.mfu_half_tokens`); 0: a constant MFU."""
    routing: Routing = DENSE
    """The model's routed experts (F6c's MoE weight ratio, `Scenario.routing`)."""
    prefill_mfu_ms: float = 0.0
    """The MFU-bound part of one whole prompt's prefill at the plateau (ms; F6c)."""
    cached_tokens: int = 0
    """Prompt tokens a prefix-cache hit serves from the cache (a shared system prompt)."""
    prefix_tokens: int = 0
    """The shared prefix asked for (tokens), of which the cache serves `cached_tokens`."""
    prefix_kind: str = "token"
    """Why the cache may serve less of it (`prefix.PrefixGrain.kind`)."""
    prefix_share: float = 0.0
    """Share of requests that hit the prefix cache (the first request always misses)."""
    hit_prefill_ms: float = 0.0
    """A hit prompt's prefill alone, ms (`prefix.cached_prefill_s`)."""
    hit_mfu_ms: float = 0.0
    """The MFU-bound part of a hit prompt's prefill at the plateau (ms)."""
    hit_first_ms: float = 0.0
    """What a hit prompt's first chunk adds to its `chunk_ms` (the prefill overhead, the output
    head and TP communication's fixed part), so its chunks add up to `hit_prefill_ms` at the
    plateau."""
    offload_ms: float = 0.0
    """What every forward pass adds streaming CPU-offloaded weights over the host link (ms)."""
    eager_ms: float = 0.0
    """What every pass adds without CUDA graphs (ms, in `overhead_ms`; `eager_scenario`)."""
    pass_prefill_ms: float = 0.0
    """What a forward pass that carries prompt tokens adds once, whatever prompts it carries
    (ms): its layers' prefill kernels launched without CUDA graphs (`Scenario.prefill_layer_ms`
    x layers; F6, `prefill.fixed_prefill_ms`). `prefill_ms` and `hit_prefill_ms`, a prompt
    alone, count it; `prefill_cum_ms`, `hit_first_ms` and `turn_first_ms`, the pieces of a
    pass, do not."""
    engine: str = "chapter"
    """The engine profile these timings and this scheduling come from (a label)."""
    serial_ms: FloatArray | None = None
    """What the step adds to the overlap of its terms, per batch 0..slots (`DecodeStep.serial_ms`:
    the operator method's groups run one after another, and per-sequence overhead); None: 0."""
    paged: PagedKv | None = None
    """The engine's paged KV pool when it grows pages with the tokens and preempts (vLLM,
    SGLang); None: `slots` requests at once, each holding its pages to its end."""
    turns: int = 1
    """Turns per conversation (multi-turn, `request_prompts`): request i is turn (i mod turns)
    + 1; turn k + 1's prompt is turn k's prompt and answer plus `turn_tokens` new ones."""
    turn_tokens: int = 0
    """The new message of every turn after the first, tokens."""
    turn_first_ms: FloatArray | None = None
    """What turn k + 1's first chunk adds to its `chunk_ms` (ms, k = 1..turns - 1): as
    `hit_first_ms`, for a prompt whose history is cached."""
    unified_kv: UnifiedKv | None = None
    """An engine with one unified KV cache (llama.cpp): what a pass's prompt chunks add attending
    across one another (`forward_pass.UnifiedKv`); None: each sequence attends to its own cells."""
    comm_line: CommLine = CommLine()
    """F10's TP all-reduces against the tokens of a forward pass (`parallel.CommLine`; zero
    without TP): a pass that carries decode tokens and prompt chunks all-reduces them in one
    message per layer (`mixed_step_ms`). `comm_ms` is this line at each batch's decode tokens,
    and F6 (`prefill_cum_ms`, `prefill_ms`) counts it at the prompt's tokens."""
    decode_tokens_per_seq: float = 1.0
    """Tokens a decoding sequence puts in a pass: 1, or k + 1 in a speculative verify pass
    (F12), as `comm_ms` counts them."""
    request_latency_ms: float = 0.0
    """Time a request spends outside the GPU before the engine sees it (ms,
    `Scenario.request_latency_ms`): the event model's requests reach the engine this long after
    they are sent, so every TTFT and E2E carries it and a closed loop's client waits it out;
    it occupies no GPU time."""
    schedule_ahead: bool = False
    """The engine fixes step n + 1's batch when step n starts (`EngineProfile.schedules_ahead`
    and `Scenario.schedule_ahead`): a request that reaches a busy engine joins the step after
    the next; one that reaches an idle engine starts at once (`events.run_trace`)."""
    prompt_lengths: tuple[int, ...] | None = None
    """Each request's prompt (tokens) where a run's prompts vary: request i's is
    `prompt_lengths[i mod len]`, their mean `prompt_tokens` (to rounding); the prefill arrays
    reach the longest. None: every prompt is `prompt_tokens`. Chunked prefill, one turn and no
    shared prefix only (`capacity.model.output_lengths.maxent_lengths` draws them)."""
    output_lengths: tuple[int, ...] | None = None
    """Each request's output (tokens) where a run's outputs vary (requests that stop at
    end-of-sequence, a dataset's lengths): request i's is `output_lengths[i mod len]`, their
    mean `output_tokens` (to rounding); the paged pool's arrays reach the longest. None: every
    request generates `output_tokens` (`capacity.model.output_lengths.maxent_lengths` draws
    them)."""
    align_block_tokens: int = 0
    """vLLM's mamba 'align' mode (prefix caching on a hybrid model, `kv.align_block_tokens`):
    a prompt's prefill chunks end at whole multiples of this block, and the part after its
    last whole block prefills in a step of its own (`prefix.align_chunk_tokens`); 0: off."""

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise InputError("no request fits in memory (0 slots): use a bigger GPU, more "
                             "GPUs, a shorter context or a smaller KV precision")
        if self.output_tokens < 1 or self.prompt_tokens < 1:
            raise InputError("prompt and output must be >= 1 token")
        if self.chunk_tokens is not None and self.mixed and self.chunk_tokens <= self.slots:
            raise InputError(f"chunked-prefill budget of {self.chunk_tokens} tokens must exceed "
                             f"the {self.slots} decode slots (vLLM's max_num_batched_tokens)")
        if self.chunk_tokens is not None and self.chunk_tokens < 1:
            raise InputError(f"chunked-prefill budget must be >= 1 token, got {self.chunk_tokens}")
        if self.turns < 1 or (self.turns > 1 and (
                self.turn_tokens < 1 or self.chunk_tokens is None or self.turn_first_ms is None
                or len(self.turn_first_ms) != self.turns - 1)):
            raise InputError("multi-turn needs >= 1 turn, >= 1 new token a turn, a token "
                             "budget (chunked prefill) and one first-chunk time per later turn")
        if self.prompt_lengths is not None and (
                not self.prompt_lengths or min(self.prompt_lengths) < 1
                or self.chunk_tokens is None or self.turns > 1 or self.cached_tokens):
            raise InputError("per-request prompt lengths need >= 1 token each, a token budget "
                             "(chunked prefill), one turn and no shared prefix")
        if self.output_lengths is not None and (not self.output_lengths
                                                or min(self.output_lengths) < 1):
            raise InputError("per-request output lengths need >= 1 token each")
        if self.align_block_tokens < 0 or (self.align_block_tokens and self.chunk_tokens is None):
            raise InputError("an aligned prefill block needs >= 0 tokens and a token budget")
        longest = self.longest_prompt_tokens
        if self.prefill_cum_ms is not None and len(self.prefill_cum_ms) != longest + 1:
            raise InputError("prefill_cum_ms needs one time per prompt length 0..prompt_tokens "
                             "(of the last turn)")
        if self.prefill_ms < 0:
            raise InputError("prefill time must be >= 0 ms")
        if not 0 <= self.cached_tokens < self.prompt_tokens:
            raise InputError(f"a cached prefix of {self.cached_tokens} tokens must be shorter "
                             f"than the {self.prompt_tokens}-token prompt")
        if not (math.isfinite(self.prefix_share) and 0 <= self.prefix_share <= 1):
            raise InputError(f"prefix share must be in [0, 1], got {self.prefix_share}")
        if self.mfu_cum_ms is not None and len(self.mfu_cum_ms) != longest + 1:
            raise InputError("mfu_cum_ms needs one time per prompt length 0..prompt_tokens")

    def turn_prompt_tokens(self, k: int) -> int:
        """Turn k + 1's prompt (tokens, k = 0..turns - 1): the first prompt, and for each
        earlier turn its answer and the next new message, P + k x (output + turn_tokens)."""
        return self.prompt_tokens + k * (self.output_tokens + self.turn_tokens)

    @property
    def longest_prompt_tokens(self) -> int:
        """The last turn's prompt (tokens); the prompt without multi-turn; the longest of
        `prompt_lengths` where prompts vary."""
        if self.prompt_lengths is not None:
            return max(self.prompt_lengths)
        return self.turn_prompt_tokens(self.turns - 1)

    @property
    def longest_output_tokens(self) -> int:
        """The longest request's output (tokens): `output_tokens`, or the longest of
        `output_lengths` where outputs vary."""
        return self.output_tokens if self.output_lengths is None else max(self.output_lengths)

    def request_outputs(self, n_requests: int) -> IntArray:
        """Per request 0..n-1: the output tokens it generates (`output_lengths`, cycled; or
        `output_tokens` each)."""
        if self.output_lengths is None:
            return np.full(n_requests, self.output_tokens, dtype=np.int64)
        lengths = np.asarray(self.output_lengths, dtype=np.int64)
        return np.asarray(lengths[np.arange(n_requests) % lengths.size], dtype=np.int64)

    def request_prompts(self, n_requests: int
                        ) -> tuple[IntArray, IntArray, FloatArray, BoolArray]:
        """Per request 0..n-1: its prompt tokens, the tokens of it the prefix cache serves,
        what its first chunk adds (ms: `hit_first_ms`, `turn_first_ms`) and whether it holds
        the shared prefix's pages once (a system-prompt hit, `PagedKv.shared_bytes`).

        Request i is turn k + 1 = (i mod turns) + 1 of conversation i // turns, its turns a
        steady mix (a user sends the next turn after reading the answer, so its history is
        cached by then; vLLM V1's automatic prefix caching keeps the blocks of finished
        requests until it needs them: no eviction here). Turn 1 finds the shared prefix
        cached as `prefix_hits` says (per conversation); a later turn finds its whole history
        cached, P_k - turn_tokens tokens, and prefills only its new message; its KV still
        holds (and its attention reads) the whole history. One turn: `prefix_hits`."""
        i = np.arange(n_requests, dtype=np.int64)
        if self.prompt_lengths is not None:
            lengths = np.asarray(self.prompt_lengths, dtype=np.int64)
            zero = np.zeros(n_requests, dtype=np.int64)
            return (lengths[i % lengths.size], zero, np.zeros(n_requests, dtype=np.float64),
                    np.zeros(n_requests, dtype=bool))
        k = i % self.turns
        conv_hit = self.prefix_hits(-(-n_requests // self.turns)) > 0
        hit = conv_hit[i // self.turns]
        prompt = self.prompt_tokens + k * (self.output_tokens + self.turn_tokens)
        cached = np.where(k > 0, prompt - self.turn_tokens,
                          np.where(hit, self.cached_tokens, 0))
        later = (np.zeros(0) if self.turn_first_ms is None
                 else np.asarray(self.turn_first_ms, dtype=np.float64))
        extra = np.where(k > 0, np.concatenate([[0.0], later])[k],
                         np.where(hit, self.hit_first_ms, 0.0))
        return (np.asarray(prompt, dtype=np.int64), np.asarray(cached, dtype=np.int64),
                np.asarray(extra, dtype=np.float64), np.asarray(hit, dtype=bool))

    @property
    def step_ms(self) -> FloatArray:
        """Decode step time (ms) for 0..slots sequences (F4's combination of the terms)."""
        return step_time_ms(bandwidth_ms=self.bandwidth_ms, compute_ms=self.compute_ms,
                            comm_ms=self.comm_ms,
                            overhead_ms=self.overhead_ms + self.offload_ms) + self._serial()

    def _serial(self) -> FloatArray:
        return (np.zeros_like(self.bandwidth_ms) if self.serial_ms is None
                else np.asarray(self.serial_ms, dtype=np.float64))

    @property
    def prefix_cut(self) -> bool:
        """The engine's cache serves less of the shared prefix than asked (`PrefixGrain`)."""
        return self.cached_tokens < TOKEN_GRAIN.shared(self.prefix_tokens, self.prompt_tokens)

    @property
    def max_batch(self) -> int:
        """Requests that can run at once: `slots`, or a paged pool's `max_batch` (>= slots)."""
        return self.slots if self.paged is None else self.paged.max_batch

    @property
    def batch_step_ms(self) -> FloatArray:
        """Decode step time (ms) for 0..max_batch sequences: `step_ms`, extended by a paged
        pool's terms (the same values up to `slots`)."""
        p = self.paged
        if p is None:
            return self.step_ms
        return step_time_ms(bandwidth_ms=p.bandwidth_ms, compute_ms=p.compute_ms,
                            comm_ms=p.comm_ms,
                            overhead_ms=self.overhead_ms + self.offload_ms) + p.serial_ms

    def chunk_ms(self, done_tokens: int, chunk_tokens: int) -> float:
        """Prefill time (ms) of prompt tokens done..done+chunk: F6 at the end minus F6 at the
        start, so a prompt's chunks add up to its whole prefill (with a paged pool, up to
        prompt + output tokens: a preempted request's recompute)."""
        cum = self._tables.prefill_cum
        if cum is None:
            return chunk_tokens * self.prefill_ms / self.prompt_tokens
        return cum[done_tokens + chunk_tokens] - cum[done_tokens]

    def chunk_mfu_ms(self, done_tokens: int, chunk_tokens: int) -> float:
        """The MFU-bound part of `chunk_ms` at the plateau (ms): what F6c stretches."""
        cum = self._tables.mfu_cum
        if cum is None:
            return 0.0
        return cum[done_tokens + chunk_tokens] - cum[done_tokens]

    def mixed_step_ms(self, batch: int, chunks: Sequence[tuple[int, int]],
                      extra_ms: float = 0.0) -> float:
        """A mixed step: `batch` decode tokens plus prompt `chunks` ((done, tokens) each), in ms.

        One forward pass (`roofline.mixed_step_time_ms`): F4's terms at `batch` with the
        chunks' prefill times added to the arithmetic, the weights read once. The chunks' time
        is `chunk_ms` at the plateau MFU plus their MFU-bound part stretched to the pass's
        efficiency, step_mfu(batch + chunk tokens) (F6c, `forward_pass.pass_slowdown`), plus
        `extra_ms` (a prefix hit's first chunk, `hit_first_ms`), plus, with one unified KV cache
        (llama.cpp), the chunks' attention across one another (`unified_kv`); a CPU offload
        adds `offload_ms` to the pass. With TP the pass all-reduces its decode and prompt
        tokens in one message per layer: the chunks' own all-reduces (`CommLine.chunk_ms`,
        which F6 counts) leave the arithmetic and the pass pays F10 once at its tokens
        (`pass_comm_added_ms`). `capacity.sim.scheduler.SimPhysics.mixed_step_s` is the same
        formula.
        """
        tb = self._tables
        m = batch + sum(n for _, n in chunks)
        stretch = tb.slowdown.get(m)
        if stretch is None:
            stretch = tb.slowdown[m] = pass_slowdown(m, self.mfu_half_tokens, self.routing)
        prefill = (sum(self.chunk_ms(d, n) for d, n in chunks) + extra_ms
                   + stretch * sum(self.chunk_mfu_ms(d, n) for d, n in chunks))
        if self.unified_kv is not None:
            prefill += self.unified_kv.extra_ms(chunks)
        if chunks:
            prefill += self.pass_prefill_ms
        comm = tb.comm[batch]
        if tb.no_comm:   # no TP: every all-reduce term is 0
            prefill_comm, pass_comm = 0.0, comm
        else:
            prefill_comm = sum(self.comm_line.chunk_ms(d, n) for d, n in chunks)
            pass_comm = comm + self.pass_comm_added_ms(batch, m - batch)
        return mixed_step_time_ms(
            bandwidth_ms=tb.bandwidth[batch], compute_ms=tb.compute[batch],
            comm_ms=comm, overhead_ms=self.overhead_ms + self.offload_ms,
            serial_ms=tb.serial[batch], prefill_ms=prefill, prefill_comm_ms=prefill_comm,
            pass_comm_ms=pass_comm)

    @functools.cached_property
    def _tables(self) -> _PassTables:
        """The arrays `mixed_step_ms` and `chunk_ms` read, as lists of Python floats (the same
        values: the event loop prices tens of thousands of passes a scorecard, and a list is
        read faster than a numpy array element by element)."""
        t: ServiceModel | PagedKv = self if self.paged is None else self.paged
        cum = self.prefill_cum_ms if self.paged is None else self.paged.prefill_cum_ms
        mfu = self.mfu_cum_ms if self.paged is None else self.paged.mfu_cum_ms
        n = len(t.bandwidth_ms)
        return _PassTables(
            prefill_cum=None if cum is None else np.asarray(cum, dtype=np.float64).tolist(),
            mfu_cum=None if mfu is None else np.asarray(mfu, dtype=np.float64).tolist(),
            bandwidth=np.asarray(t.bandwidth_ms, dtype=np.float64).tolist(),
            compute=np.asarray(t.compute_ms, dtype=np.float64).tolist(),
            comm=np.asarray(t.comm_ms, dtype=np.float64).tolist(),
            serial=([0.0] * n if t.serial_ms is None
                    else np.asarray(t.serial_ms, dtype=np.float64).tolist()),
            no_comm=self.comm_line == CommLine(), slowdown={})

    def pass_comm_added_ms(self, batch: int, prompt_tokens: float) -> float:
        """What `prompt_tokens` of prompt chunks add to the all-reduces of a pass that decodes
        `batch` sequences (ms): F10 at the pass's decode + prompt tokens less F10 at its
        decode tokens alone (`comm_line`; 0 without TP). Example (Llama-3.1-70B on 8 H100s,
        `parallel.CommLine`'s line): 100 decoding sequences and a 100-token chunk add
        200 - 100 tokens above the 64-token knee, 100 x 0.0102 = 1.02 ms; the same chunk
        prefilled apart would all-reduce at(100) = 7.69 ms."""
        return self.comm_line.added_ms(batch * self.decode_tokens_per_seq, prompt_tokens)

    def prompt_pass_ms(self, hits: Sequence[bool]) -> float:
        """One forward pass over whole prompts (no token budget), ms: each prompt's prefill
        alone (`prefill_ms`, or `hit_prefill_ms` for a prefix hit), its MFU-bound part moved from
        its own pass's efficiency to the batch's, step_mfu(sum of the prompts' new tokens)
        (F6c), its all-reduces (F6 counts them per prompt) paid once at the pass's tokens
        (`comm_line`: one message per layer for the whole pass), plus `offload_ms` once.
        Example: two 1,000-token misses at m_half 500, each 130 ms alone, 60 ms of it
        MFU-bound at the plateau, no TP: together 260 + 120 x (slowdown(2,000) -
        slowdown(1,000)) = 260 + 120 x (0.012377 - 0.067278) = 253.41 ms, slowdown(m) =
        (1 + (500 / m)^2.5)^0.4 - 1 (`pass_slowdown`). Each prompt alone counts the pass's
        per-layer prefill launches (`pass_prefill_ms`); the pass pays them once."""
        m = sum(self.prompt_tokens - (self.cached_tokens if h else 0) for h in hits)
        out = self.offload_ms + (self.comm_line.at_ms(m) - self.pass_prefill_ms * (len(hits) - 1)
                                 if hits else 0.0)
        for h in hits:
            alone, part = ((self.hit_prefill_ms, self.hit_mfu_ms) if h
                           else (self.prefill_ms, self.prefill_mfu_ms))
            own = self.prompt_tokens - (self.cached_tokens if h else 0)
            out += (alone - self.comm_line.at_ms(own)
                    + part * (pass_slowdown(m, self.mfu_half_tokens, self.routing)
                              - pass_slowdown(own, self.mfu_half_tokens, self.routing)))
        return out

    def prefix_hits(self, n_requests: int) -> FloatArray:
        """Which of requests 0..n-1 find the prefix cached (1.0) or compute it (0.0): evenly
        spread, `prefix_share` of them, request i a hit when floor((i + 1) p) > floor(i p);
        the first request always computes it (the cache starts empty)."""
        i = np.arange(n_requests, dtype=np.float64)
        p = self.prefix_share if self.cached_tokens > 0 else 0.0
        hit = (np.floor((i + 1) * p + 1e-9) > np.floor(i * p + 1e-9)) & (i > 0)
        return np.asarray(hit, dtype=np.float64)

    @property
    def mean_prefill_ms(self) -> float:
        """A request's mean prefill work at full load (ms): misses and hits by `prefix_share`,
        each prompt's MFU-bound part at the efficiency of a full pass (the token budget, or one
        whole prompt) (F6c)."""
        return self.prefill_work_ms(float(self.chunk_tokens or self.prompt_tokens))

    @property
    def new_prompt_tokens(self) -> float:
        """Prompt tokens a request prefills on average (tokens): the prompt, less the cached
        prefix for the `prefix_share` of requests that hit it; with multi-turn the mean over
        the turns, the first turn's and (turns - 1) x `turn_tokens`."""
        first = self.prompt_tokens - self.prefix_share * self.cached_tokens
        return (first + (self.turns - 1) * self.turn_tokens) / self.turns

    def prefill_work_ms(self, pass_tokens: float) -> float:
        """A request's mean prefill work (ms) when its prompt runs in forward passes of
        `pass_tokens` tokens: `prefill_ms` (a miss alone) with its MFU-bound part moved from its
        own pass's efficiency to step_mfu(pass_tokens) (F6c), hits by `prefix_share` likewise.
        Example: a 1,000-token miss of 130 ms alone, 60 ms MFU-bound at the plateau, m_half
        500, in passes of 2,000 tokens: 130 + 60 x (0.012377 - 0.067278) = 126.71 ms
        (`pass_slowdown` at 2,000 and at 1,000 tokens)."""
        slow = pass_slowdown(pass_tokens, self.mfu_half_tokens, self.routing)
        miss = self.prefill_ms + self.prefill_mfu_ms * (
            slow - pass_slowdown(self.prompt_tokens, self.mfu_half_tokens, self.routing))
        first = miss
        if self.cached_tokens and self.prefix_share:
            hit = self.hit_prefill_ms + self.hit_mfu_ms * (
                slow - pass_slowdown(self.prompt_tokens - self.cached_tokens,
                                     self.mfu_half_tokens, self.routing))
            first = (1.0 - self.prefix_share) * miss + self.prefix_share * hit
        if self.turns == 1 or self.turn_first_ms is None:
            return first
        # a later turn prefills its new message after its cached history (F6 from H to P)
        later = 0.0
        for k in range(1, self.turns):
            p = self.turn_prompt_tokens(k)
            h = p - self.turn_tokens
            later += (self.chunk_ms(h, self.turn_tokens) + float(self.turn_first_ms[k - 1])
                      + slow * self.chunk_mfu_ms(h, self.turn_tokens))
        return (first + later) / self.turns

    @property
    def saturation_rate_per_s(self) -> float:
        """Arrival rate (req/s) above which the queue grows without bound.

        Full slots: each request costs the GPU t_prefill + (output - 1) x t_step(slots) / slots
        when prefill and decode take turns (no token budget, or a budget that is not mixed).
        Mixed steps (vLLM V1, llama.cpp) sustain at least that and, where a chunk shares the
        decode step's forward pass, more (`mixed_saturation_rate_per_s`).
        """
        b = self.slots
        decode_ms = (self.output_tokens - 1) * float(self.step_ms[b]) / b
        serial = 1e3 / (self.mean_prefill_ms + decode_ms)
        if self.chunk_tokens is not None and self.mixed:
            return max(serial, self.mixed_saturation_rate_per_s)
        return serial

    @property
    def mixed_saturation_rate_per_s(self) -> float:
        """The most requests per second mixed steps sustain (req/s; 0 without a token budget):
        the best over decode batches b = 0..slots of the steady state where each step carries b
        decode tokens and c = min(b x P / (output - 1), budget - b, (slots - b) x P) prompt
        tokens (P = `new_prompt_tokens`: prompts arrive at the pace decode retires requests;
        the requests still reading their prompt hold slots too), in one forward pass
        (`roofline.mixed_step_time_ms`, the step `mixed_step_ms` runs) with the chunks' prefill
        c / P x `prefill_work_ms(b + c)`, their all-reduces once at b + c tokens
        (`pass_comm_added_ms`): c / P requests per step time. Example: 100-token
        prompts of 50 ms, 2 output tokens, budget 64, 2 slots, a 10 ms weight read, no compute:
        b = 1 carries c = min(100, 63, 100) = 63 tokens, a 31.5 ms step: 0.63 requests per
        31.5 ms = 20 req/s (taking turns: 1 / (50 + 10 / 2 ms) = 18.2 req/s).
        Source: docs/method.md, queueing ("Engine profiles": mixed steps)."""
        if self.chunk_tokens is None:
            return 0.0
        p = max(self.new_prompt_tokens, 1e-9)
        t: ServiceModel | PagedKv = self if self.paged is None else self.paged
        decode_per_request = self.output_tokens - 1
        top = min(self.slots, self.chunk_tokens - 1) if decode_per_request else 0
        best = 0.0
        for b in range(top + 1):
            room = float(min(self.chunk_tokens - b, (self.slots - b) * p))
            c = room if decode_per_request == 0 else min(b * p / decode_per_request, room)
            if c <= 0:
                continue
            comm = float(t.comm_ms[b])
            step = mixed_step_time_ms(
                bandwidth_ms=float(t.bandwidth_ms[b]), compute_ms=float(t.compute_ms[b]),
                comm_ms=comm, overhead_ms=self.overhead_ms + self.offload_ms,
                serial_ms=0.0 if t.serial_ms is None else float(t.serial_ms[b]),
                prefill_ms=c / p * self.prefill_work_ms(b + c),
                prefill_comm_ms=c / p * self.mean_prompt_comm_ms,
                pass_comm_ms=comm + self.pass_comm_added_ms(b, c))
            best = max(best, c / p / step)
        return best * 1e3

    @property
    def mean_prompt_comm_ms(self) -> float:
        """The all-reduces F6 counts for a request's prompt (ms; 0 without TP): `comm_line` at
        its new tokens, a miss's whole prompt, a hit's tokens after the cached prefix, a later
        turn's new message, weighted as `new_prompt_tokens` weights them."""
        line = self.comm_line
        miss = line.at_ms(self.prompt_tokens)
        first = miss
        if self.cached_tokens and self.prefix_share:
            hit = line.at_ms(self.prompt_tokens - self.cached_tokens)
            first = (1.0 - self.prefix_share) * miss + self.prefix_share * hit
        later = (self.turns - 1) * line.at_ms(self.turn_tokens) if self.turns > 1 else 0.0
        return (first + later) / self.turns
