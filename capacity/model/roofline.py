"""F4 and F5: the decode step on the roofline, in ONE place, and the crossover concurrency.

`t_step(b) = t0 + max(t_bw(b), t_compute(b)) + t_comm(b)`, per replica, for `b` sequences:
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

`StepModel` is the only implementation: `scenario.evaluate` (the Explorer, the event model's
`ServiceModel`, the simulated endpoint, the charts and the explanations), the planner's
vectorized search (arrays of configurations) and calibration's fit (terms at peak, then
`step_ms_with_knobs`) all call it. Each term is a named method, so an operator-level model
(GEMMs and attention each on their own roofline) replaces `bandwidth_ms` / `compute_ms` here and
every caller follows.

The chapter (Qwen3.5-9B AWQ, RTX 4090, 8K): bandwidth term 5.92 / 18.97 / 32.28 ms and compute
term 0.11 / 5.45 / 10.9 ms at C = 1 / 50 / 100; bandwidth binds at all three.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Gpu, Model
from capacity.errors import InputError
from capacity.model.parallel import tp_comm_ms
from capacity.types import FloatArray, StrArray
from capacity.units import GB, TERA


def expected_experts_touched(experts: int, active: int, tokens: npt.ArrayLike) -> FloatArray:
    """Expected distinct experts a batch of `tokens` routes to: E x (1 - (1 - k/E)^C).

    Unit: experts (per MoE layer). Assumes uniform, independent routing. Source: F4 (docs/method.md).
    One token touches k; a large batch touches all E.
    """
    return np.asarray(experts * _touched_share(experts, active, tokens), dtype=np.float64)


def _touched_share(experts: int, active: int, tokens: npt.ArrayLike) -> FloatArray:
    """Expected share of the E experts a batch touches: 1 - (1 - k/E)^C (a fraction)."""
    c = np.asarray(tokens, dtype=np.float64)
    return np.asarray(1.0 - (1.0 - active / experts) ** c, dtype=np.float64)


def expert_fraction(model: Model) -> float:
    """Share of the parameters in routed experts (0 for a dense model): f of F4's W_read."""
    return 0.0 if model.moe is None else model.expert_params_b / model.params_total_b


def weight_read_share(expert_fraction: float, experts: int, active: int,
                      batch: npt.ArrayLike) -> FloatArray:
    """Share of the weights one decode step reads: (1 - f) + f x (1 - (1 - k/E)^max(C, 1)).

    1 for a dense model (f = 0). Unit: a fraction of W. Source: F4 (docs/method.md).
    """
    c = np.asarray(batch, dtype=np.float64)
    if expert_fraction <= 0:
        return np.ones_like(c)
    touched = _touched_share(experts, active, np.maximum(c, 1.0))
    return np.asarray((1.0 - expert_fraction) + expert_fraction * touched, dtype=np.float64)


def weight_bytes_read(model: Model, weights_bytes: float, batch: npt.ArrayLike) -> FloatArray:
    """Weight bytes one decode step reads for a batch of `batch` sequences (bytes).

    Dense models read all of W. MoE models read the shared part plus the touched fraction of
    the expert part: W x [(1 - f) + f x touched(C) / E], with f the expert share of parameters.
    """
    moe = model.moe
    return np.asarray(weights_bytes * weight_read_share(
        expert_fraction(model), moe.experts if moe else 1, moe.active if moe else 1, batch),
        dtype=np.float64)


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


def step_ms_with_knobs(*, bandwidth_peak_ms: FloatArray, compute_peak_ms: FloatArray,
                       comm_ms: FloatArray, eta_bw: float, eff: float,
                       overhead_ms: float) -> FloatArray:
    """F4 with F11's knobs as arguments, from the terms at peak (eta_bw = eff = 1, t0 = 0) that
    `StepModel` computed: t0 + max(t_bw / eta_bw, t_compute / eff) + comm, in ms.

    The same arithmetic as `StepModel.step_ms` (bit for bit), without recomputing the bytes and
    FLOPs: calibration's least squares calls it for every trial of the knobs.
    """
    return step_time_ms(bandwidth_ms=bandwidth_peak_ms / eta_bw,
                        compute_ms=compute_peak_ms / eff, comm_ms=comm_ms,
                        overhead_ms=overhead_ms)


def comm_coefficients_ms(model: Model, gpu: Gpu, tp: int) -> tuple[float, float]:
    """(fixed, per sequence) ms of one decode step's TP all-reduces: F10's `tp_comm_ms` is
    linear in the batch, tp_comm_ms(b) = fixed + per_seq x b. (0, 0) without TP."""
    if tp <= 1:
        return 0.0, 0.0
    at = tp_comm_ms(model, gpu, tp, np.array([0.0, 1.0]))
    return float(at[0]), float(at[1] - at[0])


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
    FLOP, tok/s.
    """

    concurrency: FloatArray
    weight_read_bytes: FloatArray
    kv_read_bytes: FloatArray
    flops: FloatArray
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


@dataclass(frozen=True, kw_only=True)
class StepModel:
    """F4 (+ F10 communication) per replica, for one configuration or many at once.

    Every field may be a scalar or an array (arrays broadcast against each other and against
    the batch). `weights_bytes`, `kv_request_bytes` and `bandwidth_gb_s` are per GPU (one TP
    rank); `tflops` is per replica (GPU TFLOP/s x TP). `expert_fraction` is the share of weights
    in routed experts (0 for dense models), `experts` and `active_experts` are E and k;
    `comm_fixed_ms + comm_per_seq_ms x b` is the TP all-reduce time of a step for `b`
    sequences (F10). `eta_bw`, `eff` and `overhead_ms` are F11's knobs.
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

    @classmethod
    def for_model(cls, model: Model, *, weights_bytes: FloatArray | float,
                  kv_request_bytes: FloatArray | float, bandwidth_gb_s: FloatArray | float,
                  tflops: FloatArray | float, eff: float = 1.0, eta_bw: float = 1.0,
                  overhead_ms: float = 0.0, comm_fixed_ms: FloatArray | float = 0.0,
                  comm_per_seq_ms: FloatArray | float = 0.0) -> StepModel:
        """The step of `model`: active parameters and MoE routing taken from the catalog."""
        moe = model.moe
        return cls(weights_bytes=weights_bytes, kv_request_bytes=kv_request_bytes,
                   bandwidth_gb_s=bandwidth_gb_s, tflops=tflops,
                   params_active_b=model.params_active_b, eff=eff, eta_bw=eta_bw,
                   overhead_ms=overhead_ms, comm_fixed_ms=comm_fixed_ms,
                   comm_per_seq_ms=comm_per_seq_ms, expert_fraction=expert_fraction(model),
                   experts=moe.experts if moe else 1, active_experts=moe.active if moe else 1)

    def select(self, idx: npt.NDArray[np.int64]) -> StepModel:
        """The configurations at `idx` (array fields indexed, scalars kept)."""
        def t(x: FloatArray | float) -> FloatArray | float:
            return x[idx] if isinstance(x, np.ndarray) else x
        return StepModel(
            weights_bytes=t(self.weights_bytes), kv_request_bytes=t(self.kv_request_bytes),
            bandwidth_gb_s=t(self.bandwidth_gb_s), tflops=t(self.tflops),
            params_active_b=self.params_active_b, eff=self.eff, eta_bw=self.eta_bw,
            overhead_ms=self.overhead_ms, comm_fixed_ms=t(self.comm_fixed_ms),
            comm_per_seq_ms=t(self.comm_per_seq_ms), expert_fraction=self.expert_fraction,
            experts=self.experts, active_experts=self.active_experts)

    # -- the terms, each named (bytes, FLOPs, ms) ------------------------------------------------
    def weight_read_bytes(self, batch: FloatArray) -> FloatArray:
        """W_read(b) in bytes per GPU: all of W (dense), or the shared part plus the touched
        experts' share of the expert part (MoE; at least one token's worth)."""
        if self.expert_fraction <= 0:
            return np.asarray(self.weights_bytes, dtype=np.float64)
        return np.asarray(self.weights_bytes * weight_read_share(
            self.expert_fraction, self.experts, self.active_experts, batch), dtype=np.float64)

    def kv_read_bytes(self, batch: FloatArray) -> FloatArray:
        """b x KV_request in bytes per GPU: every sequence's KV cache is read once a step."""
        return np.asarray(batch * self.kv_request_bytes, dtype=np.float64)

    def flops(self, batch: FloatArray) -> FloatArray:
        """2 x P_active x b, the FLOPs of one decode step of the replica (FLOP)."""
        return np.asarray(2.0 * self.params_active_b * 1e9 * batch, dtype=np.float64)

    def bandwidth_ms(self, batch: FloatArray) -> FloatArray:
        """(W_read(b) + b x KV) / (BW x eta_bw), ms."""
        return bandwidth_term_ms(self.weight_read_bytes(batch) + self.kv_read_bytes(batch),
                                 self.bandwidth_gb_s, self.eta_bw)

    def compute_ms(self, batch: FloatArray) -> FloatArray:
        """2 x P_active x b / (F x eff), ms."""
        return compute_term_ms(self.flops(batch), self.tflops, self.eff)

    def comm_ms(self, batch: FloatArray) -> FloatArray:
        """TP all-reduces of the step, comm_fixed + comm_per_seq x b, ms (0 without TP)."""
        return np.asarray(self.comm_fixed_ms + self.comm_per_seq_ms * batch, dtype=np.float64)

    # -- the step -------------------------------------------------------------------------------
    def step_ms(self, batch: npt.ArrayLike) -> FloatArray:
        """Decode step time in ms: overhead + max(bandwidth, compute) + communication (F4).

        The lean path (no byte or throughput arrays kept) for the planner's search loops.
        """
        b = np.asarray(batch, dtype=np.float64)
        return step_time_ms(bandwidth_ms=self.bandwidth_ms(b), compute_ms=self.compute_ms(b),
                            comm_ms=self.comm_ms(b), overhead_ms=self.overhead_ms)

    def decode(self, batch: npt.ArrayLike) -> DecodeStep:
        """Every term of the step at each batch, broadcast to one shape (F4).

        Per-request speed = 1000 / step_ms tok/s; the replica's aggregate = b x 1000 / step_ms.
        """
        b = np.asarray(batch, dtype=np.float64)
        w = self.weight_read_bytes(b)
        kv = self.kv_read_bytes(b)
        fl = self.flops(b)
        bw = bandwidth_term_ms(w + kv, self.bandwidth_gb_s, self.eta_bw)
        cp = compute_term_ms(fl, self.tflops, self.eff)
        comm = self.comm_ms(b)
        step = step_time_ms(bandwidth_ms=bw, compute_ms=cp, comm_ms=comm,
                            overhead_ms=self.overhead_ms)
        shape = step.shape

        def full(x: FloatArray) -> FloatArray:
            return x if x.shape == shape else np.broadcast_to(x, shape)
        cb = full(b)
        return DecodeStep(concurrency=cb, weight_read_bytes=full(w), kv_read_bytes=full(kv),
                          flops=full(fl), bandwidth_ms=full(bw), compute_ms=full(cp),
                          comm_ms=full(comm), overhead_ms=self.overhead_ms, step_ms=step,
                          tok_s_per_request=1e3 / step, aggregate_tok_s=cb * 1e3 / step)

    def crossover_batch(self) -> float | None:
        """C* where the compute term overtakes the bandwidth term, or None (F5). Scalar fields.

        Dense: C* = (W / BW') / (2P / (F x eff) - KV / BW'), with BW' = BW x eta_bw; it exists
        only when the denominator is positive. MoE: the weights read grow with C, so C* is found
        on a grid of 1..1e6. Overhead and communication add to both sides: they do not move C*.
        Unit: sequences.
        """
        if self.expert_fraction <= 0:
            bw = float(np.asarray(self.bandwidth_gb_s)) * GB * self.eta_bw
            per_seq_compute = float(self.flops(np.asarray(1.0))) / (
                float(np.asarray(self.tflops)) * TERA * self.eff)
            denom = per_seq_compute - float(np.asarray(self.kv_request_bytes)) / bw
            if denom <= 0:
                return None
            return float((float(np.asarray(self.weights_bytes)) / bw) / denom)
        grid = np.unique(np.round(np.geomspace(1, 1e6, 4000)))
        over = np.nonzero(self.compute_ms(grid) > self.bandwidth_ms(grid))[0]
        return float(grid[over[0]]) if over.size else None


def decode_step(*, model: Model, weights_bytes: float, kv_request_bytes: npt.ArrayLike,
                concurrency: npt.ArrayLike, bandwidth_gb_s: float, tflops: float,
                eff: float = 1.0, eta_bw: float = 1.0, overhead_ms: float = 0.0,
                comm_ms: npt.ArrayLike = 0.0) -> DecodeStep:
    """Decode step time (ms) for `concurrency` sequences on one GPU or TP group (F4).

    `weights_bytes`, `kv_request_bytes` and `bandwidth_gb_s` are per GPU, `tflops` per group;
    `concurrency` is the batch on that group; `comm_ms` is the communication of each step.
    Per-request speed = 1000 / step_ms tok/s; aggregate = C x 1000 / step_ms. MoE: compute uses
    active parameters, bytes use touched experts. A checked front of `StepModel`.
    """
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
    """C* where compute overtakes bandwidth on one GPU or TP group, or None (F5).

    See `StepModel.crossover_batch`. Unit: sequences. The chapter at 8K: none.
    """
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
