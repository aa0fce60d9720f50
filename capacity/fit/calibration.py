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
(`PRIORS`: eta_bw 0.8, MFU 0.4, zero overheads and floor; eff at the typical basis' GEMM
plateau on the GPU, `ceilings.typical_eff`; eta_kv and MFU_attn toward
the fitted eta_bw and MFU) so that knobs the data cannot tell apart stay sensible, and
`identifiability` says which knobs the data pinned down: with one context length, bandwidth
efficiency and per-step overhead trade off against each other, and with one prompt length MFU
and prefill overhead do. Decode and prefill
are fitted separately (they share no knob). Every fit reports its residuals per point and the
error on points held out of the fit, a whole group at a time: a concurrency level for the
decode step (every prompt length of it), a prompt length for prefill, each group in turn up to
eight, else five folds of groups (`held_out_predictions`), so no twin of a held-out point stays
in the fit; that error is never hidden: with one level (or one prompt length) there is none and
the report says so.

TTFT under load includes queueing (docs/method.md, queueing), which this formula does not model: by
default only the TTFT points at the lowest measured concurrency of each prompt length are fitted.
Decode points use the context a request holds on average while decoding (prompt + output / 2).

Transfer: efficiencies belong to kernels and hardware more than to one model, so a calibration
fitted on one model applies to another on the same GPU and engine (`apply` warns when the
GPU differs).

This module is the fit and its result (`fit`, `Calibration`, `apply`, `predict_ms`); the
least-squares problem it solves (knobs, priors, bounds, solver, identifiability) is
`capacity.fit.calibration_problem`, saving and loading calibration files
`capacity.fit.calibration_store`, the report (knob table, errors, Markdown and CSV)
`capacity.fit.calibration_report`, a run with speculative decoding (its acceptance length)
`capacity.fit.acceptance`. Source: F11 (docs/method.md), docs/calibration.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import MAX_CONTEXT_TOKENS
from capacity.errors import InputError
from capacity.fit.calibration_problem import (
    BATCH1_PROBLEM,
    BOUNDS,
    DECODE_PROBLEM,
    OPERATOR_PROBLEM,
    PINNED_RATIO,
    PREFILL_PROBLEM,
    Posterior,
    decode_basis,
    held_out_predictions,
    posterior,
    prefill_basis,
    solve,
    spec_value,
    with_ceiling,
    with_priors,
)
from capacity.fit.calibration_ridge import RIDGE_CHAPTER_NOTE, fit_ridge, fold_ridge
from capacity.fit.ceilings import (
    bandwidth_notes,
    ceiling_notes,
    fit_bandwidth_ceiling,
    fit_ceiling,
    typical_eff,
)
from capacity.fit.measured import MeasuredPoint
from capacity.model.basis import MEASURED_COUNTS
from capacity.model.roofline import StepMethod
from capacity.model.scenario import Scenario, evaluate
from capacity.model.speculative import make_draft, parse_draft
from capacity.types import FloatArray, Note
from capacity.units import GB

KNOBS = ("eta_bw", "step_overhead_ms", "eff", "eta_kv", "attn_sat_batch", "seq_overhead_ms",
         "batch1_factor", "batched_overhead_ms", "mfu", "prefill_overhead_ms", "attn_mfu",
         "ridge_sharpness")
"""Every knob a calibration may carry (a saved file lists those it fitted)."""
BATCH1_ENGINES = ("llama.cpp",)
"""Engines (as `capacity bench` names them in meta.json's `engine_info`) that decode one
sequence through other kernels than two or more: a fit of their runs frees batch1_factor and
batched_overhead_ms."""
OVER_MEMORY = 2.0
"""A decode level above 2x the scenario's C_vram at its context is left out of the fit."""
ITL_CHUNK_RATIO = 1.5
"""A median inter-token gap above 1.5 x the median TPOT means chunks carry several tokens:
the level's decode step is then taken from TPOT."""


def batch1_for_run(meta: Mapping[str, Any]) -> bool:
    """Whether a fit of this run (its meta.json) should free batch1_factor: its
    `engine_info["engine"]` is one of `BATCH1_ENGINES`."""
    info = meta.get("engine_info")
    engine = info.get("engine") if isinstance(info, Mapping) else None
    return isinstance(engine, str) and engine.strip().lower() in BATCH1_ENGINES


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
    model: str = ""
    """The model the point was measured on, in a fit of several ('' with one)."""
    model_out_ms: float | None = None
    """The prediction of a fit of the other models only (its whole model held out; None: one
    model, or not computed)."""

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

    @property
    def model_out_error(self) -> float | None:
        """Relative error when this point's whole model was left out of the fit (None: not)."""
        return None if self.model_out_ms is None else self.model_out_ms / self.measured_ms - 1.0


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """Fitted knobs and what they were fitted on. A knob is None when the data had nothing to
    say about it (no TTFT points: no MFU); `apply` then leaves the scenario's value."""

    name: str
    model: str
    gpu: str
    engine: str = ""
    models: tuple[str, ...] = ()
    """Every model the knobs were fitted on, `model` first, when there were several (() one)."""
    split_ridge_ms: float | None = None
    """Set when the fit could not split the per-step overhead from the weights' bandwidth
    efficiency: the weight read at peak (ms) of the model whose sum t0 + w / eta_bw the data
    pinned (`split_extremes`); None when they were separated (or not fitted)."""
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
    batched_overhead_ms: float | None = None
    """ms every step of two or more sequences pays, the step of one not (`combine_step`)."""
    ridge_sharpness: float | None = None
    """F4c's sharpness, fitted only where the decode points span the ridge
    (`capacity.fit.calibration_ridge`); None: the max of memory and compute."""
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
    draft: str = ""
    """The speculative-decoding draft of the measured run, 'KIND:K' ('' none): its knobs are
    those of the setup without it, `acceptance_length` its tau (`capacity.fit.acceptance`)."""
    acceptance_length: float | None = None
    """tau in use (tokens per verify step, the bonus token included): the server's measured
    one where the run recorded it, else the fitted one; `apply` gives it to the draft."""
    acceptance_fitted: float | None = None
    """tau fitted from the measured TPOT (tokens)."""
    acceptance_std: float | None = None
    """Its standard error (tokens; None with one level)."""
    acceptance_measured: float | None = None
    """tau the server counted over the run (/metrics; None: it did not say)."""

    def pinned(self, name: str) -> bool | None:
        """Whether the data pinned this knob down (None: not fitted, or an old file)."""
        r = dict(self.identifiability).get(name)
        return None if r is None else r < PINNED_RATIO

    def knob_std(self, name: str) -> float:
        """Standard error of a fitted knob (NaN when the fit could not tell)."""
        return dict(self.std).get(name, math.nan)

    def errors(self, kind: PointKind, which: str = "held_out") -> FloatArray:
        """Relative errors of one kind of point ('tpot'/'ttft') for 'fitted', 'spec',
        'held_out' (only the points that were held out) or 'model_out' (their whole model
        held out: a fit of several models) predictions."""
        vals: list[float] = []
        for p in self.points:
            if p.kind != kind:
                continue
            e = {"fitted": p.fitted_error, "spec": p.spec_error,
                 "held_out": p.held_out_error, "model_out": p.model_out_error}[which]
            if e is not None:
                vals.append(e)
        return np.asarray(vals, dtype=np.float64)

    def median_abs_error(self, kind: PointKind, which: str = "held_out") -> float | None:
        """Median |relative error| (a fraction), or None when there are no such points."""
        e = self.errors(kind, which)
        return float(np.median(np.abs(e))) if e.size else None


# ---------------------------------------------------------------------------------------------
# which measured points the fit uses, and what they measured

def decode_measured_ms(p: MeasuredPoint) -> float | None:
    """The measured decode step of a point (ms): the median inter-token latency where the
    source has it (a stall or a prefill between two tokens is one long gap: the median skips
    it; the per-request mean TPOT includes it), else TPOT; TPOT when the median gap exceeds
    1.5 x TPOT (chunks carrying several tokens). Source: docs/calibration.md."""
    if p.itl_p50_ms is not None and (p.tpot_ms is None
                                     or p.itl_p50_ms <= ITL_CHUNK_RATIO * p.tpot_ms):
        return p.itl_p50_ms
    return p.tpot_ms


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


def fit(points: Sequence[MeasuredPoint], base: Scenario, *, name: str = "",
        engine: str = "", inputs: str = "", max_concurrency: tuple[int, int] | None = None,
        ttft_all_levels: bool = False, today: str | None = None,
        batch1: bool = False, held_out: bool = True,
        others: Sequence[tuple[Scenario, Sequence[MeasuredPoint]]] = ()) -> Calibration:
    """Fit F11's knobs from measured points of one model (or several) on one GPU and engine.

    `base` is the scenario the points were measured under (model, GPU, TP, KV precision);
    its knobs are the spec-sheet prediction the report compares against, and its
    `step_method` picks the decode knobs: the chapter's three (eta_bw, step overhead, eff) or
    the operator method's six (`OPERATOR_KNOBS`). The decode step is each level's median
    inter-token latency where the points have it (`decode_measured_ms`), prefill is TTFT at
    the lowest level of each prompt length (`prefill_fit_points`).
    `others`: points of other models measured on the same GPU and engine, each with the
    scenario it was measured under (the same knobs and step method as `base`, another
    model): one set of knobs is fitted to every model's points, so the per-step fixed cost
    (the same on every model) and the weights' bandwidth efficiency (which scales with the
    weight bytes each model reads) separate; each model is then also held out whole and
    predicted from the others' fit (`FitPoint.model_out_ms`, docs/calibration.md).
    `max_concurrency` = (C, context tokens): a measured maximum (or the C just below an OOM).
    `held_out` False skips the held-out check (its refits), for a caller that predicts other
    points itself (the scorecard's extrapolation); the method then reads "not computed".
    `batch1` (operator method): also fit `batch1_factor`, the step of one sequence over the
    formula's, for an engine that runs one sequence through other kernels (llama.cpp on CPU);
    off, it stays 1, as for vLLM and SGLang on GPUs, and the other knobs keep their precision.
    """
    base = base.with_(**MEASURED_COUNTS)
    sets = [(base, list(points)), *((s.with_(**MEASURED_COUNTS), list(p)) for s, p in others)]
    if not any(pts for _, pts in sets):
        raise InputError("no measured points to fit: import a file with at least one row")
    keys = [s.variant.key for s, _ in sets]
    if len(set(keys)) < len(keys):
        raise InputError("each model may be given once: " + ", ".join(keys))
    for s, _ in sets[1:]:
        if s.gpu.key != base.gpu.key or s.step_method != base.step_method:
            raise InputError(f"{s.variant.key}: every model of one calibration is measured on "
                             f"the same GPU ({base.gpu.key}) and fitted with the same step "
                             f"method ({base.step_method})")
    for p in (p for _, pts in sets for p in pts):
        longest = max(p.context_tokens, (p.prompt_tokens or 0) + (p.output_tokens or 0))
        if longest > MAX_CONTEXT_TOKENS:
            raise InputError(f"{p.source or 'a measured point'}: a context of {longest:,.0f} "
                             f"tokens is beyond any model's ({MAX_CONTEXT_TOKENS:,} tokens)")
    if max_concurrency is not None and not 1 <= max_concurrency[1] <= MAX_CONTEXT_TOKENS:
        raise InputError(f"a measured maximum concurrency at {max_concurrency[1]:,} tokens: "
                         f"the context must be 1..{MAX_CONTEXT_TOKENS:,} tokens")
    method = StepMethod(base.step_method)
    dec_sets, pre_sets, n_over = [], [], 0
    for s, pts in sets:
        dec = [p for p in pts if decode_measured_ms(p) is not None]
        over = _over_memory(s, dec)
        n_over += sum(over)
        dec_sets.append((s, [p for p, o in zip(dec, over, strict=True) if not o]))
        pre_sets.append((s, prefill_fit_points(pts, ttft_all_levels)))
    if (not any(d for _, d in dec_sets) and not any(q for _, q in pre_sets)
            and max_concurrency is None):
        raise InputError("the points have neither TPOT nor TTFT: nothing to fit")
    decode_problem = ((BATCH1_PROBLEM if batch1 else OPERATOR_PROBLEM) if method == StepMethod.OPERATOR
                      else DECODE_PROBLEM)
    knobs: dict[str, float | None] = dict.fromkeys(KNOBS)
    std: list[tuple[str, float]] = []
    ident: list[tuple[str, float]] = []
    fit_points: list[FitPoint] = []
    methods: list[str] = []
    notes: list[str] = []  # Notes: English, with a code for the page's language
    ridge: float | None = None
    if n_over:
        k = n_over  # the count `n` picks the plural form (capacity.report.i18n.note_text)
        notes.append(Note(f"{k} level{'' if k == 1 else 's'} held more than twice the requests "
                          "that fit in memory at their context (the engine ran a smaller batch "
                          "and queued the rest): left out of the decode fit", code="over_memory",
                          n=k))
    ceiling = fit_ceiling([s for s, _ in sets])
    copy_ceiling = fit_bandwidth_ceiling([s for s, _ in sets])
    eff_prior = typical_eff(base)
    for kind, per_set, bare in ((PointKind.TPOT, dec_sets, decode_problem),
                                (PointKind.TTFT, pre_sets, PREFILL_PROBLEM)):
        problem = with_priors(with_ceiling(bare, ceiling, copy_ceiling), {"eff": eff_prior})
        tagged = [(i, s, p) for i, (s, pts) in enumerate(per_set) for p in pts]
        if not tagged:
            notes.append(Note(f"no {kind.upper()} points: {', '.join(problem.names)} not fitted",
                              code="no_points", kind=kind.upper(),
                              names=", ".join(problem.names)))
            continue
        pts = [p for _, _, p in tagged]
        basis: dict[str, FloatArray]
        if kind == PointKind.TPOT:
            basis = _joined([decode_basis(s, q) for s, q in per_set if q])
            measured = np.array([decode_measured_ms(p) for p in pts], dtype=np.float64)
            from_itl = sum(1 for p in pts if p.itl_p50_ms is not None
                           and decode_measured_ms(p) == p.itl_p50_ms)
            if from_itl:
                notes.append(Note(f"decode step from the median inter-token latency at "
                                  f"{from_itl} of {len(pts)} levels (stalls and prefills "
                                  "between tokens left out)", code="from_itl",
                                  levels=from_itl, total=len(pts)))
        else:
            basis = _joined([prefill_basis(s, q) for s, q in per_set if q])
            measured = np.array([p.ttft_ms for p in pts], dtype=np.float64)
            if any(p.concurrency > 1 for p in pts) and not ttft_all_levels:
                notes.append(Note("some prompt lengths were measured only under load: their "
                                  "TTFT may include queueing; measure them at concurrency 1",
                                  code="ttft_under_load"))
        spec_x = np.array([spec_value(base, n) for n in problem.names])
        x, sd = solve(problem, basis, measured)
        spec = problem.model(spec_x, basis)
        unfitted, refit = basis, None
        if kind == PointKind.TPOT and method != StepMethod.OPERATOR:
            notes.append(RIDGE_CHAPTER_NOTE)
        elif kind == PointKind.TPOT:  # F4c: the sharpness, where the points span the ridge
            rf = fit_ridge(problem, basis, measured, x, sd, method)
            basis, x, sd = rf.basis, rf.x, rf.sd
            knobs["ridge_sharpness"] = rf.sharpness
            notes.append(rf.note)
            refit = fold_ridge(problem, method)
        models_here = sorted({i for i, _, _ in tagged})
        if (kind == PointKind.TPOT and len(models_here) == 1
                and len({round(p.decode_context_tokens) for p in pts}) == 1):
            notes.append(Note("TPOT at one context length only: bandwidth efficiency and "
                              "per-step overhead trade off against each other; measure a "
                              "second context to separate them (their sum at this context is "
                              "well determined)", code="one_context"))
        fitted = problem.model(x, basis)
        value = ([p.concurrency for p in pts] if kind == PointKind.TPOT
                 else [round(p.prefill_tokens) for p in pts])
        # a group is one level (one prompt length) of one model: its twins leave together
        rank = {g: j for j, g in enumerate(sorted(set(zip((i for i, _, _ in tagged), value,
                                                           strict=True))))}
        groups = [rank[(i, v)] for (i, _, _), v in zip(tagged, value, strict=True)]
        unit = "level" if kind == PointKind.TPOT else "prompt length"
        held, how = held_out_predictions(problem, unfitted, measured, groups, unit,
                                         ridge=refit) if held_out \
            else ([None] * len(pts), "not computed")
        model_out: list[float | None] = [None] * len(pts)
        if held_out and len(models_here) > 1:
            model_out, how_m = held_out_predictions(
                problem, unfitted, measured, [i for i, _, _ in tagged], "model", ridge=refit)
            how = f"{how}; {how_m}"
        methods.append(f"{kind.upper()}: {how}")
        post = posterior(problem.names, problem.model, x, basis, measured, dict(problem.upper))
        if ceiling is not None:
            notes += ceiling_notes(problem.names, x, ceiling, base)
        if copy_ceiling is not None:
            notes += bandwidth_notes(problem.names, x, copy_ceiling, base)
        loose = []
        for n, v, s_n, r in zip(problem.names, x, sd, post.ratio, strict=True):
            knobs[n] = float(v)
            if math.isfinite(s_n):
                std.append((n, float(s_n)))
            ident.append((n, float(r)))
            if r >= PINNED_RATIO:
                loose.append(n)
        if loose:
            notes.append(Note("not pinned by these points (they stay near their prior): "
                              + ", ".join(loose) + "; `capacity calibrate --plan` lists a "
                              "sweep that pins them where its grid can", code="not_pinned",
                              names=", ".join(loose)))
        if kind == PointKind.TPOT:
            corr = split_correlation(problem.names, post)
            r_split = max(r for n, r in zip(problem.names, post.ratio, strict=True)
                          if n in SPLIT_KNOBS)
            if abs(corr) > SPLIT_CORRELATION or r_split >= PINNED_RATIO:
                ridge = float(np.median(basis["weight_peak_ms"][
                    [j for j, (i, _, _) in enumerate(tagged) if i == models_here[0]]]))
                notes.append(Note(
                    f"the split between the per-step overhead and the weights' bandwidth "
                    f"efficiency is not identified by these points (correlation {corr:+.2f}, "
                    f"posterior over prior width {r_split:.2f}): only their sum on "
                    f"{keys[models_here[0]]} is; another model size spans the range the data "
                    "allow (the band widens to it); fit a second model of another size "
                    "(`--also MODEL=RUN`) to separate them", code="split_unidentified",
                    corr=round(corr, 2), ratio=round(r_split, 2), model=keys[models_here[0]]))
            gemm_bound = _compute_binds(basis, x, method)
            if not np.any(gemm_bound):
                notes.append(Note(f"compute never binds at the measured points: eff is not "
                                  f"determined by them (kept near {eff_prior:.3g}, the typical "
                                  "basis' on this GPU); measure at higher concurrency or "
                                  "shorter context to fit it",
                                  code="eff_undetermined", eff=round(eff_prior, 3)))
        for j, (i, _, p) in enumerate(tagged):
            fit_points.append(FitPoint(
                kind=kind, concurrency=p.concurrency,
                context_tokens=p.decode_context_tokens if kind == PointKind.TPOT else p.prefill_tokens,
                measured_ms=float(measured[j]), spec_ms=float(spec[j]),
                fitted_ms=float(fitted[j]), held_out_ms=held[j], source=p.source,
                model=keys[i] if len(sets) > 1 else "", model_out_ms=model_out[j]))
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
        models=tuple(keys) if len(keys) > 1 else (),
        engine=engine or next((p.engine for _, pts in sets for p in pts if p.engine), ""),
        step_method=method.value if any(d for _, d in dec_sets) else "", draft="",
        overhead_gb=overhead, std=tuple(std), identifiability=tuple(ident),
        points=tuple(fit_points), holdout_method="; ".join(methods), split_ridge_ms=ridge,
        created=today or date.today().isoformat(), inputs=inputs, settings=settings,
        notes=tuple(notes), **{n: v for n, v in knobs.items() if v is not None})


SPLIT_KNOBS = ("eta_bw", "step_overhead_ms")
"""The two decode knobs one model's points cannot tell apart: both add about the same time to
every step of one model (the weights are read once a step whatever the batch)."""
SPLIT_CORRELATION = 0.99
"""|posterior correlation| of `SPLIT_KNOBS` (log eta_bw, t0) above which their split is not
identified. With one model only the prior breaks the tie (|r| = 0.9997 on a synthetic sweep);
two models whose weight reads are w and k x w give |r| = (1 + k) / sqrt(2 (1 + k^2)) from the
design alone (0.98 at k = 1.5, 0.97 at 1.75), yet pin both knobs."""


def split_correlation(names: Sequence[str], post: Posterior) -> float:
    """The posterior correlation of eta_bw (log) and step_overhead_ms (ms) in a fit over
    `names` (0 when one of them is not fitted); near -1: the data see only their sum."""
    if not all(n in names for n in SPLIT_KNOBS):
        return 0.0
    i, j = (list(names).index(n) for n in SPLIT_KNOBS)
    return float(post.correlation[i, j])


def split_extremes(cal: Calibration) -> tuple[Calibration, ...]:
    """The two ends of the range the data allow when the fit could not split the per-step
    overhead from the weights' bandwidth efficiency (`Calibration.split_ridge_ms`; () when it
    could, or there is nothing to split).

    On the fitted model the data pin the sum S = t0 + w / eta_bw (ms; w the weight read at
    peak, `split_ridge_ms`). The ends keep S: eta_bw at its bound 1 with t0 = S - w, and t0 at
    0 with eta_bw = w / S (at least its lower bound). Applied to a model that reads w2 bytes'
    worth, the step's weight part goes from S + (w2 - w) to S x w2 / w: both ends predict the
    fitted model alike and bracket another size. Source: docs/calibration.md ("One model").
    """
    w = cal.split_ridge_ms
    if w is None or w <= 0 or cal.eta_bw is None or cal.step_overhead_ms is None:
        return ()
    total = cal.step_overhead_ms + w / cal.eta_bw
    lo_eta, hi_eta = BOUNDS["eta_bw"]
    eta_low = max(lo_eta, min(hi_eta, w / total))
    return (replace(cal, eta_bw=hi_eta, step_overhead_ms=max(0.0, total - w / hi_eta)),
            replace(cal, eta_bw=eta_low, step_overhead_ms=max(0.0, total - w / eta_low)))


def _joined(bases: Sequence[dict[str, FloatArray]]) -> dict[str, FloatArray]:
    """Per-model prediction bases end to end (the same keys; each array one value per point)."""
    return {k: np.concatenate([np.asarray(b[k], dtype=np.float64).ravel() for b in bases])
            for k in bases[0]}


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
    (a calibration without one, fitted before there were two, is the chapter's), its name, and
    the memory counted as the measured engine counted it (`MEASURED_COUNTS`).

    Works across models (transfer); records a warning when the GPU differs, since
    efficiencies are properties of the GPU and engine. A calibration with a draft gives the
    scenario its draft at the calibrated acceptance length (same model only: tau belongs to
    the model and draft; a scenario's other draft is kept).
    """
    changes: dict[str, object] = {"calibration": calibration.name or "calibrated",
                                  **MEASURED_COUNTS}
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
    if calibration.draft and calibration.acceptance_length is not None:
        kind, depth = parse_draft(calibration.draft)
        same = (calibration.model in (scenario.variant.key, scenario.variant.model.key)
                or calibration.model.startswith(scenario.variant.model.key + "-"))
        mine = scenario.draft
        if not same:
            warnings.append(f"calibration '{calibration.name}' measured its draft's acceptance "
                            f"on {calibration.model}: not applied to {scenario.variant.key}")
        elif mine is not None and mine.key != calibration.draft:
            warnings.append(f"calibration '{calibration.name}' has the acceptance of "
                            f"{calibration.draft}: the scenario's draft {mine.key} keeps its own")
        else:
            tau = calibration.acceptance_length
            changes["draft"] = (make_draft(scenario.variant, kind, depth, acceptance_length=tau)
                                if mine is None else replace(mine, acceptance_length=tau))
    changes["warnings"] = tuple(warnings)
    return scenario.with_(**changes)


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
