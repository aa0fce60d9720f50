"""F1 and F2: KV-cache bytes per token and per request, layer by layer.

Source: docs/method.md, F1-F2 (the chapter's KV account, extended to hybrid layouts).
Chapter check: Qwen3.5-9B, 8 full-attention layers of 32, 4 KV heads x 256 at fp16
-> 2 x 4 x 256 x 2 B x 8 layers = 32 KiB per token; 8192 tokens -> 268,435,456 B (0.27 GB).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capacity.catalog.loader import LAYER_KINDS, LayerGroup, LayerKind, Model
from capacity.errors import InputError
from capacity.types import ArrayLike, FloatArray
from capacity.units import bytes_per_element, normalize_dtype

DEFAULT_BLOCK_SIZE = 16
"""vLLM PagedAttention's default block size in tokens."""


def heads_per_rank(kv_heads: int, tp: int) -> float:
    """KV heads each tensor-parallel rank holds: kv_heads / tp, or 1 when heads are replicated.

    With TP larger than the KV head count (kv_heads < tp) every rank keeps one whole head
    (vLLM replicates them), so per-rank KV stops shrinking. Source: F10 (docs/method.md).
    """
    return max(kv_heads / tp, 1.0)


def layer_bytes_per_token(group: LayerGroup, kv_dtype: str, tp: int = 1) -> float:
    """Bytes per token per layer of one group, on one TP rank (0 for linear-state layers).

    full/sliding: 2 (K and V) x kv_heads x head_dim x bytes; MLA: (kv_lora_rank +
    qk_rope_head_dim) x bytes, one latent replicated on every rank. Source: F1 (docs/method.md).
    """
    b = bytes_per_element(kv_dtype)
    if group.kind in ("full", "sliding"):
        return 2.0 * heads_per_rank(group.kv_heads, tp) * group.head_dim * b
    if group.kind == "mla":
        return float(group.kv_lora_rank + group.qk_rope_head_dim) * b
    return 0.0


@dataclass(frozen=True, kw_only=True)
class KvPerToken:
    """KV bytes per token on one TP rank, split by layer kind (`linear` is always 0)."""

    kv_dtype: str
    tp: int
    by_kind_bytes: dict[LayerKind, float]
    state_bytes_per_request: float

    @property
    def bytes_per_token(self) -> float:
        """Bytes per token over all layers (what a full-context token costs)."""
        return sum(self.by_kind_bytes.values())


def kv_bytes_per_token(model: Model, kv_dtype: str = "fp16", tp: int = 1) -> KvPerToken:
    """Bytes of KV per token, layer by layer (F1), on one of `tp` tensor-parallel ranks.

    Unit: bytes per token. Linear-attention layers add a fixed `state_bytes` per request
    instead (split across ranks by heads). Seed: Qwen3.5-9B at fp16 -> 32,768 B (32 KiB).
    """
    if tp < 1:
        raise InputError(f"tensor parallel size must be >= 1, got {tp}")
    dtype = normalize_dtype(kv_dtype)
    by_kind: dict[LayerKind, float] = {k: 0.0 for k in LAYER_KINDS}
    state = 0.0
    for g in model.layer_groups:
        by_kind[g.kind] += g.count * layer_bytes_per_token(g, dtype, tp)
        if g.kind == "linear":
            state += g.count * g.state_bytes / tp
    return KvPerToken(kv_dtype=dtype, tp=tp, by_kind_bytes=by_kind, state_bytes_per_request=state)


HYBRID_BLOCK_MULTIPLE = 16
"""vLLM rounds a hybrid model's attention block up to a multiple of this many tokens (the
block sizes its attention kernels take)."""


def hybrid_block_tokens(model: Model, kv_dtype: str = "fp16", tp: int = 1) -> int:
    """vLLM's attention block on a hybrid model (tokens; 0 for a model without linear-state
    layers or without a stated `page_state_bytes`): the smallest multiple of
    `HYBRID_BLOCK_MULTIPLE` tokens whose attention page (one layer's KV of that many tokens,
    per TP rank) holds one linear layer's recurrent state (per rank, split by heads), so both
    kinds share one page size: 16 x ceil(state / (16 x 2 x kv_heads x head_dim x bytes)).
    Example: Qwen3.5-9B at a bf16 KV cache, TP 1: 2,146,304 B / (16 x 2 x 4 x 256 x 2 B) =
    32.75 -> 33 x 16 = 528 tokens. Source: vLLM's HybridAttentionMambaModelConfig
    (github:vllm-project/vllm vllm/model_executor/models/config.py, "Setting attention block
    size to ... tokens to ensure that attention page size is >= mamba page size");
    docs/method.md ("Prefix caching on a hybrid model")."""
    state = max((g.page_state_bytes for g in model.layer_groups if g.kind == "linear"),
                default=0.0)
    attn = [layer_bytes_per_token(g, kv_dtype, tp) for g in model.layer_groups
            if g.kind in ("full", "sliding")]
    if state <= 0 or not attn:
        return 0
    m = HYBRID_BLOCK_MULTIPLE
    return int(m * np.ceil(state / tp / (m * max(attn))))


def tokens_held(group: LayerGroup, context_tokens: ArrayLike, block_size: int = 0) -> FloatArray:
    """Tokens a request keeps in one layer: L for full/MLA, min(L, w) for sliding windows.

    With `block_size` > 0 the count rounds up to whole pages (vLLM PagedAttention).
    """
    L = np.asarray(context_tokens, dtype=np.float64)
    held = np.minimum(L, group.window_tokens) if group.kind == "sliding" else L
    if block_size > 0:
        held = np.ceil(held / block_size) * block_size
    return np.asarray(held, dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class KvRequest:
    """KV bytes one request holds at a context length, exact and paged, with its breakdown."""

    context_tokens: FloatArray
    exact_bytes: FloatArray
    paged_bytes: FloatArray
    block_size: int
    by_kind_bytes: dict[LayerKind, FloatArray]


def kv_request_bytes(model: Model, context_tokens: ArrayLike, kv_dtype: str = "fp16",
                     tp: int = 1, block_size: int = DEFAULT_BLOCK_SIZE) -> KvRequest:
    """KV bytes one request holds at `context_tokens` on one TP rank (F2).

    Unit: bytes. Sum over layers of per-token bytes x tokens held (min(L, w) on sliding
    layers), plus linear-attention states. `paged_bytes` rounds tokens up to `block_size`.
    For plain full-attention models this is K x L. Seed: Qwen3.5-9B, 8192 tokens, fp16
    -> 268,435,456 B.
    """
    if block_size < 1:
        raise InputError(f"block size must be >= 1 token, got {block_size}")
    L = np.asarray(context_tokens, dtype=np.float64)
    if np.any(L <= 0):
        raise InputError("context length must be > 0 tokens")
    dtype = normalize_dtype(kv_dtype)
    exact = np.zeros_like(L)
    paged = np.zeros_like(L)
    by_kind: dict[LayerKind, FloatArray] = {k: np.zeros_like(L) for k in LAYER_KINDS}
    for g in model.layer_groups:
        if g.kind == "linear":
            state = np.full_like(L, g.count * g.state_bytes / tp)
            exact, paged = exact + state, paged + state
            by_kind["linear"] = by_kind["linear"] + state
            continue
        per_tok = g.count * layer_bytes_per_token(g, dtype, tp)
        e = per_tok * tokens_held(g, L)
        exact = exact + e
        paged = paged + per_tok * tokens_held(g, L, block_size)
        by_kind[g.kind] = by_kind[g.kind] + e
    return KvRequest(context_tokens=L, exact_bytes=exact, paged_bytes=paged,
                     block_size=block_size, by_kind_bytes=by_kind)


def held_request_bytes(model: Model, context_tokens: ArrayLike, kv_dtype: str = "fp16",
                       tp: int = 1, block_size: int = DEFAULT_BLOCK_SIZE) -> FloatArray:
    """Bytes one request holds in a paged engine's KV pool (vLLM's blocks, SGLang's token
    pool) at `context_tokens`, on one TP rank: what admission and the slots count.

    Unit: bytes. On a model without a stated `page_state_bytes` this is F2's `paged_bytes`.
    On a hybrid model (linear-attention layers beside attention) the engine holds each linear
    layer's recurrent state, which the chapter's F2 leaves out (`state_bytes` = 0):
    - in pages (`block_size` > 1, vLLM V1): the attention block grows to
      `hybrid_block_tokens` (when larger than `block_size`) and each linear layer holds one
      page of that block's size, the attention page (vLLM pads the state to it);
    - in a token pool (`block_size` 1, SGLang): the state itself, `page_state_bytes` / TP a
      layer, beside the attention tokens.
    Example: Qwen3.5-9B, bf16 KV, TP 1, 1,000 tokens in 16-token blocks: the block is 528
    tokens; 8 attention layers x 4,096 B x 1,056 tokens = 34,603,008 B, 24 linear layers x 528
    x 4,096 B = 51,904,512 B; 86,507,520 B (F2's paged bytes: 8 x 4,096 x 1,008 = 33,030,144).
    In a token pool: 8 x 4,096 x 1,000 + 24 x 2,146,304 = 84,279,296 B.
    Source: vLLM's HybridAttentionMambaModelConfig (the block, the padded state page) and its
    KV cache manager (one page a linear layer per request outside prefix caching's align
    mode); docs/method.md, "A hybrid model's pages"."""
    req = kv_request_bytes(model, context_tokens, kv_dtype, tp, block_size)
    if not any(g.kind == "linear" and g.page_state_bytes > 0 for g in model.layer_groups):
        return req.paged_bytes
    dtype = normalize_dtype(kv_dtype)
    block = engine_block_tokens(model, dtype, tp, block_size)
    held = np.full_like(req.context_tokens, held_state_bytes(model, dtype, tp, block_size))
    for g in model.layer_groups:
        if g.kind != "linear":
            held = held + (g.count * layer_bytes_per_token(g, dtype, tp)
                           * tokens_held(g, req.context_tokens, block))
    return np.asarray(held, dtype=np.float64)


def engine_block_tokens(model: Model, kv_dtype: str = "fp16", tp: int = 1,
                        block_size: int = DEFAULT_BLOCK_SIZE) -> int:
    """The attention page a paged engine uses for `model` (tokens): `block_size`, grown on a
    hybrid model to `hybrid_block_tokens` when pages hold more than one token (vLLM; a token
    pool, `block_size` 1, keeps 1). Qwen3.5-9B at bf16 KV: 16 -> 528, 1024 -> 1024, 1 -> 1."""
    grown = hybrid_block_tokens(model, kv_dtype, tp) if block_size > 1 else 0
    return max(int(block_size), grown)


def held_state_bytes(model: Model, kv_dtype: str = "fp16", tp: int = 1,
                     block_size: int = DEFAULT_BLOCK_SIZE) -> float:
    """The part of `held_request_bytes` a hybrid model's linear layers hold, whatever the
    context (bytes per request on one TP rank): in vLLM's pages (`block_size` > 1) one
    attention page of the engine's block (`engine_block_tokens`) a layer, in a token pool
    (`block_size` 1) the state itself; the
    chapter's `state_bytes` where no `page_state_bytes` is stated. Qwen3.5-9B, bf16 KV, TP 1:
    24 x 528 x 4,096 = 51,904,512 B in 16-token blocks; 24 x 2,146,304 = 51,511,296 B in a
    token pool. Source: as `held_request_bytes`."""
    dtype = normalize_dtype(kv_dtype)
    hybrid = hybrid_block_tokens(model, dtype, tp) if block_size > 1 else 0
    page = max((layer_bytes_per_token(g, dtype, tp) for g in model.layer_groups
                if g.kind in ("full", "sliding")), default=0.0) * engine_block_tokens(
                    model, dtype, tp, block_size)
    total = 0.0
    for g in model.layer_groups:
        if g.kind == "linear":
            state = (g.page_state_bytes if g.page_state_bytes > 0 else g.state_bytes) / tp
            total += g.count * (page if hybrid and g.page_state_bytes > 0 else state)
    return total


def align_block_tokens(model: Model, kv_dtype: str = "fp16", tp: int = 1,
                       block_size: int = DEFAULT_BLOCK_SIZE) -> int:
    """The block vLLM's mamba 'align' mode (prefix caching on a hybrid model) ends prefill
    chunks at (tokens): the engine's page, `engine_block_tokens`, on a hybrid model; 0 on a
    model without a linear layer's stated `page_state_bytes` (no align mode). Qwen3.5-9B at
    bf16 KV: 528 for a --block-size of 16 or 256, 1,024 for 1,024; Qwen3-8B: 0."""
    if not hybrid_block_tokens(model, kv_dtype, tp):
        return 0
    return engine_block_tokens(model, kv_dtype, tp, block_size)


def extra_state_bytes(model: Model, kv_dtype: str = "fp16", tp: int = 1,
                      block_size: int = DEFAULT_BLOCK_SIZE) -> float:
    """What a request's linear-layer states take in the engine beyond F2's `state_bytes`
    (bytes per request on one TP rank): `held_state_bytes` less the chapter's states; 0 on a
    model without a stated `page_state_bytes`. Qwen3.5-9B, bf16 KV, TP 1: 51,904,512 B in
    vLLM's pages, 51,511,296 B in a token pool (the states themselves, what a disaggregated
    hand-over sends)."""
    return (held_state_bytes(model, kv_dtype, tp, block_size)
            - kv_bytes_per_token(model, kv_dtype, tp).state_bytes_per_request)
