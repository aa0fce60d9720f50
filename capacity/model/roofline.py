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
- `t0` is the fixed per-step overhead and `t_comm = comm_fixed + comm_per_seq x b` the
  tensor-parallel all-reduces (linear in the message size, F10, `model/parallel.py`).
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

`StepModel` is the only implementation: `scenario.evaluate` (the Explorer, the event model's
`ServiceModel`, the simulated endpoint, the charts and the explanations), the planner's
vectorized search (arrays of configurations) and calibration's fit (`StepModel.peak_terms`,
then `combine_step` with each trial of the knobs) all call it, so every caller follows the
method and the knobs.

The chapter (Qwen3.5-9B AWQ, RTX 4090, 8K): bandwidth term 5.92 / 18.97 / 32.28 ms and compute
term 0.11 / 5.45 / 10.9 ms at C = 1 / 50 / 100; bandwidth binds at all three.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Gpu, Model
from capacity.errors import InputError
from capacity.model import speculative
from capacity.model.moe import expert_fraction, weight_read_share
from capacity.model.parallel import tp_comm_ms
from capacity.types import FloatArray, StrArray
from capacity.units import GB, TERA


def bandwidth_term_ms(bytes_read: npt.ArrayLike, bandwidth_gb_s: npt.ArrayLike,
                      eta_bw: float = 1.0) -> FloatArray:
    """Memory term of F4 in ms: bytes / BW at peak, divided by eta_bw.

    Seed: 5.968e9 B / 1008 GB/s = 5.92 ms. The peak term is computed first so that
    calibration's fit (peak terms divided by the knob) gives bit-identical step times.
    """
    peak = np.asarray(bytes_read, dtype=np.float64) / (np.asarray(bandwidth_gb_s) * GB) * 1e3
    return np.asarray(peak / eta_bw, dtype=np.float64)


def compute_term_ms(flops: npt.ArrayLike, tflops: npt.ArrayLike, eff: float = 1.0) -> FloatArray:
    """Arithmetic term of F4 in ms: FLOPs / F at peak, divided by eff.

    Seed: 2 x 9e9 x 50 FLOP / 165.2e12 FLOP/s = 5.45 ms.
    """
    peak = np.asarray(flops, dtype=np.float64) / (np.asarray(tflops) * TERA) * 1e3
    return np.asarray(peak / eff, dtype=np.float64)


def step_time_ms(*, bandwidth_ms: npt.ArrayLike, compute_ms: npt.ArrayLike,
                 comm_ms: npt.ArrayLike, overhead_ms: float) -> FloatArray:
    """F4's combination of the terms (ms): t0 + max(bandwidth, compute) + communication.

    Memory traffic and arithmetic overlap (the slower one sets the pace); the all-reduces and
    the fixed overhead do not. Used by `StepModel`, the event model's `ServiceModel` and the fit.
    """
    return np.asarray(overhead_ms + np.maximum(bandwidth_ms, compute_ms)
                      + np.asarray(comm_ms, dtype=np.float64), dtype=np.float64)


def mixed_step_time_ms(*, bandwidth_ms: float, compute_ms: float, comm_ms: float,
                       overhead_ms: float, serial_ms: float, prefill_ms: float) -> float:
    """One forward pass over a decode batch and prompt chunks (ms): t0 + max(bandwidth,
    compute + the chunks' prefill) + communication + serial.

    The decode step's terms (F4: `bandwidth_ms`, `compute_ms`, `comm_ms`, `overhead_ms`,
    `serial_ms` of `StepParts`, the batch's values; 0 sequences: the weight read alone) and
    `prefill_ms`, the chunks' F6 time (their GEMM and attention arithmetic at MFU). The
    weights are read once for the decode tokens and the prompt tokens together, so a chunk
    adds arithmetic, not another weight read: a small chunk rides in a bandwidth-bound step
    for little, a large one makes the step compute-bound (vLLM V1 and llama.cpp schedule both
    in one batch; Agrawal et al., Sarathi-Serve, OSDI 2024, section 3). Without a chunk it is
    F4's step. Example: bandwidth 10 ms, compute 2 ms, no overheads, a 5 ms chunk -> 10 ms;
    a 20 ms chunk -> 22 ms.
    """
    return (overhead_ms + max(bandwidth_ms, compute_ms + prefill_ms) + comm_ms + serial_ms)


def comm_coefficients_ms(model: Model, gpu: Gpu, tp: int) -> tuple[float, float]:
    """(fixed, per sequence) ms of one decode step's TP all-reduces: F10's `tp_comm_ms` is
    linear in the batch, tp_comm_ms(b) = fixed + per_seq x b. (0, 0) without TP."""
    if tp <= 1:
        return 0.0, 0.0
    at = tp_comm_ms(model, gpu, tp, np.array([0.0, 1.0]))
    return float(at[0]), float(at[1] - at[0])


class StepMethod(StrEnum):
    """How the decode step combines its terms (`StepModel.method`, `Scenario.step_method`)."""

    CHAPTER = "chapter"
    """The chapter's F4: t0 + max(all bytes / BW, GEMM FLOPs / F) + comm (memory and
    arithmetic of the whole step overlap)."""
    OPERATOR = "operator"
    """F4b: weight GEMMs, then attention, each on its own roofline, plus overheads."""
    BOUND = "bound"
    """The spec sheet's bound: the least a device must do in a step, all at peak and fully
    overlapped: max(W_read / BW + b KV / BW, 2 P b / F), counting the weights as engines run
    them (an untied input embedding table is a lookup, neither read whole nor multiplied).
    Never slower than the chapter's F4 nor F4b at any knobs <= 1 and overheads >= 0, so the
    spec-sheet basis (`capacity.model.basis`) is an upper bound on speed."""


def counts_as_engines(method: StepMethod | str) -> bool:
    """Whether a step method counts the weights as engines run them (F4b, F6b: the input
    embedding a lookup, the prefill's output head at the last position only): the operator
    method and the spec-sheet bound do; the chapter's F4 and F6 count all of P and W."""
    return StepMethod(method) != StepMethod.CHAPTER


DEFAULT_STEP_METHOD = StepMethod.CHAPTER
"""The default method: the chapter's (docs/method.md, F4b: how the default was decided)."""


def step_method(text: str) -> StepMethod:
    """The `StepMethod` named `text`, or InputError listing the methods."""
    try:
        return StepMethod(text)
    except ValueError:
        raise InputError(f"unknown step method '{text}': use "
                         + " or ".join(m.value for m in StepMethod)) from None


def attention_flops_per_token(model: Model, context_tokens: npt.ArrayLike) -> FloatArray:
    """FLOPs of one decode token's attention at `context_tokens` of context (FLOP, per replica).

    4 x q_heads x head_dim per attended key per layer (QK^T and PV, 2 FLOPs per multiply-add;
    Hoffmann et al. 2022, appendix F; F6 uses the same count): full layers attend the whole
    context, sliding layers min(context, window), linear-attention layers none (their state
    does not grow with the context). Seed (Qwen3.5-9B, 8 full layers of 16 x 256, 8K):
    4 x 8 x 16 x 256 x 8192 = 1.07e9 FLOP.
    """
    L = np.asarray(context_tokens, dtype=np.float64)
    out = np.zeros_like(L)
    for g in model.layer_groups:
        if g.kind == "linear":
            continue
        attended = np.minimum(L, float(g.window_tokens)) if g.kind == "sliding" else L
        out = out + 4.0 * g.count * g.q_heads * g.head_dim * attended
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class StepParts:
    """The step's parts in ms (arrays broadcast over the batch): what `combine_step` returns.

    `bandwidth_ms` and `compute_ms` are the memory and arithmetic totals of the step (the
    chapter's two terms; under the operator method each sums both groups); `gemm_ms` and
    `attention_ms` the two operator groups (the chapter's method: 0); `serial_ms` what the step
    adds on top of the chapter's overlap, so that always
    `step_ms = overhead + max(bandwidth_ms, compute_ms) + comm_ms + serial_ms`.
    """

    bandwidth_ms: FloatArray
    compute_ms: FloatArray
    gemm_ms: FloatArray
    attention_ms: FloatArray
    serial_ms: FloatArray
    step_ms: FloatArray


def combine_step(*, method: StepMethod | str, weight_peak_ms: npt.ArrayLike,
                 kv_peak_ms: npt.ArrayLike, gemm_peak_ms: npt.ArrayLike,
                 attention_peak_ms: npt.ArrayLike, kv_request_peak_ms: npt.ArrayLike,
                 comm_ms: npt.ArrayLike, batch: npt.ArrayLike, eta_bw: float = 1.0,
                 eta_kv: float | None = None, eff: float = 1.0, attn_sat_batch: float = 0.0,
                 overhead_ms: float = 0.0, seq_overhead_ms: float = 0.0,
                 batch1_factor: float = 1.0) -> StepParts:
    """The decode step from its terms at peak (ms) and the knobs: F4 or F4b (docs/method.md).

    Peak terms: `weight_peak_ms` = W_read / BW, `kv_peak_ms` = b x KV / BW, `gemm_peak_ms` =
    2 P b / F, `attention_peak_ms` = b x A / F, `kv_request_peak_ms` = KV / BW (one sequence).
    Chapter: t0 + max((W + bKV) / (BW eta_bw), 2Pb / (F eff)) + comm + t_seq b (attention FLOPs,
    eta_kv and the floor are not part of it). Operator: t0 + max(W / (BW eta_bw), 2Pb / (F eff))
    + max(bKV / (BW eta_kv), bA / F, KV b_sat / (BW eta_kv)) + comm + t_seq b; the floor only
    where b > 0. `eta_kv` None: eta_bw. `batch1_factor` (dimensionless, spec-sheet 1): the step
    of exactly one sequence, communication aside, is that factor times the formula's. An engine
    may run one sequence through other kernels: llama.cpp's CPU backend multiplies by one
    vector with its own matrix-vector code and hands two or more to its GEMM kernels
    (ggml-cpu/llamafile/sgemm.cpp, `llamafile_sgemm`: "only enable sgemm for prompt
    processing", n < 2 declined), and measured on this project's realtest the step jumps 11 ms
    from one sequence to two, then grows 4 ms a sequence. The difference goes into
    `serial_ms`. `StepModel` and calibration's fit both call this, so a fitted calibration
    predicts exactly what `evaluate` computes.
    """
    b = np.asarray(batch, dtype=np.float64)
    comm = np.asarray(comm_ms, dtype=np.float64)
    per_seq = seq_overhead_ms * b
    w = np.asarray(weight_peak_ms, dtype=np.float64) / eta_bw
    g = np.asarray(gemm_peak_ms, dtype=np.float64) / eff
    if StepMethod(method) != StepMethod.OPERATOR:  # chapter and bound: one overlap
        bw = np.asarray((np.asarray(weight_peak_ms, dtype=np.float64)
                         + np.asarray(kv_peak_ms, dtype=np.float64)) / eta_bw, dtype=np.float64)
        zero = np.zeros_like(bw)
        step = step_time_ms(bandwidth_ms=bw, compute_ms=g, comm_ms=comm,
                            overhead_ms=overhead_ms) + per_seq
        one = _batch_one(b, step, comm, batch1_factor)
        return StepParts(bandwidth_ms=bw, compute_ms=np.asarray(g, dtype=np.float64),
                         gemm_ms=zero, attention_ms=zero,
                         serial_ms=np.asarray(per_seq + zero + one, dtype=np.float64),
                         step_ms=np.asarray(step + one, dtype=np.float64))
    ekv = eta_bw if eta_kv is None else eta_kv
    kv = np.asarray(kv_peak_ms, dtype=np.float64) / ekv
    a = np.asarray(attention_peak_ms, dtype=np.float64)
    floor = np.where(b > 0, np.asarray(kv_request_peak_ms, dtype=np.float64)
                     * attn_sat_batch / ekv, 0.0)
    gemm = np.maximum(w, g)
    attn = np.maximum(np.maximum(kv, a), floor)
    bw = w + kv
    cp = g + a
    step = overhead_ms + gemm + attn + comm + per_seq
    one = _batch_one(b, step, comm, batch1_factor)
    step = step + one
    serial = gemm + attn + per_seq + one - np.maximum(bw, cp)
    shape = np.broadcast_shapes(np.shape(step), np.shape(bw))
    return StepParts(bandwidth_ms=np.asarray(bw, dtype=np.float64),
                     compute_ms=np.asarray(cp, dtype=np.float64),
                     gemm_ms=np.asarray(np.broadcast_to(gemm, shape), dtype=np.float64),
                     attention_ms=np.asarray(np.broadcast_to(attn, shape), dtype=np.float64),
                     serial_ms=np.asarray(serial, dtype=np.float64),
                     step_ms=np.asarray(step, dtype=np.float64))


def per_token(p: StepParts, *, draft_ms: npt.ArrayLike, accepted_tokens: npt.ArrayLike,
              overhead_ms: float, comm_ms: npt.ArrayLike) -> StepParts:
    """A speculative step's parts per emitted token (F12): the target's verify pass `p` plus
    the draft's `draft_ms`, over tau (`accepted_tokens`), so `step_ms` is the TPOT.

    The memory and arithmetic totals (and the operator groups) are divided by tau; the fixed
    overhead and the all-reduces stay as the callers add them, so `serial_ms` takes the rest
    and `step_ms = overhead + max(bandwidth_ms, compute_ms) + comm_ms + serial_ms` still holds
    (serial may turn negative where tau > 1). Example: verify 12 ms, draft 3 ms, tau 2.5 ->
    6 ms per token."""
    tau = np.asarray(accepted_tokens, dtype=np.float64)
    step = (p.step_ms + np.asarray(draft_ms, dtype=np.float64)) / tau
    bw, cp = p.bandwidth_ms / tau, p.compute_ms / tau
    serial = step - overhead_ms - np.maximum(bw, cp) - np.asarray(comm_ms, dtype=np.float64)
    return StepParts(bandwidth_ms=np.asarray(bw, dtype=np.float64),
                     compute_ms=np.asarray(cp, dtype=np.float64),
                     gemm_ms=np.asarray(p.gemm_ms / tau, dtype=np.float64),
                     attention_ms=np.asarray(p.attention_ms / tau, dtype=np.float64),
                     serial_ms=np.asarray(serial, dtype=np.float64),
                     step_ms=np.asarray(step, dtype=np.float64))


def _batch_one(b: FloatArray, step: FloatArray, comm: FloatArray, factor: float) -> FloatArray:
    """What `batch1_factor` adds to the step (ms): (factor - 1) x (step - comm) where exactly
    one sequence decodes, 0 elsewhere (and everywhere at factor 1)."""
    if factor == 1.0:
        return np.zeros(np.broadcast_shapes(np.shape(b), np.shape(step)))
    return np.asarray(np.where(b == 1.0, (factor - 1.0) * (step - comm), 0.0), dtype=np.float64)


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
               "comm_per_seq_ms", "attention_flops_request", "verify_tokens", "accepted_tokens",
               "draft_passes", "draft_weights_bytes", "draft_kv_request_bytes", "draft_params_b")
"""`StepModel`'s fields that may hold one value per configuration (`select` indexes them)."""


@dataclass(frozen=True, kw_only=True)
class StepModel:
    """F4 / F4b (+ F10 communication) per replica, for one configuration or many at once.

    Every field may be a scalar or an array (arrays broadcast against each other and against
    the batch). `weights_bytes`, `kv_request_bytes` and `bandwidth_gb_s` are per GPU (one TP
    rank); `tflops` is per replica (GPU TFLOP/s x TP). `expert_fraction` is the share of weights
    in routed experts (0 for dense models), `experts` and `active_experts` are E and k;
    `comm_fixed_ms + comm_per_seq_ms x b` is the TP all-reduce time of a step for `b`
    sequences (F10). `eta_bw`, `eff` and `overhead_ms` are F11's knobs. `method` picks the
    chapter's combination or the operator one (`StepMethod`); the operator method also uses
    `attention_flops_request` (A, FLOP per sequence per step: `attention_flops_per_token`),
    `eta_kv` (None: eta_bw), `attn_sat_batch` (the floor's b_sat, sequences; 0: none) and
    `seq_overhead_ms` (ms per sequence per step, both methods).
    """

    weights_bytes: FloatArray | float
    kv_request_bytes: FloatArray | float
    bandwidth_gb_s: FloatArray | float
    tflops: FloatArray | float
    params_active_b: float
    eff: float = 1.0
    eta_bw: float = 1.0
    overhead_ms: float = 0.0
    comm_fixed_ms: FloatArray | float = 0.0
    comm_per_seq_ms: FloatArray | float = 0.0
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
    unread_weight_share: float = 0.0
    """Share of W a decode step does not read: an untied input embedding table, of which the
    engine gathers one row per sequence (operator method; 0 under the chapter's)."""
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

    @classmethod
    def for_model(cls, model: Model, *, weights_bytes: FloatArray | float,
                  kv_request_bytes: FloatArray | float, bandwidth_gb_s: FloatArray | float,
                  tflops: FloatArray | float, eff: float = 1.0, eta_bw: float = 1.0,
                  overhead_ms: float = 0.0, comm_fixed_ms: FloatArray | float = 0.0,
                  comm_per_seq_ms: FloatArray | float = 0.0,
                  method: str = DEFAULT_STEP_METHOD.value,
                  context_tokens: FloatArray | float | None = None, eta_kv: float | None = None,
                  attn_sat_batch: float = 0.0, seq_overhead_ms: float = 0.0,
                  batch1_factor: float = 1.0) -> StepModel:
        """The step of `model`: active parameters and MoE routing taken from the catalog; the
        attention FLOPs per sequence from its layers at `context_tokens` (none when None).

        Under the operator method and the spec-sheet bound (`counts_as_engines`) an untied
        input embedding table (`Model.lookup_params_b`) is neither multiplied nor read whole:
        its parameters leave the GEMM FLOPs and its share of W (by parameter count) leaves the
        weight bytes. The chapter's method keeps all of P and W (F4 as written)."""
        moe = model.moe
        attn = (0.0 if context_tokens is None
                else attention_flops_per_token(model, context_tokens))
        lookup = model.lookup_params_b if counts_as_engines(method) else 0.0
        return cls(weights_bytes=weights_bytes, kv_request_bytes=kv_request_bytes,
                   bandwidth_gb_s=bandwidth_gb_s, tflops=tflops,
                   params_active_b=model.params_active_b - lookup,
                   unread_weight_share=lookup / model.params_total_b, eff=eff, eta_bw=eta_bw,
                   overhead_ms=overhead_ms, comm_fixed_ms=comm_fixed_ms,
                   comm_per_seq_ms=comm_per_seq_ms, expert_fraction=expert_fraction(model),
                   experts=moe.experts if moe else 1, active_experts=moe.active if moe else 1,
                   method=StepMethod(method).value, attention_flops_request=attn,
                   eta_kv=eta_kv, attn_sat_batch=attn_sat_batch, seq_overhead_ms=seq_overhead_ms,
                   batch1_factor=batch1_factor)

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

    def flops(self, batch: FloatArray) -> FloatArray:
        """2 x P_active x b, the weight GEMMs' FLOPs of one decode step of the replica (FLOP;
        P_active less an untied embedding table under the operator method); x (k + 1) in a
        speculative verify pass (F12)."""
        return np.asarray(2.0 * self.params_active_b * 1e9 * batch * self.verify_tokens,
                          dtype=np.float64)

    def attention_flops(self, batch: FloatArray) -> FloatArray:
        """b x A, the attention FLOPs of one decode step of the replica (FLOP; F4b); x (k + 1)
        in a speculative verify pass (F12)."""
        return np.asarray(batch * self.attention_flops_request * self.verify_tokens,
                          dtype=np.float64)

    def comm_ms(self, batch: FloatArray) -> FloatArray:
        """TP all-reduces of the step, comm_fixed + comm_per_seq x b (x (k + 1) tokens in a
        speculative verify pass), ms (0 without TP)."""
        return np.asarray(self.comm_fixed_ms + self.comm_per_seq_ms * batch * self.verify_tokens,
                          dtype=np.float64)

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
            batch1_factor=self.batch1_factor)
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
        gemm_peak_ms = np.asarray(flop_per_seq * b, dtype=np.float64) / flop_s * 1e3
        comm = np.asarray(self.comm_fixed_ms + self.comm_per_seq_ms * b, dtype=np.float64)
        bw = (weight_peak_ms + kv_peak_ms) / self.eta_bw
        step = self.overhead_ms + np.maximum(bw, gemm_peak_ms / self.eff) + comm
        return np.asarray(step + self.seq_overhead_ms * b, dtype=np.float64)

    @cached_property
    def _lean(self) -> tuple[FloatArray, FloatArray, FloatArray, float] | None:
        """What `step_ms`'s lean path reuses: the weight read's term at peak (ms), BW in B/s,
        F in FLOP/s and the weight GEMMs' FLOPs per sequence; None where it does not apply
        (the operator method, a MoE model, a batch-of-one factor)."""
        if (StepMethod(self.method) == StepMethod.OPERATOR or self.expert_fraction > 0
                or self.batch1_factor != 1.0 or self.speculative):
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
                and not self.speculative):
            # one overlap (the chapter's, or the bound's with the weights it reads): closed form
            bw = float(np.asarray(self.bandwidth_gb_s)) * GB * self.eta_bw
            per_seq_compute = float(self.flops(np.asarray(1.0))) / (
                float(np.asarray(self.tflops)) * TERA * self.eff)
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
    ).decode(c)


def crossover_concurrency(*, model: Model, weights_bytes: float, kv_request_bytes: float,
                          bandwidth_gb_s: float, tflops: float, eff: float = 1.0,
                          eta_bw: float = 1.0) -> float | None:
    """C* (sequences) where compute overtakes bandwidth on one GPU or TP group, or None (F5;
    `StepModel.crossover_batch`). The chapter at 8K: none."""
    return StepModel.for_model(model, weights_bytes=weights_bytes,
                               kv_request_bytes=kv_request_bytes, bandwidth_gb_s=bandwidth_gb_s,
                               tflops=tflops, eff=eff, eta_bw=eta_bw).crossover_batch()


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
