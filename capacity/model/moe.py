"""MoE routing in the decode step: the experts a batch touches and the share of weights it reads.

Uniform, independent routing (F4, docs/method.md): a batch of C tokens touches
E x (1 - (1 - k/E)^C) of a layer's E experts, k per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Model
from capacity.types import FloatArray


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


@dataclass(frozen=True)
class Routing:
    """A model's routed experts as a forward pass's GEMMs see them: the share f of the
    parameters in routed experts, E experts per layer, k per token (`routing_of`). The default
    is a dense model (f = 0)."""

    expert_fraction: float = 0.0
    experts: int = 1
    active: int = 1

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


DENSE: Final = Routing()
"""A dense model's routing: every weight used by every token."""


def routing_of(model: Model) -> Routing:
    """`model`'s `Routing` (DENSE without routed experts)."""
    if model.moe is None:
        return DENSE
    return Routing(expert_fraction=expert_fraction(model), experts=model.moe.experts,
                   active=model.moe.active)
