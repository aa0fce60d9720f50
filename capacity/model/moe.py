"""MoE routing in the decode step: the experts a batch touches and the share of weights it reads.

Uniform, independent routing (F4, docs/method.md): a batch of C tokens touches
E x (1 - (1 - k/E)^C) of a layer's E experts, k per token.
"""

from __future__ import annotations

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
