"""F4 and F5: the decode step on the roofline, in ONE place, and the crossover concurrency.

Two methods (`StepMethod`), one implementation (`combine_step`):

*chapter* (the chapter's F4) `t_step(b) = t0 + max(t_bw(b), t_compute(b)) + t_comm(b)`, per
replica, for `b` sequences:
- bandwidth term `t_bw = (W_read(b) + b x KV_request) / (BW x eta_bw)` moves weights and KV
  through memory (per GPU: W and KV are one rank's share, BW one GPU's);
- compute term `t_compute = 2 x P_active x b / (F x eff)` does the arithmetic (F = GPU TFLOP/s
  x TP);
- MoE: `W_read(b) = W x [(1 - f) + f x (1 - (1 - k/E)^b)]`, the touched experts
  `E (1 - (1 - k/E)^b)` grow the expert share f of the weights read;
- `t0` is the fixed per-step overhead and `t_comm = comm_fixed + comm_per_seq x min(b, b_k)
  + comm_above x max(b - b_k, 0)` the tensor-parallel all-reduces (F10, `model/parallel.py`:
  small messages up to b_k tokens, the link's rate above).
With eta_bw = 1, t0 = 0 and comm = 0 it is the chapter's formula; eta_bw, eff and t0 are F11's
calibration knobs. Source: F4, F5, F10, F11 (docs/method.md).

*operator* (F4b, docs/method.md): the kernels of a decode step run one after another, each
group on its own roofline:
`t_step(b) = t0 + max(W_read / (BW x eta_w), 2 P b / (F x eff))`             (weight GEMMs)
`          + max(b KV / (BW x eta_kv), b A / F, KV x b_sat / (BW x eta_kv))`  (attention)
`          + t_comm(b) + t_seq x b`,
with A = 4 x layers x q_heads x head_dim x context the attention FLOPs of one sequence's token
(QK^T and PV, 2 FLOPs per multiply-add; Hoffmann et al. 2022, "Chinchilla", appendix F; the
same count as F6's prefill attention) and eta_w the existing `eta_bw`. The third attention term
is the small-batch floor: with fewer than `b_sat` sequences the attention kernel cannot fill
the GPU and reads KV at the effective bandwidth BW x b / b_sat, so the attention time stays at
b_sat sequences' worth (it flattens once the batch reaches b_sat). b_sat = 0 (the default,
spec-sheet) means no floor. With every knob at its spec-sheet value (eta = eff = 1, no
overheads, no floor) the operator step is >= the chapter's for a model whose embedding is
tied (a sum of maxima is at least the max of the sums). Where the weight GEMMs and attention
are both bandwidth-bound the two methods agree exactly.

*bound* (the spec sheet's, docs/method.md "Bases"): the chapter's overlap with the weights
counted as engines run them, `max((W_read - lookup share + b KV) / BW, 2 (P - lookup) b / F)`
at peak. It is at most the chapter's step (fewer bytes and FLOPs, knobs <= 1 only slow the
chapter down) and at most the operator step (a max of sums is at most the sum of the maxima),
so the spec-sheet basis that uses it is the upper bound on speed of every basis.

F12 (speculative decoding, `capacity.model.speculative`): a verify pass over k + 1 tokens per
sequence plus the draft, per emitted token (tau tokens per step).

F4c and F4d (issue 25; both off by default, so the spec sheet and the chapter are unchanged):
the ridge, `ridge_sharpness`, combines memory and arithmetic as (t_mem^k + t_comp^k)^(1/k)
where the step takes their max (`step_combine.ridge_ms`); the GEMMs' token rows are padded to
the engine's captured CUDA graph and rounded up to whole tiles (`cuda_graph_max_tokens`,
`gemm_tile_tokens`, `capacity.model.padding.gemm_tokens`), which grows the GEMM FLOPs only.
The combination (`combine_step`, `StepMethod`, the term helpers) lives in
`capacity.model.step_combine` and is re-exported here.

`StepModel` is the only implementation: `scenario.evaluate` (the Explorer, the event model's
`ServiceModel`, the simulated endpoint, the charts and the explanations), the planner's
vectorized search (arrays of configurations) and calibration's fit (`StepModel.peak_terms`,
then `combine_step` with each trial of the knobs) all call it, so every caller follows the
method and the knobs.

The chapter (Qwen3.5-9B AWQ, RTX 4090, 8K): bandwidth term 5.92 / 18.97 / 32.28 ms and compute
term 0.11 / 5.45 / 10.9 ms at C = 1 / 50 / 100; bandwidth binds at all three.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Model
from capacity.errors import InputError
from capacity.model import speculative
from capacity.model.moe import expert_fraction, weight_read_share
from capacity.model.padding import gemm_tokens
from capacity.model.step_combine import DEFAULT_STEP_METHOD as DEFAULT_STEP_METHOD
from capacity.model.step_combine import StepMethod as StepMethod
from capacity.model.step_combine import StepParts as StepParts
from capacity.model.step_combine import bandwidth_term_ms as bandwidth_term_ms
from capacity.model.step_combine import combine_step as combine_step
from capacity.model.step_combine import combine_step_ms as combine_step_ms
from capacity.model.step_combine import compute_term_ms as compute_term_ms
from capacity.model.step_combine import counts_as_engines as counts_as_engines
from capacity.model.step_combine import mixed_step_time_ms as mixed_step_time_ms
from capacity.model.step_combine import per_token as per_token
from capacity.model.step_combine import ridge_ms as ridge_ms
from capacity.model.step_combine import step_method as step_method
from capacity.model.step_combine import step_time_ms as step_time_ms
from capacity.types import FloatArray, StrArray
from capacity.units import GB, TERA


def fixed_step_ms(step_overhead_ms: float, layer_overhead_ms: float, layers: int) -> float:
    """F11's fixed time of one decode step `t0`, ms: the per-step overhead plus a per-layer one,
    `t0 = step_overhead_ms + layer_overhead_ms x layers`.

    The per-layer term is the time each transformer layer's kernels take beyond moving their
    bytes and doing their FLOPs (launch gaps, kernel ramp-up and tail, norms and small
    element-wise kernels), which neither shrinks with TP nor grows with the batch, so a deep
    model split over 8 GPUs is slower than its bytes per GPU say (issue 25; data/engines.toml
    derives the typical value). Example: 0.058 ms x 80 layers + 0 = 4.64 ms. Source: F11
    (docs/method.md)."""
    return float(step_overhead_ms) + float(layer_overhead_ms) * int(layers)


def attention_flops_per_token(model: Model, context_tokens: npt.ArrayLike, *,
                              absorbed: bool = True) -> FloatArray:
    """FLOPs of one decode token's attention at `context_tokens` of context (FLOP, per replica).

    4 x q_heads x head_dim per attended key per layer (QK^T and PV, 2 FLOPs per multiply-add;
    Hoffmann et al. 2022, appendix F; F6 uses the same count): full layers attend the whole
    context, sliding layers min(context, window), linear-attention layers none (their state
    does not grow with the context). MLA layers (DeepSeek's latent attention) decode in the
    absorbed form, as FlashMLA, FlashInfer and TensorRT-LLM's MLA kernels in vLLM and SGLang
    run them: 2 x q_heads x (2 kv_lora_rank + qk_rope_head_dim) per attended key (QK over the
    576-wide latent and RoPE part, PV over the 512-wide latent; FlashMLA's deep dive,
    docs/20250422-new-kernel-deep-dive.md: 2 h_q s_k (d_k + d_v)); `absorbed=False` counts them
    as a prefill does, heads of `head_dim` over decompressed keys and values (4 x q_heads x
    head_dim). One count for every path that decodes MLA (F4b here, the wide-EP step,
    `capacity.model.expert_parallel`). Seed (Qwen3.5-9B, 8 full layers of 16 x 256, 8K):
    4 x 8 x 16 x 256 x 8192 = 1.07e9 FLOP. DeepSeek-V3 at 2,000: 61 x 2 x 128 x 1,088 x 2,000 =
    3.40e10 FLOP (decompressed, 4 x 128 x 160 = 81,920 a key and layer: 1.00e10).
    """
    L = np.asarray(context_tokens, dtype=np.float64)
    out = np.zeros_like(L)
    for g in model.layer_groups:
        if g.kind == "linear":
            continue
        attended = np.minimum(L, float(g.window_tokens)) if g.kind == "sliding" else L
        if g.kind == "mla" and absorbed:
            per = 2.0 * g.q_heads * (2 * g.kv_lora_rank + g.qk_rope_head_dim)
        else:
            per = 4.0 * g.q_heads * g.head_dim
        out = out + g.count * per * attended
    return np.asarray(out, dtype=np.float64)


class Bound(StrEnum):
    """Which term of F4's decode step binds at a point."""

    BANDWIDTH = "bandwidth"
    """Moving weights and KV through memory takes longer than the arithmetic."""
    COMPUTE = "compute"
    """The arithmetic (2 x P x C FLOPs) takes longer than moving weights and KV."""


@dataclass(frozen=True, kw_only=True)
class DecodeStep:
    """Decode step time and its terms at each batch (arrays broadcast over batch and context).

    `concurrency` is the batch of one replica; throughputs are per replica. Units: ms, bytes,
    FLOP, tok/s. `bandwidth_ms` / `compute_ms` are the step's memory and arithmetic totals;
    `gemm_ms`, `attention_ms` the operator method's two groups (0 under the chapter's);
    `serial_ms` what the step adds to the chapter's overlap (`StepParts`).
    """

    concurrency: FloatArray
    weight_read_bytes: FloatArray
    kv_read_bytes: FloatArray
    flops: FloatArray
    attention_flops: FloatArray
    bandwidth_ms: FloatArray
    compute_ms: FloatArray
    gemm_ms: FloatArray
    attention_ms: FloatArray
    serial_ms: FloatArray
    comm_ms: FloatArray
    overhead_ms: float
    step_ms: FloatArray
    tok_s_per_request: FloatArray
    aggregate_tok_s: FloatArray
    method: str = StepMethod.CHAPTER.value
    accepted_tokens: FloatArray | float = 1.0
    """tau, tokens a sequence keeps per engine step (F12; 1 without a draft): `step_ms` is per
    emitted token, an engine step (verify pass + draft) takes `engine_step_ms`."""

    @property
    def engine_step_ms(self) -> FloatArray:
        """One engine step (ms): the verify pass and the draft; the plain step without a draft."""
        return np.asarray(self.step_ms * self.accepted_tokens, dtype=np.float64)

    @property
    def bound(self) -> StrArray:
        """Which term binds at each point: 'bandwidth' or 'compute' (ties go to bandwidth)."""
        return np.asarray(np.where(self.compute_ms > self.bandwidth_ms, Bound.COMPUTE.value,
                                   Bound.BANDWIDTH.value),
                          dtype=np.str_)


_PER_CONFIG = ("weights_bytes", "kv_request_bytes", "bandwidth_gb_s", "tflops", "comm_fixed_ms",
               "comm_per_seq_ms", "comm_knee_seqs", "comm_per_seq_above_ms",
               "attention_flops_request", "verify_tokens", "accepted_tokens",
               "draft_passes", "draft_weights_bytes", "draft_kv_request_bytes", "draft_params_b",
               "unread_weight_share", "eff", "eta_bw")
"""`StepModel`'s fields that may hold one value per configuration (`select` indexes them)."""


@dataclass(frozen=True, kw_only=True)
class StepModel:
    """F4 / F4b (+ F10 communication) per replica, for one configuration or many at once.

    Every field may be a scalar or an array (arrays broadcast against each other and against
    the batch). `weights_bytes`, `kv_request_bytes` and `bandwidth_gb_s` are per GPU (one TP
    rank); `tflops` is per replica (GPU TFLOP/s x TP). `expert_fraction` is the share of weights
    in routed experts (0 for dense models), `experts` and `active_experts` are E and k;
    `comm_fixed_ms + comm_per_seq_ms x min(b, comm_knee_seqs) + comm_per_seq_above_ms x
    max(b - comm_knee_seqs, 0)` is the TP all-reduce time of a step for `b` sequences (F10's
    `CommLine`; the knee infinite by default: a line). `eta_bw`, `eff` and `overhead_ms` are
    F11's knobs. `method` picks the chapter's combination or the operator one (`StepMethod`);
    the operator method also uses `attention_flops_request` (A, FLOP per sequence per step:
    `attention_flops_per_token`), `eta_kv` (None: eta_bw), `attn_sat_batch` (the floor's
    b_sat, sequences; 0: none) and `seq_overhead_ms` (ms per sequence per step, both methods).
    """

    weights_bytes: FloatArray | float
    kv_request_bytes: FloatArray | float
    bandwidth_gb_s: FloatArray | float
    tflops: FloatArray | float
    params_active_b: float
    eff: FloatArray | float = 1.0
    eta_bw: FloatArray | float = 1.0
    overhead_ms: float = 0.0
    comm_fixed_ms: FloatArray | float = 0.0
    comm_per_seq_ms: FloatArray | float = 0.0
    comm_knee_seqs: FloatArray | float = math.inf
    comm_per_seq_above_ms: FloatArray | float = 0.0
    expert_fraction: float = 0.0
    experts: int = 1
    active_experts: int = 1
    method: str = DEFAULT_STEP_METHOD.value
    attention_flops_request: FloatArray | float = 0.0
    eta_kv: float | None = None
    attn_sat_batch: float = 0.0
    seq_overhead_ms: float = 0.0
    batch1_factor: float = 1.0
    """The step of one sequence over the formula's (`combine_step`); 1 on the spec sheet."""
    batched_overhead_ms: float = 0.0
    """ms every step of two or more sequences pays on top of `overhead_ms` (`combine_step`: an
    engine's GEMM path where one sequence runs matrix-vector code); 0 on the spec sheet."""
    unread_weight_share: FloatArray | float = 0.0
    """Share of W's bytes a decode step does not read: an untied input embedding table, of which
    the engine gathers one row per sequence (`ModelVariant.lookup_weight_share`; operator method
    and bound, 0 under the chapter's); one per configuration where a grid mixes formats."""
    verify_tokens: FloatArray | float = 1.0
    """Speculative decoding (F12, `capacity.model.speculative`): tokens per sequence in a target
    pass, k + 1 (1: plain). FLOPs, all-reduces and experts touched grow with it; weights and KV
    are read once. `accepted_tokens` (tau) divides the step: times are per emitted token. The
    draft: `draft_passes` (k; 0 for n-gram) over `draft_weights_bytes` and
    `draft_kv_request_bytes` (per GPU) and `draft_params_b` (per proposed token)."""
    accepted_tokens: FloatArray | float = 1.0
    draft_passes: FloatArray | float = 0.0
    draft_weights_bytes: FloatArray | float = 0.0
    draft_kv_request_bytes: FloatArray | float = 0.0
    draft_params_b: FloatArray | float = 0.0
    draft_overhead_ms: float = 0.0
    """F12's engine knobs (0 on the spec sheet): ms per draft pass, and `verify_overhead_ms`,
    ms per verified token."""
    verify_overhead_ms: float = 0.0
    ridge_sharpness: float = 0.0
    """F4c's sharpness k (`ridge_ms`): memory and arithmetic combined as
    (t_mem^k + t_comp^k)^(1/k) where they overlap; 0: their max (the spec sheet)."""
    cuda_graph_max_tokens: float = 0.0
    """F4d: the largest captured CUDA graph, tokens (vLLM: 512); a step's GEMM rows are padded
    to the captured size (`padding.cuda_graph_tokens`). 0: no graphs, no padding."""
    gemm_tile_tokens: float = 0.0
    """F4d: the GEMM tile's rows, tokens; the GEMM rows round up to whole tiles. 0 or 1: none."""

    @classmethod
    def for_model(cls, model: Model, *, weights_bytes: FloatArray | float,
                  kv_request_bytes: FloatArray | float, bandwidth_gb_s: FloatArray | float,
                  tflops: FloatArray | float, eff: FloatArray | float = 1.0,
                  eta_bw: FloatArray | float = 1.0,
                  overhead_ms: float = 0.0, comm_fixed_ms: FloatArray | float = 0.0,
                  comm_per_seq_ms: FloatArray | float = 0.0,
                  comm_knee_seqs: FloatArray | float = math.inf,
                  comm_per_seq_above_ms: FloatArray | float = 0.0,
                  method: str = DEFAULT_STEP_METHOD.value,
                  context_tokens: FloatArray | float | None = None, eta_kv: float | None = None,
                  attn_sat_batch: float = 0.0, seq_overhead_ms: float = 0.0,
                  batch1_factor: float = 1.0, batched_overhead_ms: float = 0.0,
                  ridge_sharpness: float = 0.0, cuda_graph_max_tokens: float = 0.0,
                  gemm_tile_tokens: float = 0.0,
                  lookup_weight_share: FloatArray | float,
                  embedding_lookup: bool = False) -> StepModel:
        """The step of `model`: active parameters and MoE routing taken from the catalog; the
        attention FLOPs per sequence from its layers at `context_tokens` (none when None).

        Under the operator method and the spec-sheet bound (`counts_as_engines`) an untied
        input embedding table (`Model.lookup_params_b`) is neither multiplied nor read whole:
        its parameters leave the GEMM FLOPs and `lookup_weight_share`, its share of W's bytes
        (`ModelVariant.lookup_weight_share`: the table at the format's embedding bits; the
        caller's variant, one value per configuration in a grid), leaves the weight bytes.
        The chapter's method keeps all of P and W (F4 as written), but for `embedding_lookup`:
        a typical basis, which predicts the engines (`capacity.model.basis.TYPICAL_COUNTS`)."""
        moe = model.moe
        attn = (0.0 if context_tokens is None
                else attention_flops_per_token(model, context_tokens))
        engines = embedding_lookup or counts_as_engines(method)
        lookup = model.lookup_params_b if engines else 0.0
        return cls(weights_bytes=weights_bytes, kv_request_bytes=kv_request_bytes,
                   bandwidth_gb_s=bandwidth_gb_s, tflops=tflops,
                   params_active_b=model.params_active_b - lookup,
                   unread_weight_share=lookup_weight_share if engines else 0.0, eff=eff,
                   eta_bw=eta_bw,
                   overhead_ms=overhead_ms, comm_fixed_ms=comm_fixed_ms,
                   comm_per_seq_ms=comm_per_seq_ms, comm_knee_seqs=comm_knee_seqs,
                   comm_per_seq_above_ms=comm_per_seq_above_ms,
                   expert_fraction=expert_fraction(model),
                   experts=moe.experts if moe else 1, active_experts=moe.active if moe else 1,
                   method=StepMethod(method).value, attention_flops_request=attn,
                   eta_kv=eta_kv, attn_sat_batch=attn_sat_batch, seq_overhead_ms=seq_overhead_ms,
                   batch1_factor=batch1_factor, batched_overhead_ms=batched_overhead_ms,
                   ridge_sharpness=ridge_sharpness, cuda_graph_max_tokens=cuda_graph_max_tokens,
                   gemm_tile_tokens=gemm_tile_tokens)

    def select(self, idx: npt.NDArray[np.int64]) -> StepModel:
        """The configurations at `idx` (array fields indexed, scalars kept)."""
        picked: dict[str, Any] = {f: v[idx] for f in _PER_CONFIG
                                  if isinstance(v := getattr(self, f), np.ndarray) and v.ndim > 0}
        return replace(self, **picked)

    @cached_property
    def speculative(self) -> bool:
        """Whether any configuration drafts (F12: verify width, tau or draft passes not plain)."""
        return bool(np.any(np.asarray(self.verify_tokens) != 1.0)
                    or np.any(np.asarray(self.accepted_tokens) != 1.0)
                    or np.any(np.asarray(self.draft_passes) != 0.0))

    def draft_ms(self, batch: npt.ArrayLike) -> FloatArray:
        """What drafting adds to a step for `batch` sequences, ms: the draft's passes (F12's
        `draft_step_ms`) and the verify overhead of b x (k + 1) tokens (none on a plain row)."""
        b, k1 = np.asarray(batch, dtype=np.float64), np.asarray(self.verify_tokens, dtype=float)
        return self.verify_overhead_ms * b * np.where(k1 > 1, k1, 0.0) + speculative.draft_step_ms(
            passes=self.draft_passes, weights_bytes=self.draft_weights_bytes,
            kv_request_bytes=self.draft_kv_request_bytes, params_b=self.draft_params_b,
            batch=b, bandwidth_gb_s=self.bandwidth_gb_s, tflops=self.tflops, eta_bw=self.eta_bw,
            eff=self.eff, pass_overhead_ms=self.draft_overhead_ms)

    # -- the terms, each named (bytes, FLOPs, ms) ------------------------------------------------
    def weight_read_bytes(self, batch: FloatArray) -> FloatArray:
        """W_read(b) in bytes per GPU: all of W (dense), or the shared part plus the touched
        experts' share of the expert part (MoE; at least one token's worth); less the unread
        embedding share (operator method)."""
        if self.expert_fraction <= 0:
            return np.asarray(self.weights_bytes * (1.0 - self.unread_weight_share),
                              dtype=np.float64)
        return np.asarray(self.weights_bytes * (weight_read_share(
            self.expert_fraction, self.experts, self.active_experts,
            batch * np.asarray(self.verify_tokens, dtype=np.float64))
            - self.unread_weight_share), dtype=np.float64)

    def kv_read_bytes(self, batch: FloatArray) -> FloatArray:
        """b x KV_request in bytes per GPU: every sequence's KV cache is read once a step."""
        return np.asarray(batch * self.kv_request_bytes, dtype=np.float64)

    @property
    def padded(self) -> bool:
        """Whether the GEMM rows are padded (F4d: CUDA graphs or a tile of more than 1 row)."""
        return self.cuda_graph_max_tokens > 0 or self.gemm_tile_tokens > 1

    def gemm_rows(self, batch: npt.ArrayLike) -> FloatArray:
        """Token rows the weight GEMMs compute for `batch` sequences (F4d): b x (k + 1),
        padded to the CUDA graph and the tile (`padding.gemm_tokens`; unpadded by default)."""
        m = np.asarray(batch, dtype=np.float64) * np.asarray(self.verify_tokens, dtype=np.float64)
        return gemm_tokens(m, cuda_graph_max_tokens=self.cuda_graph_max_tokens,
                           gemm_tile_tokens=self.gemm_tile_tokens)

    def flops(self, batch: FloatArray) -> FloatArray:
        """2 x P_active x b, the weight GEMMs' FLOPs of one decode step of the replica (FLOP;
        P_active less an untied embedding table under the operator method); x (k + 1) in a
        speculative verify pass (F12); with F4d's padding 2 x P_active x `gemm_rows(b)`."""
        if self.padded:
            return np.asarray(2.0 * self.params_active_b * 1e9 * self.gemm_rows(batch),
                              dtype=np.float64)
        return np.asarray(2.0 * self.params_active_b * 1e9 * batch * self.verify_tokens,
                          dtype=np.float64)

    def attention_flops(self, batch: FloatArray) -> FloatArray:
        """b x A, the attention FLOPs of one decode step of the replica (FLOP; F4b); x (k + 1)
        in a speculative verify pass (F12)."""
        return np.asarray(batch * self.attention_flops_request * self.verify_tokens,
                          dtype=np.float64)

    def comm_ms(self, batch: FloatArray) -> FloatArray:
        """TP all-reduces of the step at b x (k + 1) tokens (k + 1 in a speculative verify
        pass), ms (0 without TP): `_comm_at`."""
        return self._comm_at(np.asarray(batch * self.verify_tokens, dtype=np.float64))

    def comm_at_tokens(self, tokens: npt.ArrayLike) -> FloatArray:
        """F10's all-reduces (ms) of one forward pass of `tokens` tokens, decode and prompt
        tokens together (a mixed pass reduces them in one message per layer; F6 counts a
        prompt's at its length): `_comm_at`."""
        return self._comm_at(np.asarray(tokens, dtype=np.float64))

    def _comm_at(self, tokens: FloatArray) -> FloatArray:
        """F10's `CommLine` at `tokens`: comm_fixed + comm_per_seq x min(n, knee) +
        comm_per_seq_above x max(n - knee, 0), ms."""
        return np.asarray(self.comm_fixed_ms
                          + self.comm_per_seq_ms * np.minimum(tokens, self.comm_knee_seqs)
                          + self.comm_per_seq_above_ms
                          * np.maximum(tokens - self.comm_knee_seqs, 0.0), dtype=np.float64)

    def parts(self, batch: npt.ArrayLike) -> StepParts:
        """Every part of the step in ms at each batch (`combine_step` on this model's terms)."""
        b = np.asarray(batch, dtype=np.float64)
        return self._parts(b, self.weight_read_bytes(b), self.kv_read_bytes(b), self.flops(b),
                           self.attention_flops(b))

    def peak_terms(self, batch: npt.ArrayLike) -> dict[str, FloatArray]:
        """The knob-free inputs of `combine_step` at each batch (ms at peak, comm, the batch):
        calibration's fit keeps them and tries knobs with `combine_step` alone."""
        b = np.asarray(batch, dtype=np.float64)
        return self._peak(b, self.weight_read_bytes(b), self.kv_read_bytes(b), self.flops(b),
                          self.attention_flops(b))

    def _peak(self, b: FloatArray, w: FloatArray, kv: FloatArray, fl: FloatArray,
              afl: FloatArray) -> dict[str, FloatArray]:
        return {"weight_peak_ms": bandwidth_term_ms(w, self.bandwidth_gb_s),
                "kv_peak_ms": bandwidth_term_ms(kv, self.bandwidth_gb_s),
                "gemm_peak_ms": compute_term_ms(fl, self.tflops),
                "attention_peak_ms": compute_term_ms(afl, self.tflops),
                "kv_request_peak_ms": bandwidth_term_ms(self.kv_request_bytes,
                                                        self.bandwidth_gb_s),
                "comm_ms": self.comm_ms(b), "batch": b}

    def _parts(self, b: FloatArray, w: FloatArray, kv: FloatArray, fl: FloatArray,
               afl: FloatArray) -> StepParts:
        peak = self._peak(b, w, kv, fl, afl)
        p = combine_step(
            method=self.method, **peak, eta_bw=self.eta_bw,
            eta_kv=self.eta_kv, eff=self.eff, attn_sat_batch=self.attn_sat_batch,
            overhead_ms=self.overhead_ms, seq_overhead_ms=self.seq_overhead_ms,
            batch1_factor=self.batch1_factor, batched_overhead_ms=self.batched_overhead_ms,
            ridge_sharpness=self.ridge_sharpness)
        if not self.speculative:
            return p
        return per_token(p, draft_ms=self.draft_ms(b), accepted_tokens=self.accepted_tokens,
                         overhead_ms=self.overhead_ms, comm_ms=peak["comm_ms"])

    def bandwidth_ms(self, batch: FloatArray) -> FloatArray:
        """The step's memory total, ms: (W_read(b) + b x KV) / (BW x eta_bw) (chapter), or
        W_read / (BW x eta_w) + b KV / (BW x eta_kv) (operator)."""
        return self.parts(batch).bandwidth_ms

    def compute_ms(self, batch: FloatArray) -> FloatArray:
        """The step's arithmetic total, ms: 2 x P_active x b / (F x eff), plus b A / F under the
        operator method."""
        return self.parts(batch).compute_ms

    # -- the step -------------------------------------------------------------------------------
    def step_ms(self, batch: npt.ArrayLike) -> FloatArray:
        """Decode step time in ms (F4 or F4b, `combine_step`).

        The lean path (no byte or throughput arrays kept) for the planner's search loops: under
        one overlap (the chapter's F4, the bound) for a dense model at `batch1_factor` 1, the
        arithmetic of `parts(batch).step_ms`, operation for operation, without the parts it
        does not need (the weight term computed once per model, `_lean`); else `parts`. The
        two agree to the bit (tests/test_search_speed.py).
        """
        lean = self._lean
        if lean is None:
            return self.parts(batch).step_ms
        weight_peak_ms, bandwidth_bytes_s, flop_s, flop_per_seq = lean
        b = np.asarray(batch, dtype=np.float64)
        # bandwidth_term_ms and compute_term_ms at peak, then combine_step's one overlap
        kv_peak_ms = np.asarray(b * self.kv_request_bytes, dtype=np.float64) / bandwidth_bytes_s * 1e3
        rows = self.gemm_rows(b) if self.padded else b  # F4d
        gemm_peak_ms = np.asarray(flop_per_seq * rows, dtype=np.float64) / flop_s * 1e3
        comm = self._comm_at(b)
        bw = (weight_peak_ms + kv_peak_ms) / self.eta_bw
        step = self.overhead_ms + ridge_ms(bw, gemm_peak_ms / self.eff, self.ridge_sharpness) + comm
        return np.asarray(step + self.seq_overhead_ms * b, dtype=np.float64)

    @cached_property
    def _lean(self) -> tuple[FloatArray, FloatArray, FloatArray, float] | None:
        """What `step_ms`'s lean path reuses: the weight read's term at peak (ms), BW in B/s,
        F in FLOP/s and the weight GEMMs' FLOPs per sequence; None where it does not apply
        (the operator method, a MoE model, a batch-of-one factor or a batched overhead)."""
        if (StepMethod(self.method) == StepMethod.OPERATOR or self.expert_fraction > 0
                or self.batch1_factor != 1.0 or self.batched_overhead_ms != 0.0
                or self.speculative):
            return None
        return (bandwidth_term_ms(self.weight_read_bytes(np.asarray(0.0)), self.bandwidth_gb_s),
                np.asarray(np.asarray(self.bandwidth_gb_s) * GB, dtype=np.float64),
                np.asarray(np.asarray(self.tflops) * TERA, dtype=np.float64),
                2.0 * self.params_active_b * 1e9)

    def decode(self, batch: npt.ArrayLike) -> DecodeStep:
        """Every term of the step at each batch, broadcast to one shape (F4 / F4b).

        Per-request speed = 1000 / step_ms tok/s; the replica's aggregate = b x 1000 / step_ms.
        """
        b = np.asarray(batch, dtype=np.float64)
        w = self.weight_read_bytes(b)
        kv = self.kv_read_bytes(b)
        fl = self.flops(b)
        afl = self.attention_flops(b)
        p = self._parts(b, w, kv, fl, afl)
        comm = self.comm_ms(b)
        step = p.step_ms
        shape = step.shape

        def full(x: FloatArray) -> FloatArray:
            return x if x.shape == shape else np.broadcast_to(x, shape)
        cb = full(b)
        return DecodeStep(concurrency=cb, weight_read_bytes=full(w), kv_read_bytes=full(kv),
                          flops=full(fl), attention_flops=full(afl),
                          bandwidth_ms=full(p.bandwidth_ms), compute_ms=full(p.compute_ms),
                          gemm_ms=full(p.gemm_ms), attention_ms=full(p.attention_ms),
                          serial_ms=full(p.serial_ms), comm_ms=full(comm),
                          overhead_ms=self.overhead_ms, step_ms=step,
                          tok_s_per_request=1e3 / step, aggregate_tok_s=cb * 1e3 / step,
                          method=self.method, accepted_tokens=self.accepted_tokens)

    def crossover_batch(self) -> float | None:
        """C* where the compute term overtakes the bandwidth term, or None (F5). Scalar fields.

        Chapter, dense: C* = (W / BW') / (2P / (F x eff) - KV / BW'), with BW' = BW x eta_bw;
        it exists only when the denominator is positive. MoE, or the operator method (where
        the totals are W / BW_w + b KV / BW_kv against b (2P / eff + A) / F): on a grid of
        1..1e6. Overhead and communication add to both sides: they do not move C*.
        Unit: sequences.
        """
        if (self.expert_fraction <= 0 and self.method != StepMethod.OPERATOR
                and not self.speculative and not self.padded):
            # one overlap (the chapter's, or the bound's with the weights it reads): closed form
            bw = float(np.asarray(self.bandwidth_gb_s)) * GB * self.eta_bw
            per_seq_compute = float(self.flops(np.asarray(1.0))) / (
                float(np.asarray(self.tflops)) * TERA * float(np.asarray(self.eff)))
            denom = per_seq_compute - float(np.asarray(self.kv_request_bytes)) / bw
            if denom <= 0:
                return None
            read = float(np.asarray(self.weight_read_bytes(np.asarray(1.0))))
            return float((read / bw) / denom)
        grid = np.unique(np.round(np.geomspace(1, 1e6, 4000)))
        p = self.parts(grid)
        over = np.nonzero(p.compute_ms > p.bandwidth_ms)[0]
        if not over.size:
            return None
        i = int(over[0])
        if self.method == StepMethod.CHAPTER or i == 0:
            return float(grid[i])
        lo, hi = float(grid[i - 1]), float(grid[i])  # operator: both sides linear in b
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            q = self.parts(np.asarray(mid))
            lo, hi = (mid, hi) if float(q.compute_ms) <= float(q.bandwidth_ms) else (lo, mid)
        return hi


def decode_step(*, model: Model, weights_bytes: float, kv_request_bytes: npt.ArrayLike,
                concurrency: npt.ArrayLike, bandwidth_gb_s: float, tflops: float,
                eff: float = 1.0, eta_bw: float = 1.0, overhead_ms: float = 0.0,
                comm_ms: npt.ArrayLike = 0.0) -> DecodeStep:
    """Decode step (ms, F4) for `concurrency` sequences on one GPU or TP group, a checked front
    of `StepModel`: `weights_bytes`, `kv_request_bytes`, `bandwidth_gb_s` per GPU, `tflops`
    per group, `comm_ms` the communication of each step."""
    for name, v in (("bandwidth", bandwidth_gb_s), ("TFLOP/s", tflops), ("eff", eff),
                    ("eta_bw", eta_bw)):
        if v <= 0:
            raise InputError(f"{name} must be > 0, got {v}")
    c = np.asarray(concurrency, dtype=np.float64)
    if np.any(c < 0):
        raise InputError("concurrency must be >= 0")
    return StepModel.for_model(
        model, weights_bytes=weights_bytes,
        kv_request_bytes=np.asarray(kv_request_bytes, dtype=np.float64),
        bandwidth_gb_s=bandwidth_gb_s, tflops=tflops, eff=eff, eta_bw=eta_bw,
        overhead_ms=overhead_ms, comm_fixed_ms=np.asarray(comm_ms, dtype=np.float64),
        lookup_weight_share=0.0,  # the chapter's method: all of W is read
    ).decode(c)


def crossover_concurrency(*, model: Model, weights_bytes: float, kv_request_bytes: float,
                          bandwidth_gb_s: float, tflops: float, eff: float = 1.0,
                          eta_bw: float = 1.0) -> float | None:
    """C* (sequences) where compute overtakes bandwidth on one GPU or TP group, or None (F5;
    `StepModel.crossover_batch`). The chapter at 8K: none."""
    return StepModel.for_model(model, weights_bytes=weights_bytes,
                               kv_request_bytes=kv_request_bytes, bandwidth_gb_s=bandwidth_gb_s,
                               tflops=tflops, eff=eff, eta_bw=eta_bw,
                               lookup_weight_share=0.0).crossover_batch()  # chapter: all of W


def attainable_tflops(intensity: npt.ArrayLike, tflops: float,
                      bandwidth_gb_s: float) -> FloatArray:
    """Roofline: min(peak, intensity x BW) in TFLOP/s; the ridge is at peak / BW FLOP/B."""
    i = np.asarray(intensity, dtype=np.float64)
    return np.asarray(np.minimum(tflops, i * bandwidth_gb_s * GB / TERA), dtype=np.float64)


def ridge_point(tflops: float, bandwidth_gb_s: float) -> float:
    """Arithmetic intensity (FLOP/B) where the roofline turns flat: F / BW.

    RTX 4090: 165.2e12 / 1008e9 = 163.9 FLOP/B.
    """
    return tflops * TERA / (bandwidth_gb_s * GB)


def breakeven_batch(plain: StepModel, drafted: StepModel, max_batch: int = 4096) -> int | None:
    """The smallest batch (sequences per replica) at which the draft no longer pays: its TPOT
    (per emitted token) is at least the plain step's; None if it pays up to `max_batch`.
    Scalar configurations. The verify pass grows the arithmetic k + 1 times, so past the ridge
    a draft with tau < k + 1 slows the step down (F12)."""
    b = np.arange(1, max_batch + 1, dtype=np.float64)
    worse = np.nonzero(np.asarray(drafted.step_ms(b)) >= np.asarray(plain.step_ms(b)))[0]
    return int(b[worse[0]]) if worse.size else None
