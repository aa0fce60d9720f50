"""The decode step's combination of its terms (F4, F4b, F4c), split out of
`capacity.model.roofline` (which re-exports every public name here).

`combine_step` turns the step's terms at peak (ms) and the knobs into the step's parts:
the chapter's one overlap (F4), the operator step's groups (F4b) or the spec sheet's bound;
`StepMethod` names the three. Where bandwidth and arithmetic overlap it takes the ridge
combination `ridge_ms` (F4c): max(t_mem, t_comp) at the default sharpness 0, and the smooth
(t_mem^k + t_comp^k)^(1/k) near the roofline's ridge, where kernels reach neither roof.
Source: F4, F4b, F4c, F11, F12 (docs/method.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from capacity.errors import InputError
from capacity.types import FloatArray
from capacity.units import GB, TERA

RIDGE_SHARPNESS_MAX = 0.0
"""`ridge_sharpness` meaning "the max of the two roofs" (F4's overlap, the default)."""
RIDGE_SHARPNESS_RANGE = (1.0, 8.0)
"""Sharpness a calibration may fit (F4c): 1 is no overlap at all (the sum), 8 within 9% of
the max at the ridge itself and within 1% once one roof is 1.4x the other."""


def ridge_ms(memory_ms: npt.ArrayLike, compute_ms: npt.ArrayLike,
             sharpness: float = RIDGE_SHARPNESS_MAX) -> FloatArray:
    """F4c, the ridge: memory and arithmetic combined as (t_mem^k + t_comp^k)^(1/k), in ms.

    k = `sharpness`: 0 (or inf) is max(t_mem, t_comp), the roofline's sharp corner (F4, today's
    default and the spec sheet's); k = 1 is t_mem + t_comp (no overlap). Between, the step is
    slowest relative to the max where the two are equal (2^(1/k) x the max) and approaches the
    max as one dominates: near the ridge kernels reach neither roof (Williams, Waterman and
    Patterson, "Roofline", CACM 2009, treat the corner as an upper bound only; issue 25: a
    batch-128 bf16 GEMM ran 19-23% slower than the max). Example: t_mem 10, t_comp 7.1 ms,
    k = 2 -> sqrt(100 + 50.41) = 12.26 ms (+23% over the max); t_comp 1 ms, k = 2 -> 10.05 ms
    (within 1%). Computed as m x ((a/m)^k + (b/m)^k)^(1/k), m the max, so it does not overflow.
    """
    a = np.asarray(memory_ms, dtype=np.float64)
    b = np.asarray(compute_ms, dtype=np.float64)
    top = np.maximum(a, b)
    if sharpness <= 0 or math.isinf(sharpness):
        return top
    k = float(sharpness)
    safe = np.where(top > 0, top, 1.0)
    out = top * ((a / safe) ** k + (b / safe) ** k) ** (1.0 / k)
    return np.asarray(np.where(top > 0, out, top), dtype=np.float64)


def check_ridge_sharpness(value: float) -> str | None:
    """What is wrong with a ridge sharpness, or None: 0 (the max) or a number >= 1 (below 1
    the combination would exceed the sum, slower than running the two one after the other)."""
    if value == RIDGE_SHARPNESS_MAX or (not math.isnan(value) and value >= 1.0):
        return None
    return f"the ridge sharpness must be 0 (the max) or >= 1, got {value}"


def bandwidth_term_ms(bytes_read: npt.ArrayLike, bandwidth_gb_s: npt.ArrayLike,
                      eta_bw: float = 1.0) -> FloatArray:
    """Memory term of F4 in ms: bytes / BW at peak, divided by eta_bw.

    Seed: 5.968e9 B / 1008 GB/s = 5.92 ms. The peak term is computed first so that
    calibration's fit (peak terms divided by the knob) gives bit-identical step times.
    """
    peak = np.asarray(bytes_read, dtype=np.float64) / (np.asarray(bandwidth_gb_s) * GB) * 1e3
    return np.asarray(peak / eta_bw, dtype=np.float64)


def compute_term_ms(flops: npt.ArrayLike, tflops: npt.ArrayLike,
                    eff: npt.ArrayLike = 1.0) -> FloatArray:
    """Arithmetic term of F4 in ms: FLOPs / F at peak, divided by eff.

    Seed: 2 x 9e9 x 50 FLOP / 165.2e12 FLOP/s = 5.45 ms.
    """
    peak = np.asarray(flops, dtype=np.float64) / (np.asarray(tflops) * TERA) * 1e3
    return np.asarray(peak / np.asarray(eff, dtype=np.float64), dtype=np.float64)


def step_time_ms(*, bandwidth_ms: npt.ArrayLike, compute_ms: npt.ArrayLike,
                 comm_ms: npt.ArrayLike, overhead_ms: float,
                 ridge_sharpness: float = RIDGE_SHARPNESS_MAX) -> FloatArray:
    """F4's combination of the terms (ms): t0 + max(bandwidth, compute) + communication.

    Memory traffic and arithmetic overlap (the slower one sets the pace; with a
    `ridge_sharpness`, F4c's smooth combination `ridge_ms`); the all-reduces and the fixed
    overhead do not. Used by `StepModel`, the event model's `ServiceModel` and the fit.
    """
    return np.asarray(overhead_ms + ridge_ms(bandwidth_ms, compute_ms, ridge_sharpness)
                      + np.asarray(comm_ms, dtype=np.float64), dtype=np.float64)


def mixed_step_time_ms(*, bandwidth_ms: float, compute_ms: float, comm_ms: float,
                       overhead_ms: float, serial_ms: float, prefill_ms: float,
                       prefill_comm_ms: float = 0.0, pass_comm_ms: float | None = None
                       ) -> float:
    """One forward pass over a decode batch and prompt chunks (ms): t0 + max(bandwidth,
    compute + the chunks' prefill less their all-reduces) + the pass's all-reduces + serial.

    The decode step's terms (F4: `bandwidth_ms`, `compute_ms`, `comm_ms`, `overhead_ms`,
    `serial_ms` of `StepParts`, the batch's values; 0 sequences: the weight read alone) and
    `prefill_ms`, the chunks' F6 time (their GEMM and attention arithmetic at MFU, and the
    all-reduces F6 counts for them, `prefill_comm_ms` of it). The weights are read once for
    the decode tokens and the prompt tokens together, so a chunk adds arithmetic, not another
    weight read: a small chunk rides in a bandwidth-bound step for little, a large one makes
    the step compute-bound (vLLM V1 and llama.cpp schedule both in one batch; Agrawal et al.,
    Sarathi-Serve, OSDI 2024, section 3). Each layer all-reduces the pass's tokens in one
    message, so the pass pays F10 once at decode + chunk tokens, `pass_comm_ms`
    (`parallel.CommLine.at`), not the decode batch's and each chunk's apart (None: `comm_ms`
    + `prefill_comm_ms`, the all-reduces of each apart, kept out of the overlap as F4 keeps
    them). Without a chunk it is F4's step. Example: bandwidth 10 ms, compute 2 ms, no
    overheads or all-reduces, a 5 ms chunk -> 10 ms; a 20 ms chunk -> 22 ms; with TP, comm
    2 ms at the batch, a 20 ms chunk holding 3 ms of all-reduces and the pass's all-reduce
    3.5 ms -> max(10, 2 + 17) + 3.5 = 22.5 ms (apart: 19 + 2 + 3 = 24 ms).
    """
    comm = comm_ms + prefill_comm_ms if pass_comm_ms is None else pass_comm_ms
    return (overhead_ms + max(bandwidth_ms, compute_ms + prefill_ms - prefill_comm_ms) + comm
            + serial_ms)


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
                 comm_ms: npt.ArrayLike, batch: npt.ArrayLike, eta_bw: npt.ArrayLike = 1.0,
                 eta_kv: float | None = None, eff: npt.ArrayLike = 1.0, attn_sat_batch: float = 0.0,
                 overhead_ms: float = 0.0, seq_overhead_ms: float = 0.0,
                 batch1_factor: float = 1.0, batched_overhead_ms: float = 0.0,
                 ridge_sharpness: float = RIDGE_SHARPNESS_MAX) -> StepParts:
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
    from one sequence to two, then grows 4 ms a sequence. `batched_overhead_ms` (ms,
    spec-sheet 0) is what that jump is on the realtest: a fixed time every step of two or more
    sequences pays (the GEMM path's), which the step of one does not; fitted with the factor
    (`calibrate --batch1`), it moves with neither the weights nor the batch, so a fit on one
    model size carries to another (the realtest's larger model: the jump 12.5 ms on one size,
    12.2 on the other, 1.63x the weights). Both differences go into `serial_ms`.
    `ridge_sharpness` (F4c, `ridge_ms`; 0: the max) replaces the max of memory and arithmetic
    where they overlap: the chapter's and the bound's one overlap, the operator step's weight
    GEMMs (attention keeps its max); what it adds over the max goes into `serial_ms`.
    `StepModel` and calibration's fit both call this, so a fitted calibration predicts exactly
    what `evaluate` computes.
    """
    t = _combine(method=method, weight_peak_ms=weight_peak_ms, kv_peak_ms=kv_peak_ms,
                 gemm_peak_ms=gemm_peak_ms, attention_peak_ms=attention_peak_ms,
                 kv_request_peak_ms=kv_request_peak_ms, comm_ms=comm_ms, batch=batch,
                 eta_bw=eta_bw, eta_kv=eta_kv, eff=eff, attn_sat_batch=attn_sat_batch,
                 overhead_ms=overhead_ms, seq_overhead_ms=seq_overhead_ms,
                 batch1_factor=batch1_factor, batched_overhead_ms=batched_overhead_ms,
                 ridge_sharpness=ridge_sharpness)
    # the parts keep the step's shape where nothing was added at batch one (a scalar 0)
    one = np.zeros(np.shape(t.step)) if t.one is None else t.one
    if t.gemm is None:  # chapter and bound: one overlap
        zero = np.zeros_like(t.bandwidth)
        ridge = (zero if ridge_sharpness == RIDGE_SHARPNESS_MAX
                 else ridge_ms(t.bandwidth, t.compute, ridge_sharpness)
                 - np.maximum(t.bandwidth, t.compute))
        return StepParts(bandwidth_ms=t.bandwidth, compute_ms=np.asarray(t.compute, dtype=np.float64),
                         gemm_ms=zero, attention_ms=zero,
                         serial_ms=np.asarray(t.per_seq + zero + one + ridge, dtype=np.float64),
                         step_ms=t.step)
    assert t.attention is not None
    serial = t.gemm + t.attention + t.per_seq + one - np.maximum(t.bandwidth, t.compute)
    shape = np.broadcast_shapes(np.shape(t.step), np.shape(t.bandwidth))
    return StepParts(bandwidth_ms=np.asarray(t.bandwidth, dtype=np.float64),
                     compute_ms=np.asarray(t.compute, dtype=np.float64),
                     gemm_ms=np.asarray(np.broadcast_to(t.gemm, shape), dtype=np.float64),
                     attention_ms=np.asarray(np.broadcast_to(t.attention, shape), dtype=np.float64),
                     serial_ms=np.asarray(serial, dtype=np.float64),
                     step_ms=t.step)


def combine_step_ms(*, method: StepMethod | str, weight_peak_ms: npt.ArrayLike,
                    kv_peak_ms: npt.ArrayLike, gemm_peak_ms: npt.ArrayLike,
                    attention_peak_ms: npt.ArrayLike, kv_request_peak_ms: npt.ArrayLike,
                    comm_ms: npt.ArrayLike, batch: npt.ArrayLike, eta_bw: npt.ArrayLike = 1.0,
                    eta_kv: float | None = None, eff: npt.ArrayLike = 1.0,
                    attn_sat_batch: float = 0.0, overhead_ms: float = 0.0,
                    seq_overhead_ms: float = 0.0, batch1_factor: float = 1.0,
                    batched_overhead_ms: float = 0.0,
                    ridge_sharpness: float = RIDGE_SHARPNESS_MAX) -> FloatArray:
    """`combine_step(...).step_ms` (ms) without the other parts: the same arithmetic, one
    computation (`_combine`), for the fit's model, which evaluates the step tens of thousands
    of times a scorecard and reads nothing else."""
    return _combine(method=method, weight_peak_ms=weight_peak_ms, kv_peak_ms=kv_peak_ms,
                    gemm_peak_ms=gemm_peak_ms, attention_peak_ms=attention_peak_ms,
                    kv_request_peak_ms=kv_request_peak_ms, comm_ms=comm_ms, batch=batch,
                    eta_bw=eta_bw, eta_kv=eta_kv, eff=eff, attn_sat_batch=attn_sat_batch,
                    overhead_ms=overhead_ms, seq_overhead_ms=seq_overhead_ms,
                    batch1_factor=batch1_factor, batched_overhead_ms=batched_overhead_ms,
                    ridge_sharpness=ridge_sharpness).step


class _Combined(NamedTuple):
    """What `_combine` works out (ms): the step and the pieces `combine_step` builds its parts
    from; `gemm` and `attention` None under the chapter's one overlap."""

    step: FloatArray
    bandwidth: FloatArray
    compute: FloatArray
    per_seq: FloatArray
    one: FloatArray | None
    """What the batch-one factor and the batched overhead add (None: nothing)."""
    gemm: FloatArray | None = None
    attention: FloatArray | None = None


def _combine(*, method: StepMethod | str, weight_peak_ms: npt.ArrayLike,
             kv_peak_ms: npt.ArrayLike, gemm_peak_ms: npt.ArrayLike,
             attention_peak_ms: npt.ArrayLike, kv_request_peak_ms: npt.ArrayLike,
             comm_ms: npt.ArrayLike, batch: npt.ArrayLike, eta_bw: npt.ArrayLike,
             eta_kv: float | None, eff: npt.ArrayLike, attn_sat_batch: float,
             overhead_ms: float, seq_overhead_ms: float, batch1_factor: float,
             batched_overhead_ms: float, ridge_sharpness: float) -> _Combined:
    """`combine_step`'s arithmetic (its docstring): the step and its pieces."""
    b = np.asarray(batch, dtype=np.float64)
    comm = np.asarray(comm_ms, dtype=np.float64)
    per_seq = seq_overhead_ms * b
    eta = np.asarray(eta_bw, dtype=np.float64)   # one value, or one per configuration
    w = np.asarray(weight_peak_ms, dtype=np.float64) / eta
    g = np.asarray(gemm_peak_ms, dtype=np.float64) / np.asarray(eff, dtype=np.float64)
    if StepMethod(method) != StepMethod.OPERATOR:  # chapter and bound: one overlap
        bw = np.asarray((np.asarray(weight_peak_ms, dtype=np.float64)
                         + np.asarray(kv_peak_ms, dtype=np.float64)) / eta, dtype=np.float64)
        step = step_time_ms(bandwidth_ms=bw, compute_ms=g, comm_ms=comm,
                            overhead_ms=overhead_ms, ridge_sharpness=ridge_sharpness) + per_seq
        one = _added(_batch_one(b, step, comm, batch1_factor), _batched(b, batched_overhead_ms))
        return _Combined(step=np.asarray(step if one is None else step + one, dtype=np.float64),
                         bandwidth=bw, compute=g, per_seq=per_seq, one=one)
    ekv = eta if eta_kv is None else np.asarray(eta_kv, dtype=np.float64)
    kv = np.asarray(kv_peak_ms, dtype=np.float64) / ekv
    a = np.asarray(attention_peak_ms, dtype=np.float64)
    floor = np.where(b > 0, np.asarray(kv_request_peak_ms, dtype=np.float64)
                     * attn_sat_batch / ekv, 0.0)
    gemm = ridge_ms(w, g, ridge_sharpness)
    attn = np.maximum(np.maximum(kv, a), floor)
    step = overhead_ms + gemm + attn + comm + per_seq
    one = _added(_batch_one(b, step, comm, batch1_factor), _batched(b, batched_overhead_ms))
    return _Combined(step=np.asarray(step if one is None else step + one, dtype=np.float64),
                     bandwidth=w + kv,
                     compute=g + a, per_seq=per_seq, one=one, gemm=gemm, attention=attn)


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


def _added(one: FloatArray | None, batched: FloatArray | None) -> FloatArray | None:
    """The sum of what `_batch_one` and `_batched` add (ms), None where neither adds."""
    if one is None:
        return batched
    return one if batched is None else np.asarray(one + batched, dtype=np.float64)


def _batched(b: FloatArray, overhead_ms: float | FloatArray) -> FloatArray | None:
    """`batched_overhead_ms` where two or more sequences decode (b > 1), 0 elsewhere (ms);
    None where it is 0 everywhere (nothing to add)."""
    if (overhead_ms == 0.0) if isinstance(overhead_ms, float) else not np.any(overhead_ms):
        return None
    return np.asarray(np.where(b > 1.0, overhead_ms, 0.0), dtype=np.float64)


def _batch_one(b: FloatArray, step: FloatArray, comm: FloatArray,
               factor: float | FloatArray) -> FloatArray | None:
    """What `batch1_factor` adds to the step (ms): (factor - 1) x (step - comm) where exactly
    one sequence decodes, 0 elsewhere; None at factor 1 (nothing to add)."""
    if (factor == 1.0) if isinstance(factor, float) else bool(np.all(factor == 1.0)):
        return None
    return np.asarray(np.where(b == 1.0, (factor - 1.0) * (step - comm), 0.0), dtype=np.float64)

