"""F6: prefill FLOPs and time to first token.

Linear part (the chapter's formula): `t = 2 x P x L / (F x MFU)`.
Attention part (the O(L^2) term the chapter warns about): causal attention costs 4 x q_heads x
head_dim FLOPs per attended (query, key) pair (QK^T and PV, 2 FLOPs per multiply-add each);
a full layer attends L^2/2 pairs, so it adds 2 x q_heads x head_dim x L^2; a sliding layer of
window w attends sum_i min(i, w) pairs (= L^2/2 while L <= w, then grows by w per token).
Source: F6 (docs/method.md). Seed: Qwen3.5-9B, 8192 tokens, RTX 4090, MFU 0.3 -> 2.975 s (linear).

By parts (F6b): the GEMMs run at MFU, the attention kernels at their own efficiency
`attn_mfu` (FlashAttention-class kernels reach a different share of peak than GEMMs, and the
share drifts with the prompt length): `t = t0 + 2 P L / (F x MFU) + attention / (F x attn_mfu)`.
With `attn_mfu` None (the spec-sheet default) the attention runs at MFU too, today's formula.
F6b also counts the weights as engines run them: the input embedding is a lookup (no FLOPs),
and the output head (vocab x hidden) turns only the prompt's last position into logits, the
one that samples the first token (vLLM, SGLang and llama.cpp all gather that position first):
`linear = 2 (P_active - lookup - head) L + 2 head`, with lookup = vocab x hidden for an untied
embedding table and 0 for a tied one (`Model.lookup_params_b`, `Model.head_params_b`). For the
chapter's 9B model the head alone is 11% of the parameters; for a 156M model with an untied
32K vocabulary, 42%. F6 (the chapter's count) stays the default step method's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Model
from capacity.errors import InputError
from capacity.model.moe import DENSE, Routing
from capacity.types import FloatArray
from capacity.units import TERA


def attended_pairs(prompt_tokens: npt.ArrayLike, window_tokens: int = 0) -> FloatArray:
    """Causal (query, key) pairs of one layer for an L-token prompt: L^2/2, or with a window w,
    w^2/2 + (L - w) x w once L > w. Unit: pairs."""
    L = np.asarray(prompt_tokens, dtype=np.float64)
    if window_tokens <= 0:
        return np.asarray(L * L / 2.0, dtype=np.float64)
    w = float(window_tokens)
    return np.asarray(np.where(L <= w, L * L / 2.0, w * w / 2.0 + (L - w) * w), dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class PrefillFlops:
    """FLOPs to prefill one prompt: the linear (GEMM) part and the attention part."""

    prompt_tokens: FloatArray
    linear_flops: FloatArray
    attention_flops: FloatArray
    head_flops: FloatArray | float = 0.0
    """The part of `linear_flops` spent once per prompt, not per token (F6b's output head at
    the last position; 0 under F6): a cached prefix does not save it."""

    def per_token_part(self) -> PrefillFlops:
        """The FLOPs a cached prefix of this length saves: all but the once-per-prompt head."""
        return PrefillFlops(prompt_tokens=self.prompt_tokens,
                            linear_flops=np.asarray(self.linear_flops - self.head_flops,
                                                    dtype=np.float64),
                            attention_flops=self.attention_flops)

    @property
    def total_flops(self) -> FloatArray:
        return np.asarray(self.linear_flops + self.attention_flops, dtype=np.float64)


def prefill_flops(model: Model, prompt_tokens: npt.ArrayLike, *,
                  by_operator: bool = False) -> PrefillFlops:
    """FLOPs to prefill a prompt of `prompt_tokens` (F6): 2 x P_active x L plus attention.

    `by_operator` (F6b's count): 2 (P_active - lookup - head) L + 2 head, the embedding lookup
    free and the logits at the last position only. Seed: 2 x 9e9 x 8192 = 1.47e14 FLOPs linear
    (F6). Llama-3.1-8B at 1,000 tokens: 2 x 8.03e9 x 1000 = 1.61e13 (F6) against
    2 x (8.03e9 - 2 x 0.525e9) x 1000 + 2 x 0.525e9 = 1.40e13 (F6b).
    """
    L = np.asarray(prompt_tokens, dtype=np.float64)
    if np.any(L <= 0):
        raise InputError("prompt length must be > 0 tokens")
    head = 0.0
    if by_operator:
        head = 2.0 * model.head_params_b * 1e9
        body = model.params_active_b - model.lookup_params_b - model.head_params_b
        linear = 2.0 * body * 1e9 * L + head
    else:
        linear = 2.0 * model.params_active_b * 1e9 * L
    attn = np.zeros_like(L)
    for g in model.layer_groups:
        if g.kind == "linear":
            continue
        window = g.window_tokens if g.kind == "sliding" else 0
        attn = attn + 4.0 * g.count * g.q_heads * g.head_dim * attended_pairs(L, window)
    return PrefillFlops(prompt_tokens=L, linear_flops=np.asarray(linear, dtype=np.float64),
                        attention_flops=np.asarray(attn, dtype=np.float64), head_flops=head)


def fixed_prefill_ms(prefill_overhead_ms: float, linear_prefill_ms: float,
                     linear_layers: int, prefill_layer_ms: float = 0.0,
                     layers: int = 0) -> float:
    """F6's fixed time of one prefill, ms: the per-prefill overhead plus a per-layer one for
    each linear-attention layer (Gated DeltaNet, Mamba), plus one for every layer when the
    engine launches its prefill kernels without CUDA graphs, `prefill_overhead_ms +
    linear_prefill_ms x linear layers + prefill_layer_ms x layers`.

    A linear-attention layer prefills through a chain of small kernels (the chunked delta
    rule's cumulative sums, triangular solve, state pass and output) whose time at a few
    thousand tokens is their launch and latency floor, not their FLOPs, which F6 counts as
    nothing for these layers: vLLM's `chunk_gated_delta_rule_fwd` takes 0.19-0.20 ms for one
    layer of a 2,048-token Qwen3.5 prompt on a B200 (github:vllm-project/vllm pull 38981,
    2026), the floor the typical basis uses (data/engines.toml). Example: Qwen3.5-9B, 24 Gated
    DeltaNet layers x 0.2 ms + 3.5 ms = 8.3 ms.

    SGLang until piecewise CUDA graphs became its default (0.5.10, 2026-04) replayed CUDA
    graphs for decode batches only: a prefill pass launched every kernel of every layer from
    Python, a cost per layer that a short prompt's GPU time does not hide (`prefill_layer_ms`:
    the SGLang profile's 0.38 ms for those releases, data/engines.toml, from sgl-project/sglang
    pulls 13094 and 11845, which measured the prefill with and without those graphs; 0 on
    every typical basis). Example: Qwen3-235B-A22B's 94 layers x 0.38 ms + 3.5 ms = 39.22 ms.
    Source: F6 (docs/method.md; "Prefill without CUDA graphs")."""
    return (float(prefill_overhead_ms) + float(linear_prefill_ms) * int(linear_layers)
            + float(prefill_layer_ms) * int(layers))


def prefill_seconds(flops: npt.ArrayLike, tflops: float, mfu: float,
                    overhead_s: float = 0.0) -> FloatArray:
    """Prefill time in seconds: t0 + FLOPs / (F x MFU). Seed: 1.47e14 / (165.2e12 x 0.3) = 2.975 s."""
    if not 0 < mfu <= 1:
        raise InputError(f"MFU must be in (0, 1], got {mfu}")
    if tflops <= 0:
        raise InputError(f"TFLOP/s must be > 0, got {tflops}")
    return np.asarray(overhead_s + np.asarray(flops, dtype=np.float64) / (tflops * TERA * mfu),
                      dtype=np.float64)


def prefill_seconds_by_parts(pf: PrefillFlops, tflops: float, mfu: float,
                             attn_mfu: float | None = None, overhead_s: float = 0.0, *,
                             half_tokens: float = 0.0,
                             step_tokens: npt.ArrayLike | None = None,
                             routing: Routing = DENSE) -> FloatArray:
    """Prefill time in seconds by parts (F6b): t0 + linear / (F x MFU(m)) + attention / (F x attn_mfu).

    `attn_mfu` None: the attention at MFU(m) too, i.e. `prefill_seconds(total)`, the chapter's
    TTFT (seed: 2.975 s linear + 0.034 s attention at MFU 0.3). Example: 1.47e14 FLOP linear
    and 1.0e13 FLOP attention on 165.2 TFLOP/s at MFU 0.3 and attn_mfu 0.5: 2.975 + 0.121 s.

    MFU(m) = `step_mfu(m, mfu=mfu, half_tokens=half_tokens)`, m the tokens of the forward pass:
    `step_tokens`, default the prompt's (a whole-prompt prefill is one pass); `half_tokens` 0
    keeps the constant MFU. Example: 1,000 tokens, plateau 0.6, m_half 250: MFU(m) =
    0.6 / (1 + 0.25^2.5)^0.4 = 0.593.
    `routing`: an MoE model's experts (`step_mfu`).
    """
    m = pf.prompt_tokens if step_tokens is None else step_tokens
    eff_mfu = (step_mfu(m, mfu=mfu, half_tokens=half_tokens, routing=routing)
               if half_tokens > 0 else mfu)
    if not 0 < mfu <= 1:
        raise InputError(f"MFU must be in (0, 1], got {mfu}")
    if tflops <= 0:
        raise InputError(f"TFLOP/s must be > 0, got {tflops}")
    peak = tflops * TERA
    if attn_mfu is None:
        return np.asarray(overhead_s + pf.total_flops / (peak * eff_mfu), dtype=np.float64)
    if not 0 < attn_mfu <= 1:
        raise InputError(f"attention MFU must be in (0, 1], got {attn_mfu}")
    return np.asarray(overhead_s + pf.linear_flops / (peak * eff_mfu)
                      + pf.attention_flops / (peak * attn_mfu), dtype=np.float64)


MFU_CURVE_SHARPNESS: Final = 2.5
"""F6c's sharpness k (no unit): how sharply a pass's GEMMs turn from reading their weights to
arithmetic, `step_mfu`'s `(1 + (m_half R / m)^k)^(-1/k)`; k = 1 is the sum of the two (the
curve until 2026-12-04), large k their max. Measured on this project's own H200
(data/reference/gpu_probe/, `benchmarks/gpu_step_probe.py`): the four weight GEMMs of a layer
of Llama-3.1-8B and of Qwen3-32B in bf16 at 1-16,384 rows, each model's time fitted as
t(1) (1 + (m / m_r)^k)^(1/k): median error 2.2-2.3% at k = 2.5 (m_r 200 and 196 rows, the
roofline's ridge: 183 by `moe.gemm_read_scale` from m_half 262), 2.4% at 3, 2.7% at 2 and
11.9% at k = 1; 2.5 is the least (`tests/test_prefill_curve.py` refits it from the file)."""


def step_mfu(tokens: npt.ArrayLike, *, mfu: float, half_tokens: float = 0.0,
             routing: Routing = DENSE) -> FloatArray:
    """Prefill GEMM efficiency of a forward pass over `tokens` tokens (a share of peak, no unit):
    `mfu / (1 + (m_half x R(m) / m)^k)^(1/k)`, k = `MFU_CURVE_SHARPNESS`, rising with the
    tokens per step and flattening at `mfu` (a pass reads its weights once and does 2 P m
    FLOPs: below the ridge m_half the read sets its time, above it the arithmetic, and near
    it GEMM kernels reach neither roof: the roofline's corner softened, as F4c softens the
    decode step's; issue 32). R(m) is `Routing.half_ratio`: for an MoE model the weights the
    pass's touched experts read against one token's (`Routing.gemm_weight_ratio`: each
    expert's GEMM gets about m k / E rows, so the pass needs E/k times the tokens to fill
    them; 1 for a dense model), times m_half's scale on the device and weight format
    (`moe.gemm_read_scale`; 1 on an H100 SXM in bf16, where m_half was measured).

    `half_tokens` (m_half, tokens) is the pass's ridge: there a dense pass runs at
    2^(-1/k) = 0.758 of its plateau; 0 keeps the chapter's constant MFU (every basis without
    a curve). Never above `mfu`, so never above the peak. Example: plateau 0.7, m_half 128:
    0.7 / 2^0.4 = 0.531 at 128 tokens, 0.7 / (1 + (128 / 2048)^2.5)^0.4 = 0.6997 at 2,048;
    an MoE with R = 22.9 at 2,048 tokens (m_half R = 2,931): 0.7 / (1 + 1.431^2.5)^0.4 =
    0.427 (the sum's curve, k = 1: 0.7 x 2048 / (2048 + 2931) = 0.288).
    """
    m = np.asarray(tokens, dtype=np.float64)
    if half_tokens < 0:
        raise InputError(f"half-efficiency tokens must be >= 0, got {half_tokens}")
    if half_tokens == 0:
        return np.full_like(m, float(mfu))
    if np.any(m <= 0):
        raise InputError("tokens per step must be > 0")
    k = MFU_CURVE_SHARPNESS
    ridge = half_tokens * routing.half_ratio(m) / m
    return np.asarray(mfu / (1.0 + ridge ** k) ** (1.0 / k), dtype=np.float64)
