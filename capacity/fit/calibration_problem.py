"""F11's least-squares problem: the knobs, their priors and bounds, and the solver.

What `capacity.fit.calibration.fit` solves, one problem per kind of point: the knobs of each
decode method (`DECODE_KNOBS` for the chapter's F4, `OPERATOR_KNOBS` for the operator step F4b,
`BATCH1_KNOBS` with the batch-1 factor) and of prefill (`PREFILL_KNOBS`, F6b); the weak prior
toward typical values (`PRIORS`, `PRIOR_TIED`, in log space for fractions: `LOG_KNOBS`) and the
bounds (`BOUNDS`, the GEMM knobs capped at the device's measured matmul ceiling where the
catalog has one: `with_ceiling`); the knob-free prediction bases (`decode_basis`,
`prefill_basis`: the parts of F4/F4b and F6b that do not depend on the knobs) and the
per-point models over them (`decode_step_ms`, `prefill_ms`: the library's own
`roofline.combine_step`, so a fitted calibration predicts exactly what `evaluate` computes);
the robust solver (`solve`), which knobs the data pin down (`identifiability`,
`PINNED_RATIO`) and the held-out predictions (`held_out_predictions`). `capacity.fit.sweep`
designs measurement plans on the same problems.
Source: F11 (docs/method.md), docs/calibration.md.
"""

from __future__ import annotations

import functools
import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from capacity.fit.measured import MeasuredPoint
from capacity.model.kv import kv_request_bytes
from capacity.model.parallel import tp_comm_ms
from capacity.model.prefill import prefill_flops
from capacity.model.roofline import StepMethod, combine_step_ms, counts_as_engines
from capacity.model.scenario import Scenario, decode_model
from capacity.types import BoolArray, FloatArray
from capacity.units import TERA

DECODE_KNOBS = ("eta_bw", "step_overhead_ms", "eff")
"""The chapter method's decode knobs (F4 + F11)."""
OPERATOR_KNOBS = ("eta_bw", "eta_kv", "eff", "attn_sat_batch", "step_overhead_ms",
                  "seq_overhead_ms")
"""The operator method's decode knobs (F4b): eta_bw is the weight GEMMs' eta_w."""
BATCH1_KNOBS = (*OPERATOR_KNOBS, "batch1_factor", "batched_overhead_ms")
"""With `fit(batch1=True)`: also the step of one sequence over the formula's and the fixed time
only steps of two or more sequences pay, for engines that run one sequence through other
kernels (llama.cpp on CPU: `roofline.combine_step`)."""
PREFILL_KNOBS = ("mfu", "attn_mfu", "prefill_overhead_ms")
"""Prefill's knobs (F6b): MFU of the GEMMs, MFU of attention, the fixed prefill overhead."""
PRIORS: dict[str, float] = {"eta_bw": 0.8, "step_overhead_ms": 0.0, "eff": 0.5, "mfu": 0.4,
                            "prefill_overhead_ms": 0.0, "eta_kv": 0.8, "attn_sat_batch": 0.0,
                            "seq_overhead_ms": 0.0, "attn_mfu": 0.4, "batch1_factor": 1.0,
                            "batched_overhead_ms": 0.0}
"""Where the weak pull goes when the data cannot decide (fractions: in log space); a fit
centres eff at the typical basis' GEMM plateau on its GPU instead (`Problem.priors`,
`capacity.fit.ceilings.typical_eff`; 0.5 here is the centre of a problem built without one,
e.g. `measurement_plan`'s ranking). eta_kv and
attn_mfu are pulled toward the fitted eta_bw and MFU instead (`PRIOR_TIED`): without data
that separate them, KV reads run at the weights' efficiency and attention at the GEMMs'."""
PRIOR_TIED: dict[str, str] = {"eta_kv": "eta_bw", "attn_mfu": "mfu"}
LOG_KNOBS = frozenset({"eta_bw", "eta_kv", "eff", "mfu", "attn_mfu", "batch1_factor"})
"""Fractions of peak (and the batch-1 factor, a ratio): their prior (and identifiability)
works on log(value)."""
BOUNDS: dict[str, tuple[float, float]] = {
    "eta_bw": (0.05, 1.0), "step_overhead_ms": (0.0, 1000.0), "eff": (0.005, 1.0),
    "mfu": (0.005, 1.0), "prefill_overhead_ms": (0.0, 10000.0), "eta_kv": (0.05, 1.0),
    "attn_sat_batch": (0.0, 1024.0), "seq_overhead_ms": (0.0, 100.0), "attn_mfu": (0.005, 1.0),
    "batch1_factor": (0.2, 2.0), "batched_overhead_ms": (0.0, 1000.0),
    "ridge_sharpness": (0.0, 8.0)}
PRIOR_WEIGHT = 0.02
"""Weight of each prior term against one point's relative residual: the nominal measurement
noise (2 %) over the prior's width, so a fraction's prior is one e-fold wide (log space) and
an overhead's one median measured time."""
SAT_PRIOR_SD = 8.0
"""Width of attn_sat_batch's prior around 0, sequences."""
BATCH1_PRIOR_SD = 0.1
"""Width of batch1_factor's prior around 1, in log space: a tenth. Most engines run one
sequence through the same kernels as many (vLLM, SGLang on GPUs), so the factor moves only
where the batch-1 points disagree with the others by more than the noise (llama.cpp on CPU:
0.70)."""
SEQ_PRIOR_SHARE = 0.01
"""Width of seq_overhead_ms's prior: 1 % of the median measured step per sequence."""
ROBUST_SCALE = 0.05
"""soft_l1 f_scale: residuals beyond about 5% count less than quadratically."""
PINNED_RATIO = 0.1
"""A knob is pinned down when the data cut its prior's width tenfold (posterior sd / prior
sd < 0.1): with the nominal 2 % noise a fraction is then known to about +/- 10 % (a tenth
of the prior's e-fold), an overhead to a tenth of a median measured time."""


def spec_value(base: Scenario, name: str) -> float:
    """A knob's value in the scenario the points were measured under (the spec-sheet side of
    the report): eta_kv None is eta_bw, attn_mfu None is MFU."""
    v = getattr(base, name)
    if v is None:
        v = getattr(base, PRIOR_TIED[name])
    return float(v)


# ---------------------------------------------------------------------------------------------
# prediction bases: the parts of F4/F4b and F6b that do not depend on the knobs

def decode_basis(base: Scenario, pts: Sequence[MeasuredPoint]) -> dict[str, FloatArray]:
    """`combine_step`'s knob-free inputs per point (terms at peak in ms, comm, the batch per
    replica), from the one implementation (`decode_model` -> `roofline.StepModel`), at each
    point's decode context."""
    C = np.array([p.concurrency for p in pts], dtype=np.float64)
    L = np.array([p.decode_context_tokens for p in pts], dtype=np.float64)
    kv = kv_request_bytes(base.model, L, base.kv_dtype, base.tp, base.block_size).exact_bytes
    sm = decode_model(base, kv, L)
    peak = sm.peak_terms(np.ceil(C / base.replicas))
    # F4c's sharpness rides along per point (the scenario's; a fit of it replaces the column)
    peak["ridge_sharpness"] = np.asarray(base.ridge_sharpness, dtype=np.float64)
    shape = np.broadcast_shapes(*(np.shape(v) for v in peak.values()))
    return {k: np.broadcast_to(np.asarray(v, dtype=np.float64), shape).copy()
            for k, v in peak.items()}


def basis_ridge(basis: dict[str, FloatArray]) -> float:
    """The ridge sharpness (F4c) a decode basis carries: its points' one value (0: the max;
    a basis without the column, the max)."""
    col = basis.get("ridge_sharpness")
    return 0.0 if col is None or not np.size(col) else float(np.asarray(col).flat[0])


def prefill_basis(base: Scenario, pts: Sequence[MeasuredPoint]) -> dict[str, FloatArray]:
    """Prefill GEMMs and attention at MFU = 1 and TP comm, in ms, per point (F6b)."""
    prompt = np.array([p.prefill_tokens for p in pts], dtype=np.float64)
    pf = prefill_flops(base.model, prompt,
                       by_operator=counts_as_engines(base.step_method))
    f = base.tflops * base.tp * TERA
    comm = np.asarray(tp_comm_ms(base.model, base.gpu, base.tp, prompt), dtype=np.float64)
    lin = np.asarray(pf.linear_flops / f * 1e3, dtype=np.float64)
    return {"linear_ms": lin, "attention_ms": np.asarray(pf.attention_flops / f * 1e3,
                                                         dtype=np.float64),
            "comm_ms": np.broadcast_to(comm, lin.shape).copy()}


def knob_columns(x: npt.ArrayLike) -> list[Any]:
    """The knobs of `x` as the per-point models take them: floats for one knob vector (shape
    (knobs,)); for a stack of k vectors (shape (k, knobs), one trial per row) each knob as a
    (k, 1) column, so the model broadcasts it against its points and returns (k, points), one
    row per trial (`solve` evaluates a finite-difference Jacobian's trials in one call)."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        return [float(v) for v in a]
    return [a[:, j:j + 1] for j in range(a.shape[1])]


def decode_step_ms(x: FloatArray, basis: dict[str, FloatArray],
                   method: str = StepMethod.CHAPTER.value) -> FloatArray:
    """F4 (x = eta_bw, step_overhead_ms, eff) or F4b (x = `OPERATOR_KNOBS`) per point, ms: the
    same arithmetic as `evaluate` with those knobs (`roofline.combine_step`), without
    re-deriving the terms at each trial of the fit. `x` a stack of knob vectors (k, knobs):
    one row of steps per vector (`knob_columns`)."""
    b = basis
    terms = {"weight_peak_ms": b["weight_peak_ms"], "kv_peak_ms": b["kv_peak_ms"],
             "gemm_peak_ms": b["gemm_peak_ms"], "attention_peak_ms": b["attention_peak_ms"],
             "kv_request_peak_ms": b["kv_request_peak_ms"], "comm_ms": b["comm_ms"],
             "batch": b["batch"]}
    k = basis_ridge(b)
    if method != StepMethod.OPERATOR:  # the chapter's overlap (F4, or the bound's counting)
        eta, t0, eff = knob_columns(x)
        return combine_step_ms(method=method, **terms, eta_bw=eta, eff=eff,  # type: ignore[arg-type]
                               overhead_ms=t0, ridge_sharpness=k)
    eta, eta_kv, eff, sat, t0, seq, *rest = knob_columns(x)
    one, batched = (rest[0], rest[1]) if rest else (1.0, 0.0)
    return combine_step_ms(method=method, **terms, eta_bw=eta,
                           eta_kv=eta_kv, eff=eff, attn_sat_batch=sat, overhead_ms=t0,
                           seq_overhead_ms=seq, batch1_factor=one, batched_overhead_ms=batched,
                           ridge_sharpness=k)


def operator_step_ms(x: FloatArray, basis: dict[str, FloatArray]) -> FloatArray:
    """F4b per point, ms (`decode_step_ms` under the operator method; x = `OPERATOR_KNOBS`,
    or `BATCH1_KNOBS`)."""
    return decode_step_ms(x, basis, StepMethod.OPERATOR.value)


def prefill_ms(x: FloatArray, basis: dict[str, FloatArray]) -> FloatArray:
    """F6b per point, ms: t0 + linear / MFU + attention / attn_mfu + comm (x: one knob vector,
    or a stack of them, `knob_columns`)."""
    mfu, attn_mfu, t0p = knob_columns(x)
    return np.asarray(t0p + basis["linear_ms"] / mfu + basis["attention_ms"] / attn_mfu
                      + basis["comm_ms"], dtype=np.float64)


@dataclass(frozen=True)
class Problem:
    """One least-squares problem of the fit: the knobs it fits (`names`, in the order of the
    model's `x`), the per-point model over a basis (ms; `decode_step_ms`, `prefill_ms`) and the
    starting points the solver tries (the best of them wins: the knobs trade off); `upper`,
    tighter upper bounds than `BOUNDS` for some knobs (the device's measured ceilings,
    `with_ceiling`)."""

    names: tuple[str, ...]
    model: Callable[[FloatArray, Any], FloatArray]
    starts: tuple[tuple[float, ...], ...]
    upper: tuple[tuple[str, float], ...] = ()
    takes_stacks: bool = False
    """Whether `model` also takes a stack of knob vectors (k, knobs) and returns (k, points)
    (`knob_columns`): then `solve` runs each Jacobian's trials in one call of it."""
    priors: tuple[tuple[str, float], ...] = ()
    """Prior centres in place of `PRIORS`' for some knobs (`with_priors`: eff at the typical
    basis' decode GEMM share of the device, `capacity.fit.ceilings.typical_eff`)."""

    def bounds(self) -> tuple[FloatArray, FloatArray]:
        """(low, high) of each knob in `names`: `BOUNDS`, high lowered to `upper` where given."""
        return knob_bounds(self.names, dict(self.upper))


CEILING_KNOBS: Final = ("eff", "mfu", "attn_mfu")
"""The knobs that are shares of the GPU's peak TFLOP/s: a GEMM (and an attention kernel's
matrix products) can run no faster than the device's fastest measured matmul, so a fit keeps
them at or below the ceiling where the catalog has one (`calibration.scenario_ceiling`)."""


def knob_bounds(names: Sequence[str], upper: Mapping[str, float] | None = None
                ) -> tuple[FloatArray, FloatArray]:
    """(low, high) arrays of `names`: `BOUNDS`, each high lowered to `upper[name]` where given
    (never below the low bound). Example: eff with upper {'eff': 0.803} -> (0.005, 0.803)."""
    up = upper or {}
    lo = np.array([BOUNDS[n][0] for n in names], dtype=np.float64)
    hi = np.array([max(BOUNDS[n][0], min(BOUNDS[n][1], up.get(n, BOUNDS[n][1])))
                   for n in names], dtype=np.float64)
    return lo, hi


BANDWIDTH_KNOBS: Final = ("eta_bw", "eta_kv")
"""The knobs that are shares of the GPU's spec-sheet bandwidth: a step reads its weights and KV
no faster than the device copies memory, so a fit keeps them at or below the measured copy's
share where the catalog has one (`calibration.scenario_bandwidth_ceiling`)."""


def with_ceiling(problem: Problem, ceiling: float | None,
                 bandwidth: float | None = None) -> Problem:
    """`problem` with its `CEILING_KNOBS` bounded by `ceiling` (a share of peak TFLOP/s,
    `calibration.scenario_ceiling`) and its `BANDWIDTH_KNOBS` by `bandwidth` (a share of the
    spec sheet's GB/s, `calibration.scenario_bandwidth_ceiling`); unchanged where both are
    None."""
    if ceiling is None and bandwidth is None:
        return problem
    upper = tuple((n, float(c)) for n in problem.names
                  for c in ((ceiling if n in CEILING_KNOBS else None),
                            (bandwidth if n in BANDWIDTH_KNOBS else None))
                  if c is not None)
    return replace(problem, upper=upper)


def with_priors(problem: Problem, centres: Mapping[str, float]) -> Problem:
    """`problem` with the prior of each of its knobs in `centres` centred there instead of at
    `PRIORS` (the others, and every knob it does not fit, as before)."""
    own = tuple((n, float(centres[n])) for n in problem.names if n in centres)
    return replace(problem, priors=own) if own else problem


DECODE_PROBLEM = Problem(DECODE_KNOBS, decode_step_ms,
                         ((0.8, 0.0, 0.5), (0.6, 1.0, 0.1), (0.9, 0.5, 1.0), (0.5, 3.0, 0.03)),
                         takes_stacks=True)
"""The chapter's decode step (F4): eta_bw, step overhead, eff over `decode_basis`."""
OPERATOR_PROBLEM = Problem(OPERATOR_KNOBS, operator_step_ms,
                           ((0.8, 0.8, 0.5, 0.0, 0.0, 0.0), (0.6, 0.5, 0.3, 4.0, 1.0, 0.01),
                            (0.9, 0.9, 0.8, 1.0, 0.3, 0.002), (0.5, 0.7, 0.1, 16.0, 3.0, 0.05)),
                           takes_stacks=True)
"""The operator step (F4b): `OPERATOR_KNOBS` over `decode_basis`."""
BATCH1_PROBLEM = Problem(BATCH1_KNOBS, operator_step_ms,
                         tuple((*x, 1.0, 0.0) for x in OPERATOR_PROBLEM.starts) + (
                             (0.8, 0.8, 0.5, 0.0, 0.0, 0.0, 0.7, 0.0),
                             (0.8, 0.8, 0.5, 0.0, 0.0, 0.0, 1.0, 5.0)),
                         takes_stacks=True)
"""The operator step with the batch-1 factor and the batched overhead free
(`fit(batch1=True)`)."""
PREFILL_PROBLEM = Problem(PREFILL_KNOBS, prefill_ms,
                          ((0.4, 0.4, 0.0), (0.2, 0.2, 20.0), (0.8, 0.5, 5.0)),
                          takes_stacks=True)
"""Prefill (F6b): MFU, attention MFU, prefill overhead over `prefill_basis`."""


def take(basis: dict[str, FloatArray], idx: npt.NDArray[np.intp]) -> dict[str, FloatArray]:
    """The basis' columns at the points `idx` (a fold's training or held-out points)."""
    return {k: v[idx] for k, v in basis.items()}


def _prior_sd(name: str, scale_ms: float) -> float:
    """Width of a knob's prior in its prior coordinate (log for fractions; the knob's unit
    else): one e-fold; one median measured time; `SAT_PRIOR_SD`; `SEQ_PRIOR_SHARE` x it."""
    if name == "batch1_factor":
        return BATCH1_PRIOR_SD
    if name in LOG_KNOBS:
        return 1.0
    if name == "attn_sat_batch":
        return SAT_PRIOR_SD
    if name == "seq_overhead_ms":
        return SEQ_PRIOR_SHARE * scale_ms
    return scale_ms


@functools.lru_cache(maxsize=256)
def _prior_layout(names: tuple[str, ...], scale_ms: float,
                  priors: tuple[tuple[str, float], ...] = ()
                  ) -> tuple[FloatArray, npt.NDArray[np.intp], BoolArray, npt.NDArray[np.intp],
                             FloatArray]:
    """The prior of the knobs `names` as arrays: each knob's centre (`PRIORS`, or `priors`
    where it names the knob: `Problem.priors`); each knob's
    partner (its own index, or for a tied knob whose partner is fitted too, the partner's:
    `PRIOR_TIED`, the centre is the partner's value) and which knobs are so tied; the indices
    of the knobs that work in log; and each width (`_prior_sd`)."""
    at = {n: i for i, n in enumerate(names)}
    own = dict(priors)
    centre = np.array([own.get(n, PRIORS[n]) for n in names], dtype=np.float64)
    partner = np.array([at.get(PRIOR_TIED.get(n, ""), i) for i, n in enumerate(names)],
                       dtype=np.intp)
    tied = partner != np.arange(len(names))
    logs = np.flatnonzero([n in LOG_KNOBS for n in names]).astype(np.intp)
    sd = np.array([_prior_sd(n, scale_ms) for n in names], dtype=np.float64)
    for shared in (centre, partner, tied, logs, sd):   # one per layout, every caller's: read-only
        shared.setflags(write=False)
    return centre, partner, tied, logs, sd


def _prior_residuals(names: Sequence[str], x: FloatArray, scale_ms: float,
                     priors: tuple[tuple[str, float], ...] = ()) -> FloatArray:
    """The prior's terms: PRIOR_WEIGHT x (coordinate - prior) / width, per knob (the centre
    `PRIORS`' or `priors`'); a tied knob (`PRIOR_TIED`) is pulled toward its partner's value
    when both are fitted. `x` one knob vector (-> (knobs,)) or a stack of them (k, knobs)
    (-> (k, knobs)). The fit's hottest helper after the model: a few array operations,
    whatever the knobs."""
    centre, partner, tied, logs, sd = _prior_layout(tuple(names), float(scale_ms), priors)
    a = np.asarray(x, dtype=np.float64)
    c = np.where(tied, a[..., partner], centre)
    out = a - c
    if logs.size:
        out[..., logs] = np.log(a[..., logs] / c[..., logs])
    return np.asarray(PRIOR_WEIGHT * out / sd, dtype=np.float64)


FORWARD_STEP: Final = float(np.finfo(np.float64).eps) ** 0.5
"""The relative step of a forward difference (scipy's '2-point' Jacobian: sqrt of machine
epsilon, about 1.5e-8)."""


def forward_jacobian(stacked: Callable[[FloatArray], FloatArray], x: FloatArray,
                     lo: FloatArray, hi: FloatArray) -> FloatArray:
    """The Jacobian of residuals at the knobs `x` by forward differences, (residuals, knobs):
    scipy's '2-point' scheme step for step (`scipy.optimize._numdiff.approx_derivative`: step
    `FORWARD_STEP` x max(1, |x_i|), signed as x_i, turned back, or shortened to the room left,
    where it would leave the bounds [lo, hi]), but every trial point in one call of `stacked`
    (rows of knob vectors -> rows of residuals) rather than one call per knob: the least
    squares of a fit spend most of their model time here. Example: residuals x -> (x0 - 1,
    2 x1) at (0.5, 2) -> [[1, 0], [0, 2]]."""
    x = np.asarray(x, dtype=np.float64)
    h = FORWARD_STEP * np.where(x >= 0, 1.0, -1.0) * np.maximum(1.0, np.abs(x))
    below, above = x - lo, hi - x
    moved = x + h
    fitting = np.abs(h) <= np.maximum(below, above)
    h = np.where(((moved < lo) | (moved > hi)) & fitting, -h, h)
    h = np.where(fitting, h, np.where(above >= below, above, -below))
    rows = stacked(np.vstack([x, x + np.diag(h)]))
    dx = (x + h) - x
    return np.asarray(((rows[1:] - rows[0]) / dx[:, None]).T, dtype=np.float64)


SOLVED_KEPT: Final = 256
"""How many fits `solve` remembers (the latest; a few kB each)."""
_solved: OrderedDict[bytes, tuple[FloatArray, FloatArray]] = OrderedDict()
_solved_lock = threading.Lock()


def forget_fits() -> None:
    """Empty `solve`'s memory (a benchmark times fits, not look-ups)."""
    with _solved_lock:
        _solved.clear()


def _fit_key(problem: Problem, basis: dict[str, FloatArray], measured: FloatArray) -> bytes:
    """A digest of everything a fit depends on: the problem (its model, knobs, starts, bounds),
    the priors and the loss, and the points (every basis column, the measurements)."""
    h = hashlib.blake2b(digest_size=20)
    # the problem's repr names its model function (and where it lives) and every field
    h.update(repr((problem, sorted(PRIORS.items()), sorted(BOUNDS.items()), PRIOR_WEIGHT,
                   ROBUST_SCALE)).encode())
    for name in sorted(basis):
        col = np.ascontiguousarray(basis[name], dtype=np.float64)
        h.update(f"{name}:{col.shape}".encode())
        h.update(col.tobytes())
    h.update(np.ascontiguousarray(measured, dtype=np.float64).tobytes())
    return h.digest()


def solve(problem: Problem, basis: dict[str, FloatArray], measured: FloatArray
          ) -> tuple[FloatArray, FloatArray]:
    """Robust fit of one problem; returns the knobs and their standard errors (from the
    Gauss-Newton covariance; NaN when there are no more points than knobs).

    A pure function of its arguments, remembered (the latest `SOLVED_KEPT`): the scorecard
    meets some fits twice (a group's fit on its lower levels is also one of its held-out
    folds), and a fit costs tens of least-squares runs."""
    key = _fit_key(problem, basis, measured)
    with _solved_lock:   # the app's sessions fit in threads of one process
        got = _solved.get(key)
        if got is not None:
            _solved.move_to_end(key)
    if got is not None:
        return got[0].copy(), got[1].copy()
    x, std = _solve(problem, basis, measured)
    with _solved_lock:
        _solved[key] = (x.copy(), std.copy())
        while len(_solved) > SOLVED_KEPT:
            _solved.popitem(last=False)
    return x, std


def _solve(problem: Problem, basis: dict[str, FloatArray], measured: FloatArray
           ) -> tuple[FloatArray, FloatArray]:
    """`solve` without its memory: the multi-start least squares."""
    scale = float(np.median(measured))
    lo, hi = problem.bounds()

    def residuals(x: FloatArray) -> FloatArray:
        """The relative misses and the prior's terms at knobs x; a stack of knob vectors (a
        model that `takes_stacks`) gives one row each."""
        r = problem.model(x, basis) / measured - 1.0
        return np.concatenate([r, _prior_residuals(problem.names, x, scale, problem.priors)],
                              axis=-1)

    # scipy (about a second to import) only when a fit runs: the pages and commands that merely
    # read calibrations do not pay for it
    from scipy.optimize import least_squares

    best = None
    for start in problem.starts:
        x0 = np.clip(np.asarray(start, dtype=np.float64), lo + 1e-9, hi - 1e-9)
        res = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1",
                            f_scale=ROBUST_SCALE, x_scale="jac", max_nfev=400,
                            jac=(lambda x: forward_jacobian(residuals, x, lo, hi))
                            if problem.takes_stacks else "2-point")
        if best is None or res.cost < best.cost:
            best = res
    assert best is not None
    n = measured.size
    if n <= len(problem.names):
        return np.asarray(best.x, dtype=np.float64), np.full(len(problem.names), np.nan)
    r_data = best.fun[:n]
    s2 = float(np.sum(r_data ** 2) / (n - len(problem.names)))
    jac = np.asarray(best.jac, dtype=np.float64)
    cov = np.linalg.pinv(jac.T @ jac) * s2
    std = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    return np.asarray(best.x, dtype=np.float64), std


def identifiability(problem_names: Sequence[str], model: Callable[[FloatArray, Any], FloatArray],
                    x: FloatArray, basis: dict[str, FloatArray], measured: FloatArray
                    ) -> FloatArray:
    """Per knob: its posterior width over its prior width (< `PINNED_RATIO`: pinned down);
    `posterior(...).ratio`."""
    return posterior(problem_names, model, x, basis, measured).ratio


def posterior(problem_names: Sequence[str], model: Callable[[FloatArray, Any], FloatArray],
              x: FloatArray, basis: dict[str, FloatArray], measured: FloatArray,
              upper: Mapping[str, float] | None = None) -> Posterior:
    """Per knob: its posterior width over its prior width (< `PINNED_RATIO`: pinned down), and
    the knobs' posterior correlations.

    Linearised at the knobs `x`, in the prior's coordinates (log for fractions), with the
    nominal 2 % noise that `PRIOR_WEIGHT` assumes: posterior precision = J'J (the data's
    relative residuals, J by central differences, one-sided at a bound) + the prior's own
    J_p'J_p. A knob whose term never matters at the measured points (a floor below every
    measured batch, compute at a batch where memory binds) has J = 0: its ratio is 1 and it
    stays at its prior. It depends on where the points are, not on their values: the same
    function ranks candidate sweeps (`measurement_plan`).
    """
    names = list(problem_names)
    k = len(names)
    scale = float(np.median(measured))
    lo, hi = knob_bounds(names, upper)
    log = np.array([n in LOG_KNOBS for n in names])
    u0 = np.where(log, np.log(np.maximum(x, 1e-12)), x)

    def to_x(u: FloatArray) -> FloatArray:
        return np.asarray(np.where(log, np.exp(u), u), dtype=np.float64)

    def data(u: FloatArray) -> FloatArray:
        return np.asarray(model(to_x(u), basis) / measured, dtype=np.float64)

    def prior(u: FloatArray) -> FloatArray:
        return _prior_residuals(names, to_x(u), scale)

    jd = np.zeros((measured.size, k))
    jp = np.zeros((k, k))
    for j, n in enumerate(names):
        h = 1e-4 if log[j] else max(1e-4 * abs(u0[j]), 1e-4 * _prior_sd(n, scale))
        up, dn = u0.copy(), u0.copy()
        up[j] = min(u0[j] + h, math.log(hi[j]) if log[j] else hi[j])
        dn[j] = max(u0[j] - h, math.log(lo[j]) if log[j] else lo[j])
        width = up[j] - dn[j]
        if width <= 0:
            continue
        jd[:, j] = (data(up) - data(dn)) / width
        jp[:, j] = (prior(up) - prior(dn)) / width
    prior_info = jp.T @ jp
    post = np.linalg.pinv(jd.T @ jd + prior_info)
    pri = np.linalg.pinv(prior_info)
    ratio = np.sqrt(np.clip(np.diag(post), 0.0, None) / np.clip(np.diag(pri), 1e-300, None))
    # a log knob's prior narrower than an e-fold (batch1_factor's tenth) is no wider a doubt:
    # its ratio is taken against the e-fold, as for the ratios of peak (theirs is 1)
    narrow = np.array([_prior_sd(n, scale) if n in LOG_KNOBS else 1.0 for n in names])
    sd = np.sqrt(np.clip(np.diag(post), 1e-300, None))
    return Posterior(ratio=np.asarray(ratio * narrow, dtype=np.float64),
                     correlation=np.asarray(post / np.outer(sd, sd), dtype=np.float64))


@dataclass(frozen=True)
class Posterior:
    """What the linearised posterior of `posterior` says per knob: `ratio` (posterior width
    over prior width, < `PINNED_RATIO`: pinned down) and the knobs' `correlation` matrix (in
    the prior's coordinates: log for fractions; |r| near 1 means the data see only a
    combination of the two, e.g. eta_bw and step_overhead_ms on one model)."""

    ratio: FloatArray
    correlation: FloatArray


MAX_LEAVE_ONE_OUT_GROUPS = 8
"""Up to this many groups each is held out in turn; more are split into `HOLDOUT_FOLDS` folds."""
HOLDOUT_FOLDS = 5


RidgeRefit = Callable[[dict[str, FloatArray], FloatArray, FloatArray, FloatArray],
                      tuple[FloatArray, float]]
"""(training basis, measured, knobs and errors fitted at the basis' sharpness) -> (knobs, F4c
sharpness): `capacity.fit.calibration_ridge`'s scan, run again inside each held-out fold."""


def held_out_predictions(problem: Problem, basis: dict[str, FloatArray], measured: FloatArray,
                         groups: Sequence[float] | None = None, unit: str = "point",
                         ridge: RidgeRefit | None = None) -> tuple[list[float | None], str]:
    """Predictions for each point from a fit that left out its whole group (a concurrency
    level for the decode step, a prompt length for prefill: `groups[i]` is point i's), so no
    twin of a held-out point (the same level at another prompt length) stays in the fit.
    Up to `MAX_LEAVE_ONE_OUT_GROUPS` groups: each held out in turn; more: `HOLDOUT_FOLDS`
    folds of whole groups (group j of the sorted values in fold j mod 5). `groups` None: each
    point its own group. Fewer than 2 groups: none (a fit of one level predicts no other).
    The method string says which, e.g. 'leave-one-level-out over 4 levels (8 points)'.
    `ridge`: each fold also picks its own ridge sharpness from its training points (F4c), so
    the held-out point does not choose it."""
    n = measured.size
    keys = list(range(n)) if groups is None else [float(g) for g in groups]
    distinct = sorted(set(keys))
    m = len(distinct)
    units = "points" if groups is None else unit + "s"
    if m < 2:
        return [None] * n, (f"none: {n} point(s) is too few to hold any out" if groups is None
                            else f"none: one {unit} only ({n} point(s)), nothing to hold out")
    k = m if m <= MAX_LEAVE_ONE_OUT_GROUPS else HOLDOUT_FOLDS
    fold_of = {g: j % k for j, g in enumerate(distinct)}
    fold = np.array([fold_of[g] for g in keys])
    out: list[float | None] = [None] * n
    idx = np.arange(n)
    for f in range(k):
        test = idx[fold == f]
        train = idx[fold != f]
        x, sd = solve(problem, take(basis, train), measured[train])
        at = take(basis, test)
        if ridge is not None:
            x, sharp = ridge(take(basis, train), measured[train], x, sd)
            at = {**at, "ridge_sharpness": np.full_like(at["batch"], sharp)}
        pred = problem.model(x, at)
        for i, v in zip(test, pred, strict=True):
            out[int(i)] = float(v)
    if groups is None:
        method = "leave-one-out" if k == n else f"{k}-fold"
        return out, f"{method} over {n} points"
    how = f"leave-one-{unit.replace(' ', '-')}-out" if k == m else f"{k}-fold by {unit}"
    return out, f"{how} over {m} {units} ({n} points)"


