"""F11: fit the efficiency knobs from measured points, and predict with them.

Decode: the scenario's step method, the chapter's F4
`t_step = t0 + max((W + C x KV) / (BW x eta_bw), 2 x P x C / (F x eff)) + comm` (three knobs)
or the operator step F4b (six: `OPERATOR_KNOBS`), both the library's own
(`model.roofline.StepModel.peak_terms`, then `combine_step`), so a fitted calibration predicts
exactly what `evaluate` computes. The measured step is each level's median inter-token latency
where the source has it (`decode_measured_ms`), so stalls between tokens stay out.
Prefill: `TTFT = t0_prefill + 2PL / (F x MFU) + attention / (F x MFU_attn) + comm` (F6b).
Memory: `overhead_gb` from a measured maximum concurrency (or OOM point) through F3.

The fit is robust least squares (`scipy.optimize.least_squares`, loss `soft_l1`, bounds) on
relative residuals (predicted / measured - 1), with a weak prior toward typical values
(`PRIORS`: eta_bw 0.8, eff 0.5, MFU 0.4, zero overheads and floor; eta_kv and MFU_attn toward
the fitted eta_bw and MFU) so that knobs the data cannot tell apart stay sensible, and
`identifiability` says which knobs the data pinned down: with one context length, bandwidth
efficiency and per-step overhead trade off against each other, and with one prompt length MFU
and prefill overhead do. Decode and prefill
are fitted separately (they share no knob). Every fit reports its residuals per point and the
error on points held out of the fit (k-fold, leave-one-out for small sets); that error is
never hidden: with fewer than two points there is none and the report says so.

TTFT under load includes queueing (docs/method.md, queueing), which this formula does not model: by
default only the TTFT points at the lowest measured concurrency of each prompt length are fitted.
Decode points use the context a request holds on average while decoding (prompt + output / 2).

Transfer: efficiencies belong to kernels and hardware more than to one model, so a calibration
fitted on one model applies to another on the same GPU and engine (`apply` warns when the
GPU differs). Source: F11 (docs/method.md), docs/calibration.md.
"""

from __future__ import annotations

import csv
import io
import math
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import tomli_w
from scipy.optimize import least_squares

from capacity import workspace
from capacity.catalog.loader import MAX_CONTEXT_TOKENS
from capacity.errors import InputError
from capacity.fit.measured import MeasuredPoint
from capacity.model.basis import RESERVED_NAMES
from capacity.model.kv import kv_request_bytes
from capacity.model.parallel import tp_comm_ms
from capacity.model.prefill import prefill_flops
from capacity.model.roofline import StepMethod, combine_step, counts_as_engines, step_method
from capacity.model.scenario import Scenario, decode_model, evaluate
from capacity.types import FloatArray, Note
from capacity.units import GB, TERA

DECODE_KNOBS = ("eta_bw", "step_overhead_ms", "eff")
"""The chapter method's decode knobs (F4 + F11)."""
OPERATOR_KNOBS = ("eta_bw", "eta_kv", "eff", "attn_sat_batch", "step_overhead_ms",
                  "seq_overhead_ms")
"""The operator method's decode knobs (F4b): eta_bw is the weight GEMMs' eta_w."""
BATCH1_KNOBS = (*OPERATOR_KNOBS, "batch1_factor")
"""With `fit(batch1=True)`: also the step of one sequence over the formula's, for engines that
run it through other kernels (llama.cpp on CPU: `roofline.combine_step`)."""
PREFILL_KNOBS = ("mfu", "attn_mfu", "prefill_overhead_ms")
KNOBS = ("eta_bw", "step_overhead_ms", "eff", "eta_kv", "attn_sat_batch", "seq_overhead_ms",
         "batch1_factor", "mfu", "prefill_overhead_ms", "attn_mfu")
"""Every knob a calibration may carry (a saved file lists those it fitted)."""
PRIORS: dict[str, float] = {"eta_bw": 0.8, "step_overhead_ms": 0.0, "eff": 0.5, "mfu": 0.4,
                            "prefill_overhead_ms": 0.0, "eta_kv": 0.8, "attn_sat_batch": 0.0,
                            "seq_overhead_ms": 0.0, "attn_mfu": 0.4, "batch1_factor": 1.0}
"""Where the weak pull goes when the data cannot decide (fractions: in log space). eta_kv and
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
    "batch1_factor": (0.2, 2.0)}
PRIOR_WEIGHT = 0.02
"""Weight of each prior term against one point's relative residual: the nominal measurement
noise (2 %) over the prior's width, so a fraction's prior is one e-fold wide (log space) and
an overhead's one median measured time (`_prior_sd`)."""
SAT_PRIOR_SD = 8.0
"""Width of attn_sat_batch's prior around 0, sequences."""
BATCH1_ENGINES = ("llama.cpp",)
"""Engines (as `capacity bench` names them in meta.json's `engine_info`) that decode one
sequence through other kernels than two or more: a fit of their runs frees batch1_factor."""


def batch1_for_run(meta: Mapping[str, Any]) -> bool:
    """Whether a fit of this run (its meta.json) should free batch1_factor: its
    `engine_info["engine"]` is one of `BATCH1_ENGINES`."""
    info = meta.get("engine_info")
    engine = info.get("engine") if isinstance(info, Mapping) else None
    return isinstance(engine, str) and engine.strip().lower() in BATCH1_ENGINES


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
OVER_MEMORY = 2.0
"""A decode level above 2x the scenario's C_vram at its context is left out of the fit."""
ITL_CHUNK_RATIO = 1.5
"""A median inter-token gap above 1.5 x the median TPOT means chunks carry several tokens:
the level's decode step is then taken from TPOT."""


class PointKind(StrEnum):
    """Which latency a fitted point measures (`FitPoint.kind`; saved calibrations carry it)."""

    TPOT = "tpot"
    """Time per output token: the decode step (F4), fits eta_bw, step overhead and eff."""
    TTFT = "ttft"
    """Time to first token: prefill (F6), fits MFU and the prefill overhead."""


@dataclass(frozen=True, kw_only=True)
class FitPoint:
    """One measured point with its predictions: spec-sheet, fitted, and held out of the fit."""

    kind: PointKind
    concurrency: float
    context_tokens: float
    measured_ms: float
    spec_ms: float
    fitted_ms: float
    held_out_ms: float | None = None
    source: str = ""

    @property
    def fitted_error(self) -> float:
        """Relative error of the fitted prediction: predicted / measured - 1."""
        return self.fitted_ms / self.measured_ms - 1.0

    @property
    def spec_error(self) -> float:
        """Relative error of the spec-sheet prediction."""
        return self.spec_ms / self.measured_ms - 1.0

    @property
    def held_out_error(self) -> float | None:
        """Relative error when this point was left out of the fit (None: not held out)."""
        return None if self.held_out_ms is None else self.held_out_ms / self.measured_ms - 1.0


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """Fitted knobs and what they were fitted on. A knob is None when the data had nothing to
    say about it (no TTFT points: no MFU); `apply` then leaves the scenario's value."""

    name: str
    model: str
    gpu: str
    engine: str = ""
    eta_bw: float | None = None
    step_overhead_ms: float | None = None
    eff: float | None = None
    mfu: float | None = None
    prefill_overhead_ms: float | None = None
    overhead_gb: float | None = None
    eta_kv: float | None = None
    attn_sat_batch: float | None = None
    seq_overhead_ms: float | None = None
    attn_mfu: float | None = None
    batch1_factor: float | None = None
    step_method: str = ""
    """The decode method the knobs were fitted under ('' in files from before there were
    two: the chapter's)."""
    std: tuple[tuple[str, float], ...] = ()
    identifiability: tuple[tuple[str, float], ...] = ()
    """Per fitted knob: posterior over prior width (`identifiability`); below
    `PINNED_RATIO` the data pin it down, else it stays near its prior."""
    points: tuple[FitPoint, ...] = ()
    holdout_method: str = ""
    created: str = ""
    inputs: str = ""
    settings: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=())

    def pinned(self, name: str) -> bool | None:
        """Whether the data pinned this knob down (None: not fitted, or an old file)."""
        r = dict(self.identifiability).get(name)
        return None if r is None else r < PINNED_RATIO

    def knob_std(self, name: str) -> float:
        """Standard error of a fitted knob (NaN when the fit could not tell)."""
        return dict(self.std).get(name, math.nan)

    def errors(self, kind: PointKind, which: str = "held_out") -> FloatArray:
        """Relative errors of one kind of point ('tpot'/'ttft') for 'fitted', 'spec' or
        'held_out' predictions (held-out: only the points that were held out)."""
        vals: list[float] = []
        for p in self.points:
            if p.kind != kind:
                continue
            e = {"fitted": p.fitted_error, "spec": p.spec_error,
                 "held_out": p.held_out_error}[which]
            if e is not None:
                vals.append(e)
        return np.asarray(vals, dtype=np.float64)

    def median_abs_error(self, kind: PointKind, which: str = "held_out") -> float | None:
        """Median |relative error| (a fraction), or None when there are no such points."""
        e = self.errors(kind, which)
        return float(np.median(np.abs(e))) if e.size else None


# ---------------------------------------------------------------------------------------------
# prediction bases: the parts of F4/F4b and F6b that do not depend on the knobs

def decode_measured_ms(p: MeasuredPoint) -> float | None:
    """The measured decode step of a point (ms): the median inter-token latency where the
    source has it (a stall or a prefill between two tokens is one long gap: the median skips
    it; the per-request mean TPOT includes it), else TPOT; TPOT when the median gap exceeds
    1.5 x TPOT (chunks carrying several tokens). Source: docs/calibration.md."""
    if p.itl_p50_ms is not None and (p.tpot_ms is None
                                     or p.itl_p50_ms <= ITL_CHUNK_RATIO * p.tpot_ms):
        return p.itl_p50_ms
    return p.tpot_ms


def _decode_basis(base: Scenario, pts: Sequence[MeasuredPoint]) -> dict[str, FloatArray]:
    """`combine_step`'s knob-free inputs per point (terms at peak in ms, comm, the batch per
    replica), from the one implementation (`decode_model` -> `roofline.StepModel`), at each
    point's decode context."""
    C = np.array([p.concurrency for p in pts], dtype=np.float64)
    L = np.array([p.decode_context_tokens for p in pts], dtype=np.float64)
    kv = kv_request_bytes(base.model, L, base.kv_dtype, base.tp, base.block_size).exact_bytes
    sm = decode_model(base, kv, L)
    peak = sm.peak_terms(np.ceil(C / base.replicas))
    shape = np.broadcast_shapes(*(np.shape(v) for v in peak.values()))
    return {k: np.broadcast_to(np.asarray(v, dtype=np.float64), shape).copy()
            for k, v in peak.items()}


def _prefill_basis(base: Scenario, pts: Sequence[MeasuredPoint]) -> dict[str, FloatArray]:
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


def _decode_model(x: FloatArray, basis: dict[str, FloatArray],
                  method: str = StepMethod.CHAPTER.value) -> FloatArray:
    """F4 (x = eta_bw, step_overhead_ms, eff) or F4b (x = `OPERATOR_KNOBS`) per point, ms: the
    same arithmetic as `evaluate` with those knobs (`roofline.combine_step`), without
    re-deriving the terms at each trial of the fit."""
    b = basis
    terms = {"weight_peak_ms": b["weight_peak_ms"], "kv_peak_ms": b["kv_peak_ms"],
             "gemm_peak_ms": b["gemm_peak_ms"], "attention_peak_ms": b["attention_peak_ms"],
             "kv_request_peak_ms": b["kv_request_peak_ms"], "comm_ms": b["comm_ms"],
             "batch": b["batch"]}
    if method != StepMethod.OPERATOR:  # the chapter's overlap (F4, or the bound's counting)
        eta, t0, eff = (float(v) for v in x)
        return combine_step(method=method, **terms, eta_bw=eta, eff=eff,  # type: ignore[arg-type]
                            overhead_ms=t0).step_ms
    eta, eta_kv, eff, sat, t0, seq, *rest = (float(v) for v in x)
    one = rest[0] if rest else 1.0
    return combine_step(method=method, **terms, eta_bw=eta,
                        eta_kv=eta_kv, eff=eff, attn_sat_batch=sat, overhead_ms=t0,
                        seq_overhead_ms=seq, batch1_factor=one).step_ms


def _operator_model(x: FloatArray, basis: dict[str, FloatArray]) -> FloatArray:
    return _decode_model(x, basis, StepMethod.OPERATOR.value)


def _prefill_model(x: FloatArray, basis: dict[str, FloatArray]) -> FloatArray:
    """F6b per point, ms: t0 + linear / MFU + attention / attn_mfu + comm."""
    mfu, attn_mfu, t0p = x
    return np.asarray(t0p + basis["linear_ms"] / mfu + basis["attention_ms"] / attn_mfu
                      + basis["comm_ms"], dtype=np.float64)


@dataclass(frozen=True)
class _Problem:
    names: tuple[str, ...]
    model: Callable[[FloatArray, Any], FloatArray]
    starts: tuple[tuple[float, ...], ...]


_DECODE = _Problem(DECODE_KNOBS, _decode_model,
                   ((0.8, 0.0, 0.5), (0.6, 1.0, 0.1), (0.9, 0.5, 1.0), (0.5, 3.0, 0.03)))
_OPERATOR = _Problem(OPERATOR_KNOBS, _operator_model,
                     ((0.8, 0.8, 0.5, 0.0, 0.0, 0.0), (0.6, 0.5, 0.3, 4.0, 1.0, 0.01),
                      (0.9, 0.9, 0.8, 1.0, 0.3, 0.002), (0.5, 0.7, 0.1, 16.0, 3.0, 0.05)))
_OPERATOR_B1 = _Problem(BATCH1_KNOBS, _operator_model,
                        tuple((*x, 1.0) for x in _OPERATOR.starts) + (
                            (0.8, 0.8, 0.5, 0.0, 0.0, 0.0, 0.7),))
_PREFILL = _Problem(PREFILL_KNOBS, _prefill_model,
                    ((0.4, 0.4, 0.0), (0.2, 0.2, 20.0), (0.8, 0.5, 5.0)))


def _take(basis: dict[str, FloatArray], idx: npt.NDArray[np.intp]) -> dict[str, FloatArray]:
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


def _prior_residuals(names: Sequence[str], x: FloatArray, scale_ms: float) -> FloatArray:
    """The prior's terms: PRIOR_WEIGHT x (coordinate - prior) / width, per knob; a tied knob
    (`PRIOR_TIED`) is pulled toward its partner's value when both are fitted."""
    val = dict(zip(names, (float(v) for v in x), strict=True))
    out = []
    for n in names:
        v = val[n]
        if n in LOG_KNOBS:
            centre = val.get(PRIOR_TIED.get(n, ""), PRIORS[n])
            out.append(PRIOR_WEIGHT * math.log(v / centre) / _prior_sd(n, scale_ms))
        else:
            out.append(PRIOR_WEIGHT * (v - PRIORS[n]) / _prior_sd(n, scale_ms))
    return np.asarray(out, dtype=np.float64)


def _solve(problem: _Problem, basis: dict[str, FloatArray], measured: FloatArray
           ) -> tuple[FloatArray, FloatArray]:
    """Robust fit of one problem; returns the knobs and their standard errors (from the
    Gauss-Newton covariance; NaN when there are no more points than knobs)."""
    scale = float(np.median(measured))
    lo = np.array([BOUNDS[n][0] for n in problem.names])
    hi = np.array([BOUNDS[n][1] for n in problem.names])

    def residuals(x: FloatArray) -> FloatArray:
        r = problem.model(x, basis) / measured - 1.0
        return np.concatenate([r, _prior_residuals(problem.names, x, scale)])

    best = None
    for start in problem.starts:
        x0 = np.clip(np.asarray(start, dtype=np.float64), lo + 1e-9, hi - 1e-9)
        res = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1",
                            f_scale=ROBUST_SCALE, x_scale="jac", max_nfev=400)
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
    """Per knob: its posterior width over its prior width (< `PINNED_RATIO`: pinned down).

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
    lo = np.array([BOUNDS[n][0] for n in names])
    hi = np.array([BOUNDS[n][1] for n in names])
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
    return np.asarray(ratio * narrow, dtype=np.float64)


def _holdout(problem: _Problem, basis: dict[str, FloatArray], measured: FloatArray
             ) -> tuple[list[float | None], str]:
    """Predictions for each point from a fit that left it out; k-fold (k = 5) or, for 5
    points or fewer, leave-one-out. Fewer than 2 points: none."""
    n = measured.size
    if n < 2:
        return [None] * n, f"none: {n} point(s) is too few to hold any out"
    k = n if n <= 5 else 5
    out: list[float | None] = [None] * n
    idx = np.arange(n)
    for fold in range(k):
        test = idx[idx % k == fold]
        train = idx[idx % k != fold]
        x, _ = _solve(problem, _take(basis, train), measured[train])
        pred = problem.model(x, _take(basis, test))
        for i, v in zip(test, pred, strict=True):
            out[int(i)] = float(v)
    method = "leave-one-out" if k == n else f"{k}-fold"
    return out, f"{method} over {n} points"


def prefill_fit_points(points: Sequence[MeasuredPoint], all_levels: bool = False
                       ) -> list[MeasuredPoint]:
    """The TTFT points the prefill fit uses: by default those at the lowest measured
    concurrency of each prompt length (concurrency 1 in a sweep: no queue; TTFT under load
    includes queueing and, in engines without chunked prefill, other prompts' prefills)."""
    with_ttft = [p for p in points if p.ttft_ms is not None]
    if all_levels:
        return with_ttft
    group = prompt_length_groups([p.prefill_tokens for p in with_ttft])
    lowest: dict[int, float] = {}
    for g, p in zip(group, with_ttft, strict=True):
        lowest[g] = min(lowest.get(g, math.inf), p.concurrency)
    return [p for g, p in zip(group, with_ttft, strict=True) if p.concurrency == lowest[g]]


PROMPT_LENGTH_TOLERANCE = 0.1
"""Prompt lengths (tokens) within this share of each other are one length: a real tokenizer
gives each level of a sweep a slightly different mean (101.8, 101.6, 101.7 tokens)."""


def prompt_length_groups(tokens: Sequence[float],
                         tolerance: float = PROMPT_LENGTH_TOLERANCE) -> list[int]:
    """A group number per prompt length: sorted, a length more than `tolerance` above the
    group's first starts a new group. Unit: tokens in, group index out."""
    order = sorted(range(len(tokens)), key=lambda i: tokens[i])
    out = [0] * len(tokens)
    group, first = -1, -math.inf
    for i in order:
        if tokens[i] > first * (1.0 + tolerance):
            group, first = group + 1, tokens[i]
        out[i] = group
    return out


def overhead_from_max_concurrency(base: Scenario, max_concurrency: int,
                                  context_tokens: int) -> float:
    """Runtime memory overhead (GB per GPU) implied by a measured maximum concurrency (F3
    inverted): VRAM x util - W - NCCL - (C + 0.5) x KV_request(L, paged), with C per replica.

    The +0.5 takes the middle of the interval that floor() leaves. Example (the chapter's setup): 53
    requests of 8K fit -> 24 x 0.9 - 5.7 - 53.5 x 0.2684 = 1.54 GB.
    """
    if max_concurrency < 1:
        raise InputError("a measured maximum concurrency must be >= 1 request")
    ev = evaluate(base, [1], [context_tokens])
    c_rep = max_concurrency / base.replicas
    kv = float(np.asarray(ev.kv_request.paged_bytes).ravel()[0]) * (c_rep + 0.5)
    v = ev.vram
    overhead = (v.usable_bytes - v.weights_bytes - v.nccl_bytes - kv) / GB
    if overhead < 0:
        raise InputError(
            f"{max_concurrency} requests of {context_tokens} tokens need "
            f"{kv / GB:.2f} GB of KV per GPU, more than VRAM x util - weights leaves "
            f"({(v.usable_bytes - v.weights_bytes - v.nccl_bytes) / GB:.2f} GB): check the "
            "GPU, util, weight format and KV precision of the scenario")
    return overhead


def spec_value(base: Scenario, name: str) -> float:
    """A knob's value in the scenario the points were measured under (the spec-sheet side of
    the report): eta_kv None is eta_bw, attn_mfu None is MFU."""
    v = getattr(base, name)
    if v is None:
        v = getattr(base, PRIOR_TIED[name])
    return float(v)


def fit(points: Sequence[MeasuredPoint], base: Scenario, *, name: str = "",
        engine: str = "", inputs: str = "", max_concurrency: tuple[int, int] | None = None,
        ttft_all_levels: bool = False, today: str | None = None,
        batch1: bool = False) -> Calibration:
    """Fit F11's knobs from measured points of one model on one GPU and engine.

    `base` is the scenario the points were measured under (model, GPU, TP, KV precision);
    its knobs are the spec-sheet prediction the report compares against, and its
    `step_method` picks the decode knobs: the chapter's three (eta_bw, step overhead, eff) or
    the operator method's six (`OPERATOR_KNOBS`). The decode step is each level's median
    inter-token latency where the points have it (`decode_measured_ms`), prefill is TTFT at
    the lowest level of each prompt length (`prefill_fit_points`).
    `max_concurrency` = (C, context tokens): a measured maximum (or the C just below an OOM).
    `batch1` (operator method): also fit `batch1_factor`, the step of one sequence over the
    formula's, for an engine that runs one sequence through other kernels (llama.cpp on CPU);
    off, it stays 1, as for vLLM and SGLang on GPUs, and the other knobs keep their precision.
    """
    if not points:
        raise InputError("no measured points to fit: import a file with at least one row")
    for p in points:
        longest = max(p.context_tokens, (p.prompt_tokens or 0) + (p.output_tokens or 0))
        if longest > MAX_CONTEXT_TOKENS:
            raise InputError(f"{p.source or 'a measured point'}: a context of {longest:,.0f} "
                             f"tokens is beyond any model's ({MAX_CONTEXT_TOKENS:,} tokens)")
    if max_concurrency is not None and not 1 <= max_concurrency[1] <= MAX_CONTEXT_TOKENS:
        raise InputError(f"a measured maximum concurrency at {max_concurrency[1]:,} tokens: "
                         f"the context must be 1..{MAX_CONTEXT_TOKENS:,} tokens")
    method = StepMethod(base.step_method)
    dec = [p for p in points if decode_measured_ms(p) is not None]
    over = _over_memory(base, dec)
    dec = [p for p, o in zip(dec, over, strict=True) if not o]
    pre = prefill_fit_points(points, ttft_all_levels)
    if not dec and not pre and max_concurrency is None:
        raise InputError("the points have neither TPOT nor TTFT: nothing to fit")
    decode_problem = ((_OPERATOR_B1 if batch1 else _OPERATOR) if method == StepMethod.OPERATOR
                      else _DECODE)
    knobs: dict[str, float | None] = dict.fromkeys(KNOBS)
    std: list[tuple[str, float]] = []
    ident: list[tuple[str, float]] = []
    fit_points: list[FitPoint] = []
    methods: list[str] = []
    notes: list[str] = []  # Notes: English, with a code for the page's language
    if any(over):
        notes.append(Note(f"{sum(over)} level(s) held more than twice the requests that fit in "
                          "memory at their context (the engine ran a smaller batch and queued "
                          "the rest): left out of the decode fit", code="over_memory",
                          levels=sum(over)))
    for kind, pts, problem in ((PointKind.TPOT, dec, decode_problem),
                               (PointKind.TTFT, pre, _PREFILL)):
        if not pts:
            notes.append(Note(f"no {kind.upper()} points: {', '.join(problem.names)} not fitted",
                              code="no_points", kind=kind.upper(),
                              names=", ".join(problem.names)))
            continue
        basis: dict[str, FloatArray]
        if kind == PointKind.TPOT:
            basis = _decode_basis(base, pts)
            measured = np.array([decode_measured_ms(p) for p in pts], dtype=np.float64)
            from_itl = sum(1 for p in pts if p.itl_p50_ms is not None
                           and decode_measured_ms(p) == p.itl_p50_ms)
            if from_itl:
                notes.append(Note(f"decode step from the median inter-token latency at "
                                  f"{from_itl} of {len(pts)} levels (stalls and prefills "
                                  "between tokens left out)", code="from_itl",
                                  levels=from_itl, total=len(pts)))
        else:
            basis = _prefill_basis(base, pts)
            measured = np.array([p.ttft_ms for p in pts], dtype=np.float64)
            if any(p.concurrency > 1 for p in pts) and not ttft_all_levels:
                notes.append(Note("some prompt lengths were measured only under load: their "
                                  "TTFT may include queueing; measure them at concurrency 1",
                                  code="ttft_under_load"))
        spec_x = np.array([spec_value(base, n) for n in problem.names])
        x, sd = _solve(problem, basis, measured)
        if kind == PointKind.TPOT and len({round(p.decode_context_tokens) for p in pts}) == 1:
            notes.append(Note("TPOT at one context length only: bandwidth efficiency and "
                              "per-step overhead trade off against each other; measure a "
                              "second context to separate them (their sum at this context is "
                              "well determined)", code="one_context"))
        fitted = problem.model(x, basis)
        spec = problem.model(spec_x, basis)
        held, how = _holdout(problem, basis, measured)
        methods.append(f"{kind.upper()}: {how}")
        ratios = identifiability(problem.names, problem.model, x, basis, measured)
        loose = []
        for n, v, s, r in zip(problem.names, x, sd, ratios, strict=True):
            knobs[n] = float(v)
            if math.isfinite(s):
                std.append((n, float(s)))
            ident.append((n, float(r)))
            if r >= PINNED_RATIO:
                loose.append(n)
        if loose:
            notes.append(Note("not pinned by these points (they stay near their prior): "
                              + ", ".join(loose) + "; `capacity calibrate --plan` lists a "
                              "sweep that pins every knob", code="not_pinned",
                              names=", ".join(loose)))
        if kind == PointKind.TPOT:
            gemm_bound = _compute_binds(basis, x, method)
            if not np.any(gemm_bound):
                notes.append(Note(f"compute never binds at the measured points: eff is not "
                                  f"determined by them (kept near {PRIORS['eff']:g}); measure "
                                  "at higher concurrency or shorter context to fit it",
                                  code="eff_undetermined", eff=PRIORS["eff"]))
        for i, p in enumerate(pts):
            fit_points.append(FitPoint(
                kind=kind, concurrency=p.concurrency,
                context_tokens=p.decode_context_tokens if kind == PointKind.TPOT else p.prefill_tokens,
                measured_ms=float(measured[i]), spec_ms=float(spec[i]),
                fitted_ms=float(fitted[i]), held_out_ms=held[i], source=p.source))
    overhead = None
    if max_concurrency is not None:
        overhead = overhead_from_max_concurrency(base, *max_concurrency)
        notes.append(Note(f"overhead from a measured maximum of {max_concurrency[0]} requests "
                          f"at {max_concurrency[1]} tokens", code="overhead_from_max",
                          requests=max_concurrency[0], tokens=max_concurrency[1]))
    settings = (("weights_gb", f"{base.weights_gb:g}"), ("kv_dtype", base.kv_dtype),
                ("util", f"{base.util:g}"), ("gpus", str(base.n_gpus)), ("tp", str(base.tp)),
                ("bandwidth_gb_s", f"{base.bandwidth_gb_s:g}"),
                ("tflops", f"{base.tflops:g}"))
    return Calibration(
        name=name, model=base.variant.key, gpu=base.gpu.key,
        engine=engine or next((p.engine for p in points if p.engine), ""),
        step_method=method.value if dec else "",
        overhead_gb=overhead, std=tuple(std), identifiability=tuple(ident),
        points=tuple(fit_points), holdout_method="; ".join(methods),
        created=today or date.today().isoformat(), inputs=inputs, settings=settings,
        notes=tuple(notes), **{n: v for n, v in knobs.items() if v is not None})


def _over_memory(base: Scenario, pts: Sequence[MeasuredPoint]) -> list[bool]:
    """Per point: more than `OVER_MEMORY` x the concurrent requests that fit in memory at its
    context (F3, paged KV, the scenario's C_vram): the engine's batch was smaller than the
    level, by how much unknown. The margin leaves room for a runtime overhead or utilization
    other than the scenario's."""
    if not pts:
        return []
    ctx = np.array([max(p.context_tokens, p.decode_context_tokens) for p in pts],
                   dtype=np.float64)
    c_vram = np.asarray(evaluate(base, np.ones_like(ctx), ctx).max_concurrency_vram_paged)
    return [bool(p.concurrency > OVER_MEMORY * c)
            for p, c in zip(pts, np.broadcast_to(c_vram, ctx.shape), strict=True)]


def _compute_binds(basis: dict[str, FloatArray], x: FloatArray, method: StepMethod
                   ) -> npt.NDArray[np.bool_]:
    """Per point: does the weight GEMMs' arithmetic bind (the only place eff shows)?"""
    if method != StepMethod.OPERATOR:
        eta, _, eff = x
        return np.asarray(basis["gemm_peak_ms"] / eff
                          > (basis["weight_peak_ms"] + basis["kv_peak_ms"]) / eta)
    eta, _, eff = x[0], x[1], x[2]
    return np.asarray(basis["gemm_peak_ms"] / eff > basis["weight_peak_ms"] / eta)


def apply(calibration: Calibration, scenario: Scenario) -> Scenario:
    """The scenario with the calibration's fitted knobs (those it has), its decode method
    (a calibration without one, fitted before there were two, is the chapter's) and its name.

    Works across models (transfer); records a warning when the GPU differs, since
    efficiencies are properties of the GPU and engine.
    """
    changes: dict[str, object] = {"calibration": calibration.name or "calibrated"}
    for n in (*KNOBS, "overhead_gb"):
        v = getattr(calibration, n)
        if v is not None:
            changes[n] = float(v)
    if calibration.step_method or calibration.eta_bw is not None:
        changes["step_method"] = calibration.step_method or StepMethod.CHAPTER.value
    warnings = list(scenario.warnings)
    if calibration.gpu and calibration.gpu != scenario.gpu.key:
        warnings.append(f"calibration '{calibration.name}' was fitted on {calibration.gpu}, "
                        f"applied to {scenario.gpu.key}: efficiencies may not transfer")
    changes["warnings"] = tuple(warnings)
    return scenario.with_(**changes)



# ---------------------------------------------------------------------------------------------
# the report: the knob table and the errors, as rows, Markdown and CSV (Results page export)

@dataclass(frozen=True, kw_only=True)
class KnobRow:
    """One knob of a calibration report: the spec-sheet value the scenario had, the fitted
    value and its standard error (NaN when the fit could not tell). Units: the knob's own
    (fractions for eta_bw, eff, mfu; ms for the overheads)."""

    knob: str
    spec: float
    fitted: float
    std: float


@dataclass(frozen=True, kw_only=True)
class ErrorRow:
    """Median |relative error| of one kind of point (a fraction): spec-sheet, fitted, and held
    out of the fit (None: no such points)."""

    kind: PointKind
    spec: float | None
    fitted: float | None
    held_out: float | None


def knob_rows(cal: Calibration, base: Scenario) -> list[KnobRow]:
    """The knobs the calibration fitted, each with the base scenario's (spec-sheet) value."""
    return [KnobRow(knob=n, spec=spec_value(base, n), fitted=float(v),
                    std=cal.knob_std(n))
            for n in KNOBS if (v := getattr(cal, n)) is not None]


def error_rows(cal: Calibration) -> list[ErrorRow]:
    """Median |relative error| per kind of point the calibration was fitted on."""
    out = []
    for kind in (PointKind.TPOT, PointKind.TTFT):
        vals = {w: cal.median_abs_error(kind, w) for w in ("spec", "fitted", "held_out")}
        if vals["fitted"] is not None:
            out.append(ErrorRow(kind=kind, spec=vals["spec"], fitted=vals["fitted"],
                                held_out=vals["held_out"]))
    return out


def _cell(v: float | None, pct: bool = False, knob: bool = False) -> str:
    """A report cell: a percentage, a knob (3 significant digits, 0 below 0.0005: a fitted
    overhead of 1e-6 ms is none) or a number (4 significant digits); '-' for none."""
    if v is None or not math.isfinite(v):
        return "-"
    if pct:
        return f"{v:.1%}"
    if knob:
        return "0" if abs(v) < 5e-4 else f"{v:.3g}"
    return "0" if abs(v) < 1e-6 else f"{v:.4g}"


def report_markdown(cal: Calibration, base: Scenario, *,
                    words: dict[str, str] | None = None) -> str:
    """The calibration report as Markdown: what it was fitted on, the knob table (spec-sheet,
    fitted, std error), the median errors per kind (spec-sheet, fitted, held out), the held-out
    method and the fit's notes. `words` overrides the headings and knob names (the app's
    language: keys 'title', 'basis', 'knob', 'spec', 'fitted', 'std', 'errors', 'metric',
    'held_out', 'holdout', and each knob's name)."""
    w = {"title": f"Calibration '{cal.name}'",
         "basis": f"{cal.model} on {cal.gpu}; fitted on: {cal.inputs or '-'}",
         "knob": "knob", "spec": "chapter's", "fitted": "fitted", "std": "std error",
         "errors": "Median |error|", "metric": "metric", "held_out": "held out",
         "holdout": f"held-out method: {cal.holdout_method or '-'}", **(words or {})}
    lines = [f"# {w['title']}", "", w["basis"], "",
             f"| {w['knob']} | {w['spec']} | {w['fitted']} | {w['std']} |",
             "|---|---:|---:|---:|"]
    lines += [f"| {w.get(r.knob, r.knob)} | {_cell(r.spec, knob=True)} | "
              f"{_cell(r.fitted, knob=True)} | "
              f"{_cell(r.std)} |" for r in knob_rows(cal, base)]
    lines += ["", f"## {w['errors']}", "",
              f"| {w['metric']} | {w['spec']} | {w['fitted']} | {w['held_out']} |",
              "|---|---:|---:|---:|"]
    lines += [f"| {r.kind.upper()} | {_cell(r.spec, True)} | {_cell(r.fitted, True)} | "
              f"{_cell(r.held_out, True)} |" for r in error_rows(cal)]
    lines += ["", w["holdout"], *(f"- {n}" for n in cal.notes), ""]
    return "\n".join(lines)


def report_csv(cal: Calibration, base: Scenario) -> str:
    """The knob table and the errors as one CSV (column `table`: knob or error; values are raw
    numbers: knobs in their own unit, errors as fractions; empty when there is none)."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["table", "name", "spec", "fitted", "std", "held_out"])

    def raw(v: float | None) -> str:
        return "" if v is None or not math.isfinite(v) else repr(float(v))

    for k in knob_rows(cal, base):
        out.writerow(["knob", k.knob, raw(k.spec), raw(k.fitted), raw(k.std), ""])
    for e in error_rows(cal):
        out.writerow(["error", str(e.kind), raw(e.spec), raw(e.fitted), "", raw(e.held_out)])
    return buf.getvalue()


def predict_ms(scenario: Scenario, points: Sequence[MeasuredPoint]
               ) -> tuple[FloatArray, FloatArray]:
    """What `evaluate` predicts for each point: TPOT (step ms, at the decode context) and TTFT
    (ms, at the prompt length, no queueing)."""
    C = np.array([p.concurrency for p in points], dtype=np.float64)
    ev = evaluate(scenario, C, np.array([p.decode_context_tokens for p in points]))
    s = scenario.with_(prompt_tokens=None)
    ttft = evaluate(s, C, np.array([p.prefill_tokens for p in points])).ttft_s * 1e3
    return (np.asarray(ev.decode.step_ms, dtype=np.float64),
            np.asarray(ttft, dtype=np.float64))


# ---------------------------------------------------------------------------------------------
# TOML storage

def calibration_dirs() -> list[Path]:
    """Where calibrations are looked up by name, first match wins: the workspace's folder
    ($CAPACITY_CALIBRATIONS_DIR or `<workspace>/calibrations`), then the bundled, read-only
    one (docs/configuration.md). From a checkout both are `data/calibrations`."""
    mine, bundled = workspace.calibrations_dir(), workspace.bundled_calibrations_dir()
    return [mine] if mine.resolve() == bundled.resolve() else [mine, bundled]


NAME_MAX_CHARS = 100
"""Longest calibration name (a file name inside the calibrations folder)."""
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def check_name(name: str) -> str:
    """`name` if it is a calibration *name*, else InputError saying what a name is.

    A name is 1-100 of `[A-Za-z0-9._-]` (ASCII), not starting with '.' (so never '.' or '..'
    nor a hidden file) and not ending in '.toml': it can only ever name `<folder>/NAME.toml`.
    Everything that comes from a page or a URL is checked with this (docs/reliability.md)."""
    if name.lower() in RESERVED_NAMES:
        raise InputError(f"'{name}' names a prediction basis (the spec sheet, the chapter's "
                         "assumptions); give the calibration another name, e.g. rtx-4090-vllm")
    if (not name or len(name) > NAME_MAX_CHARS or not set(name) <= _NAME_CHARS
            or name.startswith(".") or name.lower().endswith(".toml")):
        shown = name if len(name) <= 60 else name[:60] + "..."
        raise InputError(f"calibration name '{shown}' must be 1-{NAME_MAX_CHARS} letters, "
                         "digits, '-', '_' or '.', not starting with '.' nor ending in .toml "
                         "(it names a file in the calibrations folder), e.g. rtx-4090-vllm")
    return name


def named_path(name: str, directory: Path | None = None, *, for_writing: bool = False) -> Path:
    """`<folder>/NAME.toml` for a calibration *name* (`check_name`; never a path).

    The folder is `directory` when given; else, to write, the workspace's calibrations folder
    ($CAPACITY_CALIBRATIONS_DIR); to read, the first of `calibration_dirs()` that holds
    NAME.toml (the workspace's when none does, so the error names where a save would go)."""
    check_name(name)
    if directory is not None:
        return directory / f"{name}.toml"
    folders = calibration_dirs()
    if not for_writing:
        for folder in folders:
            if (folder / f"{name}.toml").is_file():
                return folder / f"{name}.toml"
    return folders[0] / f"{name}.toml"


def calibration_path(name_or_path: str | Path, directory: Path | None = None, *,
                     for_writing: bool = False) -> Path:
    """For the command line (a user's own shell): `NAME` -> `named_path(NAME)`; anything with
    a slash or ending in `.toml` is a path. Pages and URLs use `named_path`, never this."""
    text = str(name_or_path)
    if "/" in text or "\\" in text or text.endswith(".toml"):
        return Path(text)
    try:
        return named_path(text, directory, for_writing=for_writing)
    except InputError:
        raise InputError(f"calibration name '{text[:60]}' may hold only letters, digits, '-', "
                         "'_' and '.' (or give a path ending in .toml)") from None


def saved_calibrations(directory: Path | None = None) -> list[str]:
    """Names of the calibrations saved under `directory` (default: every folder of
    `calibration_dirs()`, the workspace's and the bundled ones); a file whose stem is not a
    name (`check_name`, e.g. `x.toml.toml`) is not listed, since no page could load it."""
    folders = [directory] if directory is not None else calibration_dirs()
    return sorted({p.stem for d in folders if d.is_dir() for p in d.glob("*.toml")
                   if _is_name(p.stem)})


def _is_name(text: str) -> bool:
    try:
        check_name(text)
    except InputError:
        return False
    return True


def to_toml(cal: Calibration) -> str:
    """The calibration as TOML text (None values are left out)."""
    doc: dict[str, Any] = {
        "name": cal.name, "model": cal.model, "gpu": cal.gpu, "engine": cal.engine,
        **({"step_method": cal.step_method} if cal.step_method else {}),
        "created": cal.created, "inputs": cal.inputs, "holdout_method": cal.holdout_method,
        "notes": [str(n) for n in cal.notes],
        "knobs": {n: getattr(cal, n) for n in (*KNOBS, "overhead_gb")
                  if getattr(cal, n) is not None},
        "std": dict(cal.std), "identifiability": dict(cal.identifiability),
        "settings": dict(cal.settings),
        "points": [{k: v for k, v in p.__dict__.items() if v is not None} for p in cal.points],
    }
    return tomli_w.dumps(doc)


def _write(cal: Calibration, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(to_toml(cal), encoding="utf-8")
    tmp.replace(path)
    return path


def save(cal: Calibration, name_or_path: str | Path | None = None,
         directory: Path | None = None) -> Path:
    """Write the calibration as TOML to a name or a path (the command line's --save); returns
    the path. Never overwrites a file with a half-written one (temporary file, then rename).
    Pages use `save_named`."""
    return _write(cal, calibration_path(name_or_path or cal.name, directory, for_writing=True))


def save_named(cal: Calibration, name: str, directory: Path | None = None) -> Path:
    """Write the calibration as `<folder>/NAME.toml`, NAME a name (`check_name`), the folder
    `directory` or the workspace's calibrations folder: nothing is written anywhere else."""
    folder = directory if directory is not None else workspace.calibrations_dir()
    path = named_path(name, folder, for_writing=True)
    if path.resolve().parent != folder.resolve():  # belt and braces: a name is one file name
        raise InputError(f"calibration name '{name}' does not name a file in {folder}")
    return _write(cal, path)


def load_named(name: str, directory: Path | None = None) -> Calibration:
    """Read a saved calibration by name only (`check_name`): what pages and URLs use."""
    return load(named_path(name, directory), directory)


def load(name_or_path: str | Path, directory: Path | None = None) -> Calibration:
    """Read a calibration saved by `save` (a name or a path, the command line's
    --calibration); InputError naming the file on anything wrong."""
    path = calibration_path(name_or_path, directory)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        by_name = directory is None and path.parent in calibration_dirs()
        known = saved_calibrations(None if by_name else path.parent)
        raise InputError(f"no calibration at {path}" + (f" (saved: {', '.join(known)})"
                         if known else "; fit one with `capacity calibrate ... --save NAME`")
                         ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise InputError(f"{path}: not a readable calibration file ({e})") from None
    try:
        knobs = doc.get("knobs", {})
        if not isinstance(knobs, dict):
            raise InputError(f"{path}: [knobs] must be a table, got {knobs!r:.40}")
        for n, v in knobs.items():
            if n not in (*KNOBS, "overhead_gb"):
                raise InputError(f"{path}: unknown knob '{n}'")
            lo, hi = BOUNDS.get(n, (0.0, math.inf))
            if not (isinstance(v, int | float) and lo <= v <= hi):
                raise InputError(f"{path}: knob {n} = {v!r} is outside [{lo:g}, {hi:g}]")
        pts = tuple(FitPoint(**{**p, "kind": PointKind(p["kind"])}) for p in doc.get("points", []))
        cal = Calibration(
            name=str(doc.get("name", path.stem)), model=str(doc["model"]), gpu=str(doc["gpu"]),
            engine=str(doc.get("engine", "")), std=tuple(doc.get("std", {}).items()),
            step_method=(step_method(str(doc["step_method"])).value if "step_method" in doc
                         else ""),
            identifiability=tuple((str(k), float(v))
                                  for k, v in doc.get("identifiability", {}).items()),
            points=pts, holdout_method=str(doc.get("holdout_method", "")),
            created=str(doc.get("created", "")), inputs=str(doc.get("inputs", "")),
            settings=tuple((str(k), str(v)) for k, v in doc.get("settings", {}).items()),
            notes=tuple(str(n) for n in doc.get("notes", [])))
        values: dict[str, Any] = {n: float(v) for n, v in knobs.items()}
        return replace(cal, **values)
    except InputError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputError(f"{path}: not a calibration file (missing or bad field {e})") from None
