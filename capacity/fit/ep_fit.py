"""Fit of the two EP knobs nothing publishes -- the overlap share and the fixed time per MoE layer
(`EpKnobs.overlap`, `EpKnobs.layer_overhead_us`) -- to published rows, and its honest score by
leave-one-row-out (docs/expert-parallel.md, "Accuracy"; capacity/fit/validate_ep.py).

Every other knob is the published prior of data/ep_knobs.toml (`typical_ep_knobs`). With those
fixed, a row's prediction depends on the two fitted knobs only through its `StepTerms` (compute
C, communication M, the fixed time per us of layer overhead, how they combine), worked out once
by the model (`capacity.model.expert_parallel`):

    t = C + u x fixed_per_us + M                                  (operator by operator)
    t = max(C', M) + (1 - o) x min(C', M),  C' = C + u x fixed_per_us   (two-batch overlap)
    predicted throughput per GPU = work x 1000 / t   (work: tokens per GPU in t ms)

The fit minimises the sum of squared log errors, log(predicted / measured), over a grid of o in
[0, 1] (steps of 0.01) and u in [0, `MAX_LAYER_OVERHEAD_US`] (steps of 1 us). Leave-one-out:
each row predicted by the knobs fitted to the other rows alone, so its own measurement never
enters its prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from capacity.errors import InputError

OVERLAP_GRID: Final = np.round(np.linspace(0.0, 1.0, 101), 2)
"""The overlap shares the fit tries (0 to 1 in steps of 0.01)."""
MAX_LAYER_OVERHEAD_US: Final = 400.0
LAYER_OVERHEAD_GRID: Final = np.arange(0.0, MAX_LAYER_OVERHEAD_US + 0.5, 1.0)
"""The fixed times per MoE layer and micro-batch the fit tries, us (0 to 400 in steps of 1)."""


@dataclass(frozen=True, kw_only=True)
class StepTerms:
    """One row's prediction as a function of the two fitted knobs (ms; see the module doc)."""

    compute_ms: float
    """C: compute time without the fixed per-layer time."""
    comm_ms: float
    """M: all-to-all time."""
    fixed_ms_per_us: float
    """ms the fixed time adds per us of `layer_overhead_us` (micro-batches x MoE layers / 1000,
    per unit of work)."""
    overlapped: bool
    """Two-batch overlap (True) or operator by operator."""
    work: float
    """Tokens per GPU done in the time t (decode: batch / GPUs; prefill: 1)."""
    measured: float
    """Measured tokens per second per GPU."""

    def predict(self, overlap: float, layer_overhead_us: float) -> float:
        """Throughput per GPU at the knobs, tok/s: work x 1000 / t (module doc)."""
        return float(_predict(self, np.asarray(overlap), np.asarray(layer_overhead_us)))


def _predict(t: StepTerms, o: np.ndarray, u: np.ndarray) -> np.ndarray:
    c = t.compute_ms + u * t.fixed_ms_per_us
    if t.overlapped:
        total = np.maximum(c, t.comm_ms) + (1.0 - o) * np.minimum(c, t.comm_ms)
    else:
        total = c + t.comm_ms + 0.0 * o
    return np.asarray(t.work * 1e3 / total, dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class EpFit:
    """The fitted knobs and their in-sample log residual (root mean square)."""

    overlap: float
    layer_overhead_us: float
    rows: int
    rms_log_error: float


def fit_knobs(rows: Sequence[StepTerms]) -> EpFit:
    """The (overlap, layer_overhead_us) of the grid with the least sum of squared log errors
    over `rows` (ties: the smaller overhead, then the larger overlap: the least departure from
    the spec sheet). InputError without rows."""
    if not rows:
        raise InputError("the EP fit needs at least one row")
    o, u = np.meshgrid(OVERLAP_GRID, LAYER_OVERHEAD_GRID, indexing="ij")
    sse = np.zeros_like(o)
    for r in rows:
        sse += np.log(_predict(r, o, u) / r.measured) ** 2
    best = sse.min()
    cand = np.argwhere(sse <= best * (1 + 1e-12) + 1e-15)
    i, j = min(cand, key=lambda ij: (ij[1], -ij[0]))
    return EpFit(overlap=float(OVERLAP_GRID[i]), layer_overhead_us=float(LAYER_OVERHEAD_GRID[j]),
                 rows=len(rows), rms_log_error=float(np.sqrt(best / len(rows))))


def leave_one_out(rows: Sequence[StepTerms]) -> list[tuple[EpFit, float]]:
    """For each row, the knobs fitted to the OTHER rows and its prediction by them (tok/s):
    the row's own measurement never enters its prediction. InputError with fewer than 2 rows."""
    if len(rows) < 2:
        raise InputError("leave-one-out needs at least two rows")
    out: list[tuple[EpFit, float]] = []
    for i, r in enumerate(rows):
        fit = fit_knobs([x for j, x in enumerate(rows) if j != i])
        out.append((fit, r.predict(fit.overlap, fit.layer_overhead_us)))
    return out
