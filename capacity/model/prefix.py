"""Prefix caching: what a shared system prompt (or earlier conversation turns) held in the KV
cache saves (docs/method.md, "Prefix caching").

- Prefill (F6) skips the cached tokens: a prompt of L tokens whose first c are cached costs
  F(L) - F(c) FLOPs, F the prefill FLOPs of F6 (linear part 2 x P x (L - c); attention: the
  L - c new queries attend every earlier token, L^2/2 - c^2/2 pairs on a full layer), and its
  TP communication covers the L - c new tokens.
- Memory (F3): the prefix's KV on full-attention (and MLA) layers is held once for every request
  that shares it, so C_vram = floor((KV budget - prefix KV) / (KV(context) - prefix KV)).
  Sliding-window and linear-attention state stay per request.
- Cost per M output tokens at full load (F7): one replica serves at most
  1 / (prefill + (output - 1) x step / slots) requests/s, so a shorter prefill raises that rate
  and lowers the cost per M tokens.
- What an engine's cache serves of a shared prefix (`PrefixGrain`, `prefix_grain`): vLLM whole
  blocks, and on a hybrid model only the block ends its prefill chunks stop at (the mamba
  'align' mode); a token pool (SGLang), llama.cpp and the chapter every token, but SGLang and
  llama.cpp none of a hybrid model's (its states kept only where a prompt ended).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

import numpy as np
import numpy.typing as npt

from capacity.catalog.engines import EngineProfile
from capacity.catalog.loader import Model
from capacity.errors import InputError
from capacity.model.cost import cost_per_mtok
from capacity.model.kv import align_block_tokens, engine_block_tokens, kv_request_bytes
from capacity.model.memory import MemoryVerdict, max_concurrency, memory_verdict
from capacity.model.pipeline import forward_comm_ms, stream_slots
from capacity.model.prefill import (
    PrefillFlops,
    prefill_flops,
    prefill_seconds_by_parts,
)
from capacity.model.roofline import counts_as_engines
from capacity.model.scenario import Scenario, TableRow, capacity_table, evaluate
from capacity.model.workload import Workload
from capacity.types import FloatArray, IntArray

ALIGN_PROFILE = "vllm"
"""The engine profile whose prefix caching on a hybrid model runs the mamba 'align' mode
(vLLM V1; `capacity.plan.service_build.service_from_scenario`'s `prefix_caching`)."""


def align_chunk_tokens(prompt: int, done: int, take: int, block: int) -> int:
    """Prompt tokens a step prefills of a request at `done` of `prompt` when the budget leaves
    it `take`, under vLLM's mamba 'align' mode with attention blocks of `block` tokens (B > 0;
    0: no align mode, `take`): the chunk ends at a multiple of B before the prompt's last whole
    block (floor(take / B) x B), or exactly at that block's end; the rest of the prompt goes in
    the next step. Example: B = 528, a 1,000-token prompt, 8,192 tokens of budget: 528 this
    step, 472 the next; a 342-token prompt: 342 at once.
    Source: vLLM's Scheduler._mamba_block_aligned_split (github:vllm-project/vllm
    vllm/v1/core/sched/scheduler.py); docs/method.md ("Prefix caching on a hybrid model")."""
    if block <= 0:
        return take
    last = prompt - prompt % block
    if done + take < last:
        return take // block * block
    if done < last < done + take:
        return last - done
    return take


def align_checkpoints(prompt: int, block: int, budget: int) -> tuple[int, ...]:
    """The positions (tokens) at which vLLM's align mode keeps a hybrid model's linear-layer
    states of a `prompt`-token prompt prefilled alone, `budget` tokens a step: the ends of its
    chunks (`align_chunk_tokens`) that are whole blocks of `block` tokens. Only there can a
    later request resume from the cache. Examples (B = 528): 2,200 tokens, budget 2,048:
    (1,584, 2,112); budget 8,192: (2,112,); 500 tokens: () (no whole block); a budget under
    one block is taken as one (every block end).
    Source: vLLM's MambaManager in align mode keeps one state block per prefill chunk, at the
    chunk's last aligned boundary (github:vllm-project/vllm pull 43628, "Root cause"; issue
    45238 measures the 1,584 and 2,112 of the first example on Qwen3.5-4B)."""
    if block <= 0 or budget <= 0:
        raise InputError("align checkpoints need a block and a token budget >= 1")
    step = max(budget, block)   # a budget under one block cannot end a chunk on the grid
    out: list[int] = []
    done = 0
    while done < prompt:
        done += max(1, align_chunk_tokens(prompt, done, min(step, prompt - done), block))
        if done % block == 0:
            out.append(done)
    return tuple(out)


@dataclass(frozen=True)
class PrefixGrain:
    """Where an engine's prefix cache can serve a hit from (tokens): whole blocks of
    `block_tokens` (1: any token), under vLLM's align mode (`align_budget_tokens` > 0, the
    token budget its chunks are cut at) only the block ends a prompt's chunks stop at, and with
    `leaf_only` only where an earlier prompt ended (never inside a prompt that goes on)."""

    block_tokens: int = 1
    align_budget_tokens: int = 0
    leaf_only: bool = False

    @property
    def kind(self) -> str:
        """Why a hit can fall short of the prefix, as a key the surfaces word: 'align',
        'leaf', 'pages', or 'token' (every token is served)."""
        if self.leaf_only:
            return "leaf"
        if self.align_budget_tokens > 0:
            return "align"
        return "pages" if self.block_tokens > 1 else "token"

    def shared(self, prefix_tokens: int, prompt_tokens: int) -> int:
        """Tokens of a `prefix_tokens` shared prefix a `prompt_tokens` prompt finds cached
        once an earlier prompt of the same shape put it there: the prefix capped below the
        prompt (its last token is always computed), rounded down to a whole block, or under the
        align mode the last of the earlier prompt's `align_checkpoints` inside it (0: none).
        Examples: vLLM, 16-token blocks, a 1,000-token prefix: 992; Qwen3.5-9B (B = 528), a
        2,000-token prefix of 2,200-token prompts: 1,584 at a 2,048-token budget, 0 at 8,192
        (its one checkpoint, 2,112, lies past the prefix); a token pool: 1,000 and 2,000;
        leaf-only: 0 (a shared prefix is followed by each prompt's own tokens)."""
        c = max(0, min(int(prefix_tokens), int(prompt_tokens) - 1))
        if self.leaf_only:
            return 0
        if self.align_budget_tokens > 0:
            marks = align_checkpoints(int(prompt_tokens), self.block_tokens,
                                      self.align_budget_tokens)
            return max((m for m in marks if m <= c), default=0)
        return c // self.block_tokens * self.block_tokens


TOKEN_GRAIN: Final = PrefixGrain()
"""A cache that serves a hit from any token: a token pool (SGLang), the chapter's arithmetic."""


LEAF_PROFILES: Final = frozenset({"sglang", "llamacpp"})
"""Engine profiles that keep a hybrid model's linear-layer states only where a cached prompt
ended, so a system prompt shared by prompts that go on differently is not reused. SGLang's
mamba radix cache: "Mamba state is leaf-only checkpoint data (node split clears the parent's
state)" (github:sgl-project/sglang issue 40865); measured on v0.5.9, Qwen3.5-122B, a 6,476-token
shared prefix with suffixes of 40-1,296 tokens: hit rate 0.000 under the default `no_buffer`
(issue 22935). llama.cpp's server restores a hybrid model's context checkpoint only at its
exact position, made near a prompt's end (github:ggml-org/llama.cpp issues 20225 and 24055,
pull 25592)."""


def prefix_grain(model: Model, kv_dtype: str, tp: int, profile: EngineProfile,
                 budget_tokens: int | None, block_size: int | None = None) -> PrefixGrain:
    """The `PrefixGrain` of `profile` serving `model`: a paged pool (vLLM) caches whole pages
    of the engine's block (`kv.engine_block_tokens`, `block_size` or the profile's; 528 tokens
    for Qwen3.5-9B at bf16 KV), and vLLM's profile on a hybrid model the align mode's
    checkpoints at `budget_tokens` a step; a token pool (SGLang's page of 1) and a KV reserved
    at the context (the chapter, llama.cpp's slots) any token, but SGLang and llama.cpp on a
    hybrid model (linear-state layers) no shared prefix (`LEAF_PROFILES`). Source: vLLM's
    prefix caching hashes full blocks only (docs/design/prefix_caching.md); the align mode as
    `align_checkpoints`; docs/method.md ("What the cache serves of a shared prefix")."""
    if profile.key in LEAF_PROFILES and model.layers_of("linear") > 0:
        return PrefixGrain(leaf_only=True)
    if profile.kv_admission != "tokens":
        return TOKEN_GRAIN
    block = profile.kv_block_tokens if block_size is None else int(block_size)
    align = align_block_tokens(model, kv_dtype, tp, block) if profile.key == ALIGN_PROFILE else 0
    if align and budget_tokens:
        return PrefixGrain(block_tokens=align, align_budget_tokens=int(budget_tokens))
    return PrefixGrain(block_tokens=engine_block_tokens(model, kv_dtype, tp, block))


def cached_prefill(s: Scenario, prompt_tokens: npt.ArrayLike,
                   cached_tokens: npt.ArrayLike = 0) -> PrefillFlops:
    """The prefill FLOPs (linear and attention parts) of prompts whose first `cached_tokens`
    are in the prefix cache: F(L) - F(c), under the scenario's count (F6, or F6b under the
    operator method, whose once-per-prompt output head stays: the last token is computed).

    Unit: FLOPs. Exact for causal attention (the new queries attend all earlier keys).
    Source: F6 (docs/method.md), "Prefix caching". Seed model, L 8192, c 0 -> F6's 1.47e14 linear.
    """
    L = np.asarray(prompt_tokens, dtype=np.float64)
    c = np.asarray(cached_tokens, dtype=np.float64)
    if np.any(c < 0) or np.any(c >= L):
        raise InputError("cached tokens must be >= 0 and fewer than the prompt's tokens "
                         "(the last prompt token is always computed)")
    operator = counts_as_engines(s.step_method)
    full = prefill_flops(s.model, L, by_operator=operator)
    hit = prefill_flops(s.model, np.maximum(c, 1.0), by_operator=operator).per_token_part()
    return PrefillFlops(
        prompt_tokens=np.asarray(L - c, dtype=np.float64),
        linear_flops=np.asarray(full.linear_flops - np.where(c > 0, hit.linear_flops, 0.0),
                                dtype=np.float64),
        attention_flops=np.asarray(full.attention_flops
                                   - np.where(c > 0, hit.attention_flops, 0.0),
                                   dtype=np.float64),
        head_flops=full.head_flops)


def mean_prefix_prefill(whole: PrefillFlops, model: Model, hit_tokens: int, share: float, *,
                        by_operator: bool = False) -> tuple[PrefillFlops, float]:
    """The mean prompt's prefill FLOPs and new tokens when `share` of prompts find `hit_tokens`
    cached (the planner's mean over misses and hits): `whole` (F6 of one whole prompt) less
    share x the cached prefix's per-token FLOPs (exact for causal attention, as
    `cached_prefill`), and the prompt less share x hit tokens. Units: FLOPs, tokens."""
    if not (hit_tokens > 0 and share > 0):
        return whole, float(np.asarray(whole.prompt_tokens))
    cached = prefill_flops(model, hit_tokens, by_operator=by_operator).per_token_part()
    return (PrefillFlops(prompt_tokens=whole.prompt_tokens - share * hit_tokens,
                         linear_flops=whole.linear_flops - share * cached.linear_flops,
                         attention_flops=whole.attention_flops - share * cached.attention_flops,
                         head_flops=whole.head_flops),
            float(np.asarray(whole.prompt_tokens)) - share * hit_tokens)


def mean_turn_prefill(first: tuple[PrefillFlops, float], model: Model, wl: Workload, *,
                      by_operator: bool = False) -> tuple[PrefillFlops, float]:
    """The turns' mean prefill FLOPs and new tokens of a conversation (`Workload.turns`): the
    first turn's `first` (`mean_prefix_prefill`'s mean over a shared prefix), each later turn
    k + 1 its `turn_tokens` new ones after its cached history H = P_k - new (F6 from H to
    P_k: F(P_k) less the history's per-token part, exact for causal attention as
    `cached_prefill`), averaged over the turns (the requests are turns in a steady mix, as
    `ServiceModel.request_prompts`). One turn: `first`. Units: FLOPs, tokens. Example:
    3 turns, first prompt 1,000, 256 out, 100 new: turns 2 and 3 prefill 100 tokens each
    after 1,256 and 1,612 cached; mean new tokens (1,000 + 200) / 3 = 400."""
    if wl.turns == 1:
        return first
    pf, new = first
    later = _later_turns(model, wl, by_operator)
    n = float(wl.turns)
    return (PrefillFlops(
        prompt_tokens=np.asarray((pf.prompt_tokens + (n - 1) * wl.turn_tokens) / n),
        linear_flops=np.asarray((pf.linear_flops + np.sum(later.linear_flops)) / n),
        attention_flops=np.asarray((pf.attention_flops + np.sum(later.attention_flops)) / n),
        head_flops=pf.head_flops),
        (new + (n - 1) * wl.turn_tokens) / n)


def _later_turns(model: Model, wl: Workload, by_operator: bool) -> PrefillFlops:
    """F6 from H to P_k of each later turn k = 1..turns - 1 (arrays): its `turn_tokens` new
    ones after the cached history H = P_k - new (FLOPs, tokens)."""
    p = wl.prompt + np.arange(1, wl.turns) * (wl.output_tokens + wl.turn_tokens)
    whole = prefill_flops(model, p, by_operator=by_operator)
    hist = prefill_flops(model, p - wl.turn_tokens, by_operator=by_operator).per_token_part()
    return PrefillFlops(prompt_tokens=np.full(p.size, float(wl.turn_tokens)),
                        linear_flops=np.asarray(whole.linear_flops - hist.linear_flops),
                        attention_flops=np.asarray(whole.attention_flops - hist.attention_flops),
                        head_flops=whole.head_flops)


@dataclass(frozen=True)
class RequestKinds:
    """The kinds of request a workload sends, where requests differ, for a TTFT percentile over
    them (`capacity.plan.queueing.mixture_quantile_ms`): each kind's share of the requests
    (`weights`, summing to 1) and its prefill, FLOPs and new tokens (`prefills`)."""

    weights: tuple[float, ...]
    prefills: tuple[tuple[PrefillFlops, float], ...]


MAX_LATER_KINDS: Final = 6
"""A conversation's later turns are `request_kinds`' kinds in at most this many runs of
consecutive turns (their prefill grows slowly with the history; 1,000 turns stay 7 kinds)."""


def request_kinds(model: Model, wl: Workload, *, hit_tokens: int = 0, share: float = 0.0,
                  by_operator: bool = False) -> RequestKinds:
    """The kinds of request of a workload: one turn without a shared prefix, one kind (the
    prompt). A shared prefix (`share` > 0): its misses (1 - share of the requests, the whole
    prompt) and its hits (share, the rest of it after `hit_tokens` cached, F(L) - F(c) as
    `mean_prefix_prefill`; the same prompt as the misses where the engine serves none of it,
    `hit_tokens` 0, so every configuration of a plan has the same kinds). A conversation of n
    turns (`Workload.turns`): the first turn's kinds at 1/n of their weight, and its later
    turns (1/n of the requests each, their new tokens after their history, `_later_turns`) in
    at most `MAX_LATER_KINDS` runs of consecutive turns, each with its turns' mean FLOPs and
    their weight. Example (1,000-token first prompts, 256 out, 100 new, 3 turns, no prefix):
    weights (1/3, 1/3, 1/3), new tokens (1,000, 100, 100). Units: FLOPs, tokens."""
    whole = prefill_flops(model, wl.prompt, by_operator=by_operator)
    n = wl.turns
    first: list[tuple[float, tuple[PrefillFlops, float]]] = [(1.0 / n, (whole, float(wl.prompt)))]
    if share > 0:
        hit = (mean_prefix_prefill(whole, model, hit_tokens, 1.0, by_operator=by_operator)
               if hit_tokens > 0 else (whole, float(wl.prompt)))
        first = [((1.0 - share) / n, (whole, float(wl.prompt))), (share / n, hit)]
    kinds = list(first)
    if n > 1:
        later = _later_turns(model, wl, by_operator)
        for run in np.array_split(np.arange(n - 1), min(n - 1, MAX_LATER_KINDS)):
            kinds.append((run.size / n, (PrefillFlops(
                prompt_tokens=np.asarray(float(wl.turn_tokens)),
                linear_flops=np.asarray(np.mean(later.linear_flops[run])),
                attention_flops=np.asarray(np.mean(later.attention_flops[run])),
                head_flops=later.head_flops), float(wl.turn_tokens))))
    return RequestKinds(weights=tuple(w for w, _ in kinds), prefills=tuple(k for _, k in kinds))


def cached_prefill_flops(s: Scenario, prompt_tokens: npt.ArrayLike,
                         cached_tokens: npt.ArrayLike = 0) -> FloatArray:
    """Total FLOPs of `cached_prefill`, FLOPs. Seed model, L 8192, c 0: 1.47e14 + attention."""
    return cached_prefill(s, prompt_tokens, cached_tokens).total_flops


def cached_prefill_s(s: Scenario, prompt_tokens: npt.ArrayLike,
                     cached_tokens: npt.ArrayLike = 0) -> FloatArray:
    """Prefill time (s) of one replica with `cached_tokens` already cached: the prefill overhead
    + the GEMMs at MFU and the attention at its own MFU (F6b; both at MFU without one) over
    F(L) - F(c), + TP communication over the L - c new tokens. The prompt is one forward pass
    of its L - c new tokens: with `Scenario.mfu_half_tokens` its MFU is step_mfu(L - c) (F6c).

    With nothing cached this is `evaluate(s).prefill_s` at that prompt (F6 with attention).
    The chunked-prefill event model (`capacity.plan.events`) uses it for a hit prompt's prefill.
    Source: F6 (docs/method.md), "Prefix caching".
    """
    L = np.asarray(prompt_tokens, dtype=np.float64)
    c = np.asarray(cached_tokens, dtype=np.float64)
    pf = cached_prefill(s, L, c)
    comm_s = forward_comm_ms(s.model, s.gpu, s.tp, L - c, s.pp, s.pp_handoff_ms) / 1e3
    t0_ms = s.fixed_prefill_ms
    return np.asarray(prefill_seconds_by_parts(pf, s.tflops * s.tp, s.mfu, s.attn_mfu,
                                               t0_ms / 1e3,
                                               half_tokens=s.mfu_half_tokens,
                                               routing=s.routing) + comm_s,
                      dtype=np.float64)


def shared_prefix_bytes(s: Scenario, prefix_tokens: npt.ArrayLike) -> FloatArray:
    """KV bytes (per GPU) of a prefix that every sharing request holds once: its full-attention
    and MLA layers (sliding windows and linear state stay per request). Unit: bytes."""
    p = np.asarray(prefix_tokens, dtype=np.float64)
    kv = kv_request_bytes(s.model, np.maximum(p, 1.0), s.kv_dtype, s.tp, s.block_size)
    shared = (kv.by_kind_bytes["full"] + kv.by_kind_bytes["mla"]) * s.stage_share  # F13
    return np.asarray(np.where(p > 0, shared, 0.0), dtype=np.float64)


def max_concurrency_shared_prefix(s: Scenario, prefix_tokens: int) -> IntArray:
    """C_vram (whole deployment) when every request shares a cached prefix of `prefix_tokens`:
    replicas x floor((KV budget - prefix KV) / (KV(context) - prefix KV)). Unit: requests.

    Source: F3 (docs/method.md) with the prefix held once, "Prefix caching".
    """
    if not 0 <= prefix_tokens < s.context_tokens:
        raise InputError(f"shared prefix of {prefix_tokens} tokens must be shorter than the "
                         f"context of {s.context_tokens} tokens")
    ev = evaluate(s, [1])
    shared = float(shared_prefix_bytes(s, prefix_tokens))
    per_request = float(ev.kv_held_bytes) - shared
    return np.asarray(stream_slots(max_concurrency(ev.vram.kv_budget_bytes - shared,
                                                   per_request), s.pp)
                      * s.replicas, dtype=np.int64)


def full_load_rate_per_s(s: Scenario, *, prefill_s: npt.ArrayLike, output_tokens: float,
                         slots: int) -> FloatArray:
    """Highest sustained arrival rate of the deployment (req/s) with full slots:
    replicas / (prefill + (output - 1) x t_step(slots) / slots), t_step from F4 at the
    scenario's context. Source: docs/method.md, queueing (saturation rate)."""
    if slots < 1:
        raise InputError("no request fits in memory (0 slots)")
    step_s = float(evaluate(s, [slots * s.replicas]).decode.step_ms[0]) / 1e3
    per_request = np.asarray(prefill_s, dtype=np.float64) + (output_tokens - 1) * step_s / slots
    return np.asarray(s.replicas / per_request, dtype=np.float64)


def full_load_cost_per_mtok(s: Scenario, *, prefill_s: npt.ArrayLike, output_tokens: float,
                            slots: int) -> FloatArray:
    """Cost of one million output tokens at the full-load rate (F7): price x GPUs /
    (rate x output tokens x 3600) x 1e6, in the scenario's currency. A prefix cache lowers it
    through a shorter prefill (and more slots)."""
    rate = full_load_rate_per_s(s, prefill_s=prefill_s, output_tokens=output_tokens, slots=slots)
    return cost_per_mtok(s.price_per_hour, s.paid_gpus, rate * output_tokens)


@dataclass(frozen=True, kw_only=True)
class PrefixEffect:
    """What a shared prefix held in the cache changes for one scenario, without and with it:
    mean prefill (TTFT at no load, s), C_vram (requests) and F7's cost per M output tokens
    with C_vram requests decoding (the scenario's currency)."""

    prefix_tokens: int
    share: float
    ttft_s: tuple[float, float]
    c_vram: tuple[int, int]
    cost_per_mtok: tuple[float, float]


def prefix_effect(s: Scenario, prefix_tokens: int, share: float,
                  grain: PrefixGrain = TOKEN_GRAIN) -> PrefixEffect:
    """The Explorer's "shared prefix": `share` of requests reuse a cached prefix of
    `prefix_tokens` (capped below the prompt; as much of it as `grain` serves, every token
    without an engine: the chapter's arithmetic).

    - mean TTFT at no load: share x prefill(L, prefix) + (1 - share) x prefill(L);
    - C_vram: the prefix held once, each sharing request holds the rest:
      replicas x floor((budget - prefix KV) / (KV(context) - share x prefix KV));
    - cost per M output tokens (F7) at that C_vram, the decode step from F4.
    Source: docs/method.md, "Prefix caching".
    """
    if not 0.0 <= share <= 1.0:
        raise InputError(f"prefix share is a fraction of requests in [0, 1], got {share}")
    prompt = s.prompt
    p = max(0, min(grain.shared(prefix_tokens, prompt), s.context_tokens - 1))
    full = float(cached_prefill_s(s, prompt))
    hit = float(cached_prefill_s(s, prompt, p)) if p > 0 else full
    lat_s = s.request_latency_ms / 1e3   # TTFT: the prefill and the latency outside the GPU
    ev = evaluate(s, [1])
    shared = float(shared_prefix_bytes(s, p))
    per_request = float(ev.kv_held_bytes) - share * shared
    budget = ev.vram.kv_budget_bytes - (shared if share > 0 else 0.0)
    c_with = int(stream_slots(max_concurrency(budget, per_request), s.pp)) * s.replicas
    c_without = int(ev.max_concurrency_vram)
    costs = evaluate(s, [max(c_without, 1), max(c_with, 1)]).cost_per_mtok
    return PrefixEffect(prefix_tokens=p, share=share,
                        ttft_s=(full + lat_s, share * hit + (1.0 - share) * full + lat_s),
                        c_vram=(c_without, c_with),
                        cost_per_mtok=(float(costs[0]), float(costs[1])))


def prefix_capacity_table(s: Scenario, rows: Sequence[tuple[int, int]], prefix_tokens: int,
                          share: float, grain: PrefixGrain = TOKEN_GRAIN) -> list[TableRow]:
    """F8's capacity table (`capacity_table`) with a shared prefix held in the cache: per GPU,
    the KV total of c requests per replica becomes c x KV(L) - share x c x prefix KV + prefix KV
    (the prefix once; its full-attention and MLA layers, `shared_prefix_bytes`), the subtotal
    and verdict follow, and TTFT at no load is the mean over requests, share x prefill(L,
    prefix) + (1 - share) x prefill(L) (as a ratio to F6's, so the table's basis stays).
    The prefix is what `grain` serves of `prefix_tokens` (`prefix_effect`).
    Units: bytes, s. Source: docs/method.md, "Prefix caching". Without a prefix: the table."""
    table = capacity_table(s, rows)
    p = max(0, min(grain.shared(prefix_tokens, s.prompt), s.context_tokens - 1))
    if p == 0 or share <= 0 or not table:
        return table
    if share > 1:
        raise InputError(f"prefix share is a fraction of requests in [0, 1], got {share}")
    shared = float(shared_prefix_bytes(s, p))
    full = float(cached_prefill_s(s, s.prompt))
    ratio = (share * float(cached_prefill_s(s, s.prompt, p)) + (1.0 - share) * full) / full
    lat_s = s.request_latency_ms / 1e3   # the prefill shrinks, the latency outside does not
    out = []
    for r in table:
        per_replica = math.ceil(r.concurrency / s.replicas)
        delta = shared - share * per_replica * min(shared, r.kv_request_bytes)
        kv_total = max(r.kv_total_bytes + delta, 0.0) if per_replica else r.kv_total_bytes
        subtotal = r.vram_subtotal_bytes + (kv_total - r.kv_total_bytes)
        verdict = MemoryVerdict(str(memory_verdict(subtotal, r.usable_bytes, s.headroom)))
        out.append(replace(r, kv_total_bytes=kv_total, vram_subtotal_bytes=subtotal,
                           verdict=verdict,
                           ttft_s=(r.ttft_s - lat_s) * ratio + lat_s))
    return out
