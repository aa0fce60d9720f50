"""MoE routing in the decode step: the experts a batch touches and the share of weights it reads.

Uniform, independent routing (F4, docs/method.md): a batch of C tokens touches
E x (1 - (1 - k/E)^C) of a layer's E experts, k per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Model, ModelVariant
from capacity.errors import InputError
from capacity.types import FloatArray
from capacity.units import GB


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


def expert_flop_share(model: Model) -> float:
    """Share of a token's GEMM arithmetic that runs in routed experts (dimensionless, 0 for a
    dense model): the routed experts' active parameters over all active ones, X k / E / A
    (`Model.expert_params_b` X; F6's count of 2 A FLOPs a token). Examples: gpt-oss-120b
    0.707, Qwen3-235B-A22B 0.643, DeepSeek-R1 0.553. Source: F6 (docs/method.md), "MoE
    expert GEMMs"."""
    if model.moe is None or model.params_active_b <= 0:
        return 0.0
    active = model.expert_params_b * model.moe.active / model.moe.experts
    return min(1.0, active / model.params_active_b)


def expert_gemm_factor(model: Model, share: float) -> float:
    """How much longer a forward pass's GEMM arithmetic takes when its routed experts' GEMMs
    reach `share` of the dense GEMMs' plateau (dimensionless, >= 1): (1 - g) + g / share, g
    = `expert_flop_share`. A typical basis divides its prefill plateau, its decode GEMMs'
    efficiency and F6c's m_half by it (the experts' weight read is unchanged, so the curve's
    read-bound side stays where it was; `capacity.fit.planning.typical_knobs_on`). 1 for a
    dense model and for share 1 (the spec sheet, the chapter's). Example: gpt-oss-120b at
    share 0.5: 0.293 + 0.707 / 0.5 = 1.707. Source: docs/method.md, "MoE expert GEMMs"."""
    if not 0 < share <= 1:
        raise InputError(f"expert GEMM share must be in (0, 1], got {share}")
    g = expert_flop_share(model)
    return (1.0 - g) + g / share


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


@dataclass(frozen=True)
class Routing:
    """A model's routed experts as a forward pass's GEMMs see them: the share f of the
    parameters in routed experts, E experts per layer, k per token (`routing_of`). The default
    is a dense model (f = 0)."""

    expert_fraction: float = 0.0
    experts: int = 1
    active: int = 1
    read_scale: float = 1.0
    """F6c's m_half on this device and weight format against the reference's (dimensionless,
    `gemm_read_scale`; 1: an H100 SXM in bf16, where m_half was measured)."""

    def gemm_weight_ratio(self, tokens: npt.ArrayLike) -> FloatArray:
        """The weights a forward pass of m tokens reads against the weights one token uses
        (dimensionless, >= 1): [(1 - f) + f x (1 - (1 - k/E)^m)] / [(1 - f) + f x k/E].

        F6c's half-efficiency term is the weights' read (a GEMM of m rows reaches half its
        plateau when its FLOPs take as long as reading its weights), and a pass's expert GEMMs
        read every expert the pass touches while its FLOPs count only k per token: an MoE
        pass of m tokens reaches its plateau as if m_half were m_half x this ratio. 1 for a
        dense model and for one token. Example: gpt-oss-120b (f 0.987, E 128, k 4) at 5,000
        tokens touches every expert: 1 / (0.0128 + 0.987 x 4 / 128) = 22.9. Source: F6c
        (docs/method.md), with F4's touched experts (uniform, independent routing).
        """
        m = np.asarray(tokens, dtype=np.float64)
        if self.expert_fraction <= 0:
            return np.ones_like(m)
        one = (1.0 - self.expert_fraction) + self.expert_fraction * self.active / self.experts
        return np.asarray(weight_read_share(self.expert_fraction, self.experts, self.active, m)
                          / one, dtype=np.float64)

    def half_ratio(self, tokens: npt.ArrayLike) -> FloatArray:
        """What F6c's m_half is multiplied by for a pass of m tokens (dimensionless):
        `gemm_weight_ratio(m)` x `read_scale`, the weights the pass reads against one token's,
        on this device and weight format. Example: gpt-oss-120b at 5,000 tokens with a scale
        of 0.2: 22.9 x 0.2 = 4.58."""
        return np.asarray(self.gemm_weight_ratio(tokens) * self.read_scale, dtype=np.float64)


DENSE: Final = Routing()
"""A dense model's routing: every weight used by every token."""


REFERENCE_TFLOPS: Final = 989.0
"""Dense bf16 TFLOP/s of the device F6c's m_half was measured on (H100 SXM, data/gpus)."""
REFERENCE_BANDWIDTH_GB_S: Final = 3350.0
"""HBM GB/s of that device (H100 SXM, data/gpus)."""
REFERENCE_BYTES: Final = 2.0
"""Bytes per weight of the GEMMs measured there (bf16)."""


def gemm_bytes_per_param(variant: ModelVariant) -> float:
    """Bytes per parameter of the weights a forward pass's GEMMs read (B): the weights less the
    input embedding table (`ModelVariant.lookup_bytes`) over the parameters less its own. What
    F6c's m_half scales with (`gemm_read_scale`). Llama-3.1-8B BF16: (16.06 - 1.051) GB /
    (8.03 - 0.525) B = 2.0; gpt-oss-120b MXFP4: (69.13 - 0.343) / (116.8 - 0.579) = 0.592 (its
    4-bit experts with the 16-bit layers that stay)."""
    m = variant.model
    params = (m.params_total_b - m.lookup_params_b) * GB
    return (variant.weights_bytes - variant.lookup_bytes) / params if params > 0 else 2.0


def gemm_read_scale(tflops: float, bandwidth_gb_s: float, bytes_per_param: float) -> float:
    """F6c's m_half on a device and weight format against the reference's (dimensionless).

    m_half is where a GEMM of m rows takes as long in arithmetic as in reading its weights
    (docs/method.md, F6c): 2 m N K / F = N K b / BW, so m = F b / (2 BW), with F the peak of
    the arithmetic (the format's compute dtype) and b the weights' bytes per parameter as
    stored (`gemm_bytes_per_param`); it was measured (262 tokens, XLA's table) on an H100 SXM
    in bf16. Another device
    or format moves it by [F b / (2 BW)] / (989 TFLOP/s / 3,350 GB/s). A pass's term
    m_half / m is the time of reading the pass's weights against its arithmetic, so weights
    stored in fewer bytes (AWQ, MXFP4) read sooner, and a device with less arithmetic per byte
    (an A100, an RTX 3090) reaches its plateau at fewer tokens. Examples: H100 SXM bf16 1.0;
    FP8 W8A8 on an H100 (1,979 TFLOP/s, 1 byte) 1.0005; A100 80GB bf16 (312, 2,039 GB/s)
    0.518; RTX 3090 bf16 (71, 936 GB/s) 0.257; MXFP4 experts on an H100 (bf16 arithmetic,
    about 0.55 bytes) about 0.27. Source: F6c (docs/method.md), the roofline's ridge
    (Williams et al., CACM 2009)."""
    if not (tflops > 0 and bandwidth_gb_s > 0 and bytes_per_param > 0):
        return 1.0
    ridge = tflops * 1e12 * bytes_per_param / REFERENCE_BYTES / (bandwidth_gb_s * 1e9)
    return ridge / (REFERENCE_TFLOPS * 1e12 / (REFERENCE_BANDWIDTH_GB_S * 1e9))


def routing_on(model: Model, tflops: float, bandwidth_gb_s: float, bytes_per_param: float
               ) -> Routing:
    """`model`'s `Routing` on a device of `tflops` (the format's compute dtype) and
    `bandwidth_gb_s`, its GEMMs' weights at `bytes_per_param` (`gemm_read_scale`): what every
    prefill (the Explorer's scenario, the Planner's search, the disaggregated search) runs
    through."""
    return routing_of(model, gemm_read_scale(tflops, bandwidth_gb_s, bytes_per_param))


def routing_of(model: Model, read_scale: float = 1.0) -> Routing:
    """`model`'s `Routing` (DENSE without routed experts), with F6c's `read_scale` for the
    device and weight format it runs on (`gemm_read_scale`; 1: the reference's)."""
    if model.moe is None:
        return DENSE if read_scale == 1.0 else Routing(read_scale=read_scale)
    return Routing(expert_fraction=expert_fraction(model), experts=model.moe.experts,
                   active=model.moe.active, read_scale=read_scale)
