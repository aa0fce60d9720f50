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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from capacity.errors import InputError
from capacity.model.cost import cost_per_mtok
from capacity.model.kv import kv_request_bytes
from capacity.model.memory import MemoryVerdict, max_concurrency, memory_verdict
from capacity.model.parallel import tp_comm_ms
from capacity.model.prefill import (
    PrefillFlops,
    fixed_prefill_ms,
    prefill_flops,
    prefill_seconds_by_parts,
)
from capacity.model.roofline import counts_as_engines
from capacity.model.scenario import Scenario, TableRow, capacity_table, evaluate
from capacity.types import FloatArray, IntArray


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
    comm_s = tp_comm_ms(s.model, s.gpu, s.tp, L - c) / 1e3
    t0_ms = fixed_prefill_ms(s.prefill_overhead_ms, s.linear_prefill_ms,
                             s.model.layers_of("linear"))
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
    shared = kv.by_kind_bytes["full"] + kv.by_kind_bytes["mla"]
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
    per_request = float(ev.kv_request.exact_bytes) - shared
    return np.asarray(max_concurrency(ev.vram.kv_budget_bytes - shared, per_request)
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


def prefix_effect(s: Scenario, prefix_tokens: int, share: float) -> PrefixEffect:
    """The Explorer's "shared prefix": `share` of requests reuse a cached prefix of
    `prefix_tokens` (capped below the prompt).

    - mean TTFT at no load: share x prefill(L, prefix) + (1 - share) x prefill(L);
    - C_vram: the prefix held once, each sharing request holds the rest:
      replicas x floor((budget - prefix KV) / (KV(context) - share x prefix KV));
    - cost per M output tokens (F7) at that C_vram, the decode step from F4.
    Source: docs/method.md, "Prefix caching".
    """
    if not 0.0 <= share <= 1.0:
        raise InputError(f"prefix share is a fraction of requests in [0, 1], got {share}")
    prompt = s.prompt
    p = max(0, min(int(prefix_tokens), prompt - 1, s.context_tokens - 1))
    full = float(cached_prefill_s(s, prompt))
    hit = float(cached_prefill_s(s, prompt, p)) if p > 0 else full
    lat_s = s.request_latency_ms / 1e3   # TTFT: the prefill and the latency outside the GPU
    ev = evaluate(s, [1])
    shared = float(shared_prefix_bytes(s, p))
    per_request = float(ev.kv_request.exact_bytes) - share * shared
    budget = ev.vram.kv_budget_bytes - (shared if share > 0 else 0.0)
    c_with = int(max_concurrency(budget, per_request)) * s.replicas
    c_without = int(ev.max_concurrency_vram)
    costs = evaluate(s, [max(c_without, 1), max(c_with, 1)]).cost_per_mtok
    return PrefixEffect(prefix_tokens=p, share=share,
                        ttft_s=(full + lat_s, share * hit + (1.0 - share) * full + lat_s),
                        c_vram=(c_without, c_with),
                        cost_per_mtok=(float(costs[0]), float(costs[1])))


def prefix_capacity_table(s: Scenario, rows: Sequence[tuple[int, int]], prefix_tokens: int,
                          share: float) -> list[TableRow]:
    """F8's capacity table (`capacity_table`) with a shared prefix held in the cache: per GPU,
    the KV total of c requests per replica becomes c x KV(L) - share x c x prefix KV + prefix KV
    (the prefix once; its full-attention and MLA layers, `shared_prefix_bytes`), the subtotal
    and verdict follow, and TTFT at no load is the mean over requests, share x prefill(L,
    prefix) + (1 - share) x prefill(L) (as a ratio to F6's, so the table's basis stays).
    Units: bytes, s. Source: docs/method.md, "Prefix caching". Without a prefix: the table."""
    table = capacity_table(s, rows)
    p = max(0, min(int(prefix_tokens), s.prompt - 1, s.context_tokens - 1))
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
