"""F4c in a calibration: the ridge sharpness, fitted only where the points span the ridge.

The sharpness k of `roofline.ridge_ms` ((t_mem^k + t_comp^k)^(1/k) in place of their max)
only shows where memory and arithmetic are close: a sweep whose every point is far on one
side of the balance cannot tell k = 1.5 from the max. So the fit first asks whether the
points lie on both sides of the balance at the knobs fitted with the max (`spans_ridge`:
the weight GEMMs' arithmetic, 2 P b / (F eff), above the weight read, W / (BW eta_bw), at
one point at least and below it at another); only then does it scan k over
`RIDGE_SHARPNESS_RANGE` (1 to 8, geometric steps: `RIDGE_GRID`), refitting the other decode
knobs at each k from those fitted at the max. Which k it keeps (the max is a candidate too):

- the k of the least squared relative error over the points, where it beats the max's by
  more than `RIDGE_GAIN` (the points pin it);
- else, with `MIN_CV_LEVELS` (3) or more concurrency levels, the one whose fits best predict
  the levels they leave out (`level_out_error`: each level in turn predicted by a fit of the
  others, the median |relative error| over the points), and the max unless a k's error is
  below `RIDGE_GAIN` x the max's. A fit with about as many knobs as points reproduces them
  with the max as well as with any k (the kink lands between two levels), so the points'
  own error cannot choose; how a k predicts a level it did not see can. On the realtest's
  llama.cpp sweep (levels 1, 2, 4, 8), the folds of three levels that kept the max missed
  the fourth level by 15% at 2 and 4; choosing this way they miss it by 4% at most
  (docs/accuracy.md, the realtest record);
- else the max.

Each held-out fold scans again on its own training points (`fold_ridge`), so a held-out level
never picks the k it is predicted with.
Only under the operator step (F4b), whose per-sequence term t_seq carries the step's linear
growth with the batch; under the chapter's F4 the scan is not run (`RIDGE_CHAPTER_NOTE`).
Source: F4c (docs/method.md), issue 25.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from capacity.fit.calibration_problem import Problem, RidgeRefit, basis_ridge, solve, take
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
"""A sharpness is kept only where its error (held-out levels' median, or the points' summed
squared relative error) is below 0.9 x the max's: a tenth less, more than a change in the
noise of a handful of points."""
MIN_CV_LEVELS = 3
"""Concurrency levels from which the sharpness is chosen by the levels it predicts
(`level_out_error`): each fold then keeps two levels or more."""


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


def level_out_error(problem: Problem, basis: dict[str, FloatArray], measured: FloatArray,
                    x: FloatArray) -> float:
    """Median |relative error| of the points when each concurrency level (`basis['batch']`,
    every prompt length of it) is predicted by a fit of the other levels at the basis'
    sharpness, each fit started from `x` (one start). Example: levels 1, 2, 4, 8 at two
    prompt lengths: four fits of six points, eight predictions, their median |error|."""
    warm = replace(problem, starts=(tuple(float(v) for v in x),))
    batch = basis["batch"]
    errors: list[float] = []
    for level in np.unique(batch):
        test = np.flatnonzero(batch == level)
        train = np.flatnonzero(batch != level)
        x_f, _ = solve(warm, take(basis, train), measured[train])
        pred = problem.model(x_f, take(basis, test))
        errors += [abs(float(v)) for v in pred / measured[test] - 1.0]
    return float(np.median(errors))


def fit_ridge(problem: Problem, basis: dict[str, FloatArray], measured: FloatArray,
              x: FloatArray, sd: FloatArray, method: StepMethod | str) -> RidgeFit:
    """The ridge scan (module docstring) after the decode fit at the max (`x`, `sd`)."""
    if not spans_ridge(basis, x, method):
        return RidgeFit(sharpness=None, x=x, sd=sd, basis=basis, note=Note(
            "ridge sharpness not pinned: the points do not lie on both sides of the balance "
            "of memory and compute, so the step keeps the max of the two (measure batches "
            "where compute binds and where it does not)", code="ridge_not_spanned"))
    # each k starts from the knobs fitted at the max (one start, not the problem's four)
    warm = replace(problem, starts=(tuple(float(v) for v in x),))
    candidates = [(0.0, x, sd, basis)]
    for k in RIDGE_GRID:
        b_k = {**basis, "ridge_sharpness": np.full_like(basis["batch"], k)}
        x_k, sd_k = solve(warm, b_k, measured)
        candidates.append((k, x_k, sd_k, b_k))
    sse = [_sse(problem, xk, b, measured) for _, xk, _, b in candidates]
    j = int(np.argmin(sse[1:])) + 1
    if sse[j] < RIDGE_GAIN * sse[0]:   # the points themselves pin it
        k, x_k, sd_k, b_k = candidates[j]
        return RidgeFit(sharpness=float(k), x=x_k, sd=sd_k, basis=b_k, note=Note(
            f"ridge sharpness {k:.2f} fitted (the points span the balance of memory and "
            f"compute; squared error {sse[j] / sse[0]:.2f} x the max's)", code="ridge_fitted",
            k=round(float(k), 2), ratio=round(sse[j] / sse[0], 2)))
    levels = int(np.unique(basis["batch"]).size)
    if levels < MIN_CV_LEVELS:
        return RidgeFit(sharpness=None, x=x, sd=sd, basis=basis, note=Note(
            "ridge sharpness not pinned: the points span the balance but no sharpness in "
            "1..8 fits them better than the max of memory and compute", code="ridge_no_gain"))
    # the max fits the points as well as any k: let the levels they leave out decide
    scores = [level_out_error(problem, b, measured, xk) for _, xk, _, b in candidates]
    at_max = scores[0]
    j = int(np.argmin(scores[1:])) + 1
    if scores[j] >= RIDGE_GAIN * at_max:
        return RidgeFit(sharpness=None, x=x, sd=sd, basis=basis, note=Note(
            f"ridge sharpness not pinned: the points span the balance but no sharpness in "
            f"1..8 predicts a level left out better than the max of memory and compute "
            f"(median held-out error {at_max:.1%} over the {levels} levels)",
            code="ridge_no_gain_levels", levels=levels, err=round(100 * at_max, 1)))
    k, x_k, sd_k, b_k = candidates[j]
    return RidgeFit(sharpness=float(k), x=x_k, sd=sd_k, basis=b_k, note=Note(
        f"ridge sharpness {k:.2f} fitted (the points span the balance of memory and "
        f"compute; the max fits them as well, so chosen by leaving each of the {levels} "
        f"levels out: median held-out error {scores[j]:.1%}, the max's {at_max:.1%})",
        code="ridge_fitted_levels", k=round(float(k), 2), levels=levels,
        err=round(100 * scores[j], 1), max_err=round(100 * at_max, 1)))


def fold_ridge(problem: Problem, method: StepMethod | str) -> RidgeRefit:
    """The scan for one held-out fold (`calibration_problem.held_out_predictions`): its knobs
    and sharpness (the basis' own where the fold's points do not pin one)."""
    def refit(basis: dict[str, FloatArray], measured: FloatArray, x: FloatArray,
              sd: FloatArray) -> tuple[FloatArray, float]:
        rf = fit_ridge(problem, basis, measured, x, sd, method)
        return rf.x, (basis_ridge(basis) if rf.sharpness is None else rf.sharpness)
    return refit
