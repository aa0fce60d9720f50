"""F4 and F5: decode step time on the roofline, and the crossover concurrency.

`t_step(C) = t0 + max((W_read(C) + C x KV_request) / (BW x eta_bw), 2 x P x C / (F x eff)) + comm`
The first term moves weights and KV through memory; the second does the arithmetic. With
eta_bw = 1, t0 = 0 and comm = 0 it is the chapter's formula; the knobs are F11 (docs/method.md)'s calibration.
Source: F4, F5, F11 (docs/method.md). The chapter (Qwen3.5-9B AWQ, RTX 4090, 8K): bandwidth term
5.92 / 18.97 /
32.28 ms and compute term 0.11 / 5.45 / 10.9 ms at C = 1 / 50 / 100; bandwidth binds at all three.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Model
from capacity.errors import InputError
from capacity.types import FloatArray, StrArray
from capacity.units import GB, TERA


def expected_experts_touched(experts: int, active: int, tokens: npt.ArrayLike) -> FloatArray:
    """Expected distinct experts a batch of `tokens` routes to: E x (1 - (1 - k/E)^C).

    Unit: experts (per MoE layer). Assumes uniform, independent routing. Source: F4 (docs/method.md).
    One token touches k; a large batch touches all E.
    """
    c = np.asarray(tokens, dtype=np.float64)
    return np.asarray(experts * (1.0 - (1.0 - active / experts) ** c), dtype=np.float64)


def weight_bytes_read(model: Model, weights_bytes: float, batch: npt.ArrayLike) -> FloatArray:
    """Weight bytes one decode step reads for a batch of `batch` sequences (bytes).

    Dense models read all of W. MoE models read the shared part plus the touched fraction of
    the expert part: W x [(1 - f) + f x touched(C) / E], with f the expert share of parameters.
    """
    c = np.asarray(batch, dtype=np.float64)
    if model.moe is None:
        return np.full_like(c, weights_bytes)
    f = model.expert_params_b / model.params_total_b
    touched = expected_experts_touched(model.moe.experts, model.moe.active, np.maximum(c, 1.0))
    return np.asarray(weights_bytes * ((1.0 - f) + f * touched / model.moe.experts),
                      dtype=np.float64)


class Bound(StrEnum):
    """Which term of F4's decode step binds at a point."""

    BANDWIDTH = "bandwidth"
    """Moving weights and KV through memory takes longer than the arithmetic."""
    COMPUTE = "compute"
    """The arithmetic (2 x P x C FLOPs) takes longer than moving weights and KV."""


@dataclass(frozen=True, kw_only=True)
class DecodeStep:
    """Decode step time and its terms at each concurrency (arrays broadcast over C and L)."""

    concurrency: FloatArray
    bandwidth_ms: FloatArray
    compute_ms: FloatArray
    comm_ms: FloatArray
    overhead_ms: float
    step_ms: FloatArray
    tok_s_per_request: FloatArray
    aggregate_tok_s: FloatArray

    @property
    def bound(self) -> StrArray:
        """Which term binds at each point: 'bandwidth' or 'compute' (ties go to bandwidth)."""
        return np.asarray(np.where(self.compute_ms > self.bandwidth_ms, Bound.COMPUTE.value,
                                   Bound.BANDWIDTH.value),
                          dtype=np.str_)


def bandwidth_term_ms(bytes_read: npt.ArrayLike, bandwidth_gb_s: float,
                      eta_bw: float = 1.0) -> FloatArray:
    """Memory term of F4 in ms: bytes / (BW x eta_bw). Seed: 5.968e9 B / 1008 GB/s = 5.92 ms."""
    return np.asarray(np.asarray(bytes_read, dtype=np.float64)
                      / (bandwidth_gb_s * GB * eta_bw) * 1e3, dtype=np.float64)


def compute_term_ms(params_active_b: float, tokens: npt.ArrayLike, tflops: float,
                    eff: float) -> FloatArray:
    """Arithmetic term of F4 in ms: 2 x P x C / (F x eff). Seed: 2 x 9e9 x 50 / 165.2e12 = 5.45 ms."""
    return np.asarray(2.0 * params_active_b * 1e9 * np.asarray(tokens, dtype=np.float64)
                      / (tflops * TERA * eff) * 1e3, dtype=np.float64)


def decode_step(*, model: Model, weights_bytes: float, kv_request_bytes: npt.ArrayLike,
                concurrency: npt.ArrayLike, bandwidth_gb_s: float, tflops: float,
                eff: float = 1.0, eta_bw: float = 1.0, overhead_ms: float = 0.0,
                comm_ms: npt.ArrayLike = 0.0) -> DecodeStep:
    """Decode step time (ms) for `concurrency` sequences on one GPU or TP group (F4).

    `weights_bytes`, `kv_request_bytes`, `bandwidth_gb_s` and `tflops` are per GPU;
    `concurrency` is the batch on that GPU. Per-request speed = 1000 / step_ms tok/s;
    aggregate = C x 1000 / step_ms. MoE: compute uses active parameters, bytes use touched experts.
    """
    for name, v in (("bandwidth", bandwidth_gb_s), ("TFLOP/s", tflops), ("eff", eff),
                    ("eta_bw", eta_bw)):
        if v <= 0:
            raise InputError(f"{name} must be > 0, got {v}")
    c = np.asarray(concurrency, dtype=np.float64)
    if np.any(c < 0):
        raise InputError("concurrency must be >= 0")
    kv = np.asarray(kv_request_bytes, dtype=np.float64)
    bw = bandwidth_term_ms(weight_bytes_read(model, weights_bytes, c) + c * kv, bandwidth_gb_s,
                           eta_bw)
    cp = compute_term_ms(model.params_active_b, c, tflops, eff)
    comm = np.broadcast_to(np.asarray(comm_ms, dtype=np.float64), np.broadcast(bw, cp).shape)
    step = overhead_ms + np.maximum(bw, cp) + comm
    cb = np.broadcast_to(c, step.shape)
    return DecodeStep(concurrency=cb, bandwidth_ms=np.broadcast_to(bw, step.shape),
                      compute_ms=np.broadcast_to(cp, step.shape), comm_ms=comm,
                      overhead_ms=overhead_ms, step_ms=step, tok_s_per_request=1e3 / step,
                      aggregate_tok_s=cb * 1e3 / step)


def crossover_concurrency(*, model: Model, weights_bytes: float, kv_request_bytes: float,
                          bandwidth_gb_s: float, tflops: float, eff: float = 1.0,
                          eta_bw: float = 1.0) -> float | None:
    """C* where compute overtakes bandwidth, or None when it never does (F5).

    Dense: C* = (W / BW') / (2P / (F x eff) - KV / BW'), with BW' = BW x eta_bw; it exists
    only when the denominator is positive. MoE: the weights read grow with C, so C* is found
    numerically on 1..1e6. Unit: sequences. The chapter at 8K: none.
    """
    bw = bandwidth_gb_s * GB * eta_bw
    per_seq_compute = 2.0 * model.params_active_b * 1e9 / (tflops * TERA * eff)
    if model.moe is None:
        denom = per_seq_compute - kv_request_bytes / bw
        if denom <= 0:
            return None
        return float((weights_bytes / bw) / denom)
    grid = np.unique(np.round(np.geomspace(1, 1e6, 4000)))
    b = (weight_bytes_read(model, weights_bytes, grid) + grid * kv_request_bytes) / bw
    over = np.nonzero(per_seq_compute * grid > b)[0]
    return float(grid[over[0]]) if over.size else None


def arithmetic_intensity(flops: npt.ArrayLike, bytes_moved: npt.ArrayLike) -> FloatArray:
    """FLOPs per byte moved (FLOP/B), the x-axis of the classic roofline."""
    return np.asarray(np.asarray(flops, dtype=np.float64)
                      / np.asarray(bytes_moved, dtype=np.float64), dtype=np.float64)


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
