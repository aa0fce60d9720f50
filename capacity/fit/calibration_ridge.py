"""F4c in a calibration: the ridge sharpness, fitted only where the points span the ridge.

The sharpness k of `roofline.ridge_ms` ((t_mem^k + t_comp^k)^(1/k) in place of their max)
only shows where memory and arithmetic are close: a sweep whose every point is far on one
side of the balance cannot tell k = 1.5 from the max. So the fit first asks whether the
points lie on both sides of the balance at the knobs fitted with the max (`spans_ridge`:
the weight GEMMs' arithmetic, 2 P b / (F eff), above the weight read, W / (BW eta_bw), at
one point at least and below it at another); only then does it scan k over
`RIDGE_SHARPNESS_RANGE` (1 to 8, geometric steps: `RIDGE_GRID`), refitting the other decode
knobs at each k from those fitted at the max, and keep the k of the least squared relative
error, or the max when no k beats it by more than `RIDGE_GAIN`. Each held-out fold scans
again on its own training points (`fold_ridge`), so a held-out level never picks the k it is
predicted with.
Only under the operator step (F4b), whose per-sequence term t_seq carries the step's linear
growth with the batch; under the chapter's F4 the scan is not run (`RIDGE_CHAPTER_NOTE`).
Source: F4c (docs/method.md), issue 25.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capacity.fit.calibration_problem import Problem, RidgeRefit, basis_ridge, solve
from capacity.model.roofline import StepMethod
from capacity.model.step_combine import RIDGE_SHARPNESS_RANGE
from capacity.types import FloatArray, Note

RIDGE_GRID: tuple[float, ...] = tuple(float(v) for v in np.geomspace(*RIDGE_SHARPNESS_RANGE, 10))
"""The sharpness values tried: 1 to 8 in 9 geometric steps (each 1.26x the last; 2 is one)."""
RIDGE_CHAPTER_NOTE = Note(
    "ridge sharpness not fitted under the chapter method: without its per-sequence term the "
    "scan would take the step's linear growth with the batch for the ridge (fit the operator "
    "step to measure it)", code="ridge_chapter")
"""Under the chapter's F4 the scan is not run: on the published RTX 4090 vLLM sweep it pins k at
1 (the sum), the edge of its range, standing in for the per-sequence cost F4 lacks (F4b's
t_seq), not for the ridge."""
RIDGE_GAIN = 0.9
"""A sharpness is kept only where its summed squared relative error is below 0.9 x the max's:
a tenth less, more than a change in the noise of a handful of points."""


@dataclass(frozen=True, kw_only=True)
class RidgeFit:
    """What the ridge scan found: the sharpness (None: left at the max), the decode knobs and
    their errors refitted at it, the basis with its column, and the note for the report."""

    sharpness: float | None
    x: FloatArray
    sd: FloatArray
    basis: dict[str, FloatArray]
    note: Note


def _sse(problem: Problem, x: FloatArray, basis: dict[str, FloatArray],
         measured: FloatArray) -> float:
    r = problem.model(x, basis) / measured - 1.0
    return float(np.sum(r * r))


def memory_and_compute_ms(basis: dict[str, FloatArray], x: FloatArray,
                          method: StepMethod | str) -> tuple[FloatArray, FloatArray]:
    """Per point, the overlap's memory and arithmetic terms at the knobs `x` (ms): the weight
    read (chapter: with the KV read) over eta_bw, and the weight GEMMs over eff."""
    eta = float(x[0])
    eff = float(x[2])
    mem = basis["weight_peak_ms"]
    if StepMethod(method) != StepMethod.OPERATOR:
        mem = mem + basis["kv_peak_ms"]
    return (np.asarray(mem / eta, dtype=np.float64),
            np.asarray(basis["gemm_peak_ms"] / eff, dtype=np.float64))


def spans_ridge(basis: dict[str, FloatArray], x: FloatArray, method: StepMethod | str) -> bool:
    """Whether the points lie on both sides of the balance at the knobs `x`: the arithmetic
    above the memory term at one point at least and below it at another."""
    mem, comp = memory_and_compute_ms(basis, x, method)
    return bool(np.any(comp > mem) and np.any(comp < mem))


def fit_ridge(problem: Problem, basis: dict[str, FloatArray], measured: FloatArray,
              x: FloatArray, sd: FloatArray, method: StepMethod | str) -> RidgeFit:
    """The ridge scan (module docstring) after the decode fit at the max (`x`, `sd`)."""
    if not spans_ridge(basis, x, method):
        return RidgeFit(sharpness=None, x=x, sd=sd, basis=basis, note=Note(
            "ridge sharpness not pinned: the points do not lie on both sides of the balance "
            "of memory and compute, so the step keeps the max of the two (measure batches "
            "where compute binds and where it does not)", code="ridge_not_spanned"))
    best = (_sse(problem, x, basis, measured), 0.0, x, sd, basis)
    # each k starts from the knobs fitted at the max (one start, not the problem's four)
    warm = Problem(problem.names, problem.model, (tuple(float(v) for v in x),))
    for k in RIDGE_GRID:
        b_k = {**basis, "ridge_sharpness": np.full_like(basis["batch"], k)}
        x_k, sd_k = solve(warm, b_k, measured)
        e_k = _sse(problem, x_k, b_k, measured)
        if e_k < best[0]:
            best = (e_k, k, x_k, sd_k, b_k)
    at_max = _sse(problem, x, basis, measured)
    if best[1] == 0.0 or best[0] > RIDGE_GAIN * at_max:
        return RidgeFit(sharpness=None, x=x, sd=sd, basis=basis, note=Note(
            "ridge sharpness not pinned: the points span the balance but no sharpness in "
            "1..8 fits them better than the max of memory and compute", code="ridge_no_gain"))
    k = float(best[1])
    return RidgeFit(sharpness=k, x=best[2], sd=best[3], basis=best[4], note=Note(
        f"ridge sharpness {k:.2f} fitted (the points span the balance of memory and compute; "
        f"squared error {best[0] / at_max:.2f} x the max's)", code="ridge_fitted",
        k=round(k, 2), ratio=round(best[0] / at_max, 2)))


def fold_ridge(problem: Problem, method: StepMethod | str) -> RidgeRefit:
    """The scan for one held-out fold (`calibration_problem.held_out_predictions`): its knobs
    and sharpness (the basis' own where the fold's points do not pin one)."""
    def refit(basis: dict[str, FloatArray], measured: FloatArray, x: FloatArray,
              sd: FloatArray) -> tuple[FloatArray, float]:
        rf = fit_ridge(problem, basis, measured, x, sd, method)
        return rf.x, (basis_ridge(basis) if rf.sharpness is None else rf.sharpness)
    return refit
