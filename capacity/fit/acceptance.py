"""Fit a draft's acceptance length from a measured run with speculative decoding (F12 inverted).

A run measured with a draft (its kind and depth k known) has, at each concurrency b, a TPOT
that F12 writes as `engine_step(b) / tau`: one engine step (the verify pass over k + 1 tokens
per sequence and the draft's k passes, `DecodeStep.engine_step_ms`) over the tokens a sequence
keeps per step. The step knobs come from elsewhere, a calibration of the same setup without
the draft or the basis in use (a drafted run cannot tell its knobs from its tau), so the only
unknown is tau, and the fit is closed-form least squares on relative residuals over the levels
(`pooled_acceptance`). Where the run recorded the server's own acceptance (vLLM's draft
counters or SGLang's gauge over /metrics, `capacity.bench.engine_info.spec_acceptance`, in
meta.json's `server_metrics`), that figure is used and the fitted one reported beside it, so a
mismatch (knobs that do not fit this setup, a TPOT that includes other costs) shows.

The measured TPOT is each level's median request TPOT, not the median inter-token gap: with a
draft the tokens of a step arrive together, so the gaps are not steps. See docs/calibration.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from capacity.errors import InputError
from capacity.fit.calibration import Calibration, FitPoint, PointKind
from capacity.fit.measured import MeasuredPoint
from capacity.model.scenario import Scenario, evaluate
from capacity.model.speculative import MAX_DEPTH, make_draft
from capacity.types import FloatArray, Note
from capacity.untrusted import loads_json

MEASURED_KEY = "spec_acceptance_length"
"""The key of a run's measured acceptance length in meta.json's `server_metrics`."""
MAX_META_BYTES = 1 << 22
"""Largest meta.json read for its acceptance (bytes): anyone with the folder can edit one."""


@dataclass(frozen=True, kw_only=True)
class AcceptanceFit:
    """tau of one draft fitted from the measured TPOT at each level, and the server's figure."""

    draft: str
    """'eagle:3': the draft's kind and depth k."""
    fitted: float
    """tau fitted from TPOT (tokens per verify step, the bonus token included; 1..k+1)."""
    fitted_std: float
    """Its standard error (tokens; NaN with one level)."""
    measured: float | None
    """tau the server counted over the run (/metrics), None when it did not say."""
    clipped: bool
    """The least-squares tau fell outside 1..k+1 and was clipped to the nearest end."""
    concurrency: tuple[float, ...]
    engine_step_ms: tuple[float, ...]
    """The engine step (verify + draft) the knobs predict at each level, ms."""
    tpot_ms: tuple[float, ...]
    """The measured TPOT at each level, ms."""
    held_out: tuple[float | None, ...]
    """tau fitted without each level (None with one level)."""

    @property
    def acceptance_length(self) -> float:
        """The tau to use: the server's measured one where there is one, else the fitted."""
        return self.measured if self.measured is not None else self.fitted

    @property
    def mismatch(self) -> float | None:
        """Fitted over measured tau, minus 1 (None without a measured one)."""
        return None if self.measured is None else self.fitted / self.measured - 1.0


def pooled_acceptance(engine_step_ms: Sequence[float] | FloatArray,
                      tpot_ms: Sequence[float] | FloatArray) -> tuple[float, float]:
    """(tau, its standard error) from engine steps e_i and measured TPOTs m_i (tokens).

    Least squares on relative residuals e_i / (tau m_i) - 1, linear in u = 1 / tau: with
    a_i = e_i / m_i, u = sum(a) / sum(a^2) and tau = sum(a^2) / sum(a) (one level: e / m,
    F12's TPOT = engine step / tau inverted). Standard error from the residuals:
    sd(u) = sqrt(sum(r^2) / (n - 1) / sum(a^2)), sd(tau) = tau^2 sd(u) (NaN for one level).
    Example: steps 10 and 20 ms, TPOT 4 and 8 ms -> a = 2.5, 2.5 -> tau 2.5, sd 0.
    """
    e = np.asarray(engine_step_ms, dtype=np.float64)
    m = np.asarray(tpot_ms, dtype=np.float64)
    if (e.size == 0 or e.shape != m.shape or not np.all(np.isfinite(e) & np.isfinite(m))
            or np.any(e <= 0) or np.any(m <= 0)):
        raise InputError("no usable TPOT to fit an acceptance length from")
    a = e / m
    s2 = float(np.sum(a * a))
    u = float(np.sum(a)) / s2
    tau = 1.0 / u
    if a.size < 2:
        return tau, math.nan
    r = u * a - 1.0
    sd_u = math.sqrt(float(np.sum(r * r)) / (a.size - 1) / s2)
    return tau, tau * tau * sd_u


def engine_steps_ms(scenario: Scenario, kind: str, depth: int,
                    points: Sequence[MeasuredPoint]) -> FloatArray:
    """The engine step (verify pass + draft, ms) `scenario`'s knobs predict at each point's
    concurrency and decode context: `evaluate`'s `DecodeStep.engine_step_ms` with the draft
    (its tau does not enter an engine step: 1 is passed)."""
    s = scenario.with_(draft=make_draft(scenario.variant, kind, depth, acceptance_length=1.0))
    C = np.array([p.concurrency for p in points], dtype=np.float64)
    L = np.array([p.decode_context_tokens for p in points], dtype=np.float64)
    return np.asarray(evaluate(s, C, L).decode.engine_step_ms, dtype=np.float64).reshape(-1)


def fit_acceptance(points: Sequence[MeasuredPoint], scenario: Scenario, kind: str, depth: int,
                   measured: float | None = None) -> AcceptanceFit:
    """tau of a `kind`:`depth` draft from the points' TPOT under `scenario`'s step knobs
    (`pooled_acceptance`, clipped to 1..k+1), each level held out in turn, with the server's
    `measured` tau beside it (None: it did not say)."""
    pts = [p for p in points if p.tpot_ms is not None]
    if not pts:
        raise InputError("the measured points have no TPOT: nothing to fit an acceptance "
                         "length from")
    steps = engine_steps_ms(scenario, kind, depth, pts)
    tpot = np.array([p.tpot_ms for p in pts], dtype=np.float64)
    tau, sd = pooled_acceptance(steps, tpot)
    lo, hi = 1.0, float(depth + 1)
    held: list[float | None] = [None] * len(pts)
    if len(pts) > 1:
        keep = np.ones(len(pts), dtype=bool)
        for i in range(len(pts)):
            keep[:] = True
            keep[i] = False
            held[i] = min(max(pooled_acceptance(steps[keep], tpot[keep])[0], lo), hi)
    return AcceptanceFit(draft=f"{kind}:{depth}", fitted=min(max(tau, lo), hi), fitted_std=sd,
                         measured=measured, clipped=not lo <= tau <= hi,
                         concurrency=tuple(p.concurrency for p in pts),
                         engine_step_ms=tuple(float(x) for x in steps),
                         tpot_ms=tuple(float(x) for x in tpot), held_out=tuple(held))


def measured_acceptance(meta: Mapping[str, Any]) -> float | None:
    """The acceptance length a run's meta.json recorded from the server's /metrics
    (`server_metrics.spec_acceptance_length`), None when absent or not a believable length
    (1..`MAX_DEPTH` + 1 tokens)."""
    sm = meta.get("server_metrics")
    v = sm.get(MEASURED_KEY) if isinstance(sm, Mapping) else None
    if isinstance(v, int | float) and not isinstance(v, bool) and 1.0 <= v <= MAX_DEPTH + 1:
        return float(v)
    return None


def label_acceptance(label: str, bench_dir: Path) -> float | None:
    """The mean measured acceptance length of the stored runs of `label`
    (`bench_dir/<label>/*/meta.json`), None when none recorded one; an unreadable or oversized
    meta.json is skipped."""
    found: list[float] = []
    for path in sorted((bench_dir / label).glob("*/meta.json")):
        try:
            if path.stat().st_size > MAX_META_BYTES:
                continue
            meta = loads_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        tau = measured_acceptance(meta) if isinstance(meta, dict) else None
        if tau is not None:
            found.append(tau)
    return float(np.mean(found)) if found else None


def drafted_calibration(points: Sequence[MeasuredPoint], scenario: Scenario, kind: str,
                        depth: int, *, measured: float | None = None,
                        knobs: Calibration | None = None, name: str = "", engine: str = "",
                        inputs: str = "", today: str | None = None
                        ) -> tuple[Calibration, AcceptanceFit]:
    """A calibration of a run with a draft: the step knobs of `knobs` (a calibration of the same
    setup without the draft, already applied to `scenario`; None: `scenario`'s own), the draft
    and its tau (`fit_acceptance`; the server's `measured` one where given), and a TPOT point per
    level (measured; the published tau's prediction as the chapter's; the fitted one's; each
    level's held-out one)."""
    fit = fit_acceptance(points, scenario, kind, depth, measured)
    try:
        published: float | None = make_draft(scenario.variant, kind, depth).acceptance_length
    except InputError:
        published = None
    notes: list[str] = [Note(
        f"speculative decoding ({fit.draft}): the step knobs are "
        + (f"calibration '{knobs.name}''s" if knobs is not None else "the scenario's")
        + ", not fitted from this run; tau fitted from TPOT at "
        f"{len(fit.tpot_ms)} level{'' if len(fit.tpot_ms) == 1 else 's'}",
        code="draft_knobs", draft=fit.draft)]
    if fit.clipped:
        notes.append(Note(f"the knobs' engine step over the measured TPOT falls outside 1..{depth + 1}"
                          " tokens: tau clipped; check that the knobs fit this setup",
                          code="draft_clipped", draft=fit.draft))
    if published is None:
        notes.append(Note("no published acceptance for this draft: the chapter's column uses the "
                          "fitted tau", code="draft_unpublished", draft=fit.draft))
    if fit.measured is not None and fit.mismatch is not None and abs(fit.mismatch) > 0.1:
        notes.append(Note(f"the fitted tau ({fit.fitted:.2f}) is {fit.mismatch:+.0%} off the "
                          f"server's ({fit.measured:.2f}): the knobs may not fit this setup",
                          code="draft_mismatch", draft=fit.draft))
    ref = published if published is not None else fit.fitted
    pts = [p for p in points if p.tpot_ms is not None]
    fit_points = tuple(
        FitPoint(kind=PointKind.TPOT, concurrency=p.concurrency,
                 context_tokens=p.decode_context_tokens, measured_ms=m, spec_ms=e / ref,
                 fitted_ms=e / fit.acceptance_length,
                 held_out_ms=None if h is None else e / h, source=p.source)
        for p, e, m, h in zip(pts, fit.engine_step_ms, fit.tpot_ms, fit.held_out, strict=True))
    base = knobs if knobs is not None else Calibration(name="", model="", gpu="")
    cal = replace(
        base, name=name, model=scenario.variant.key, gpu=scenario.gpu.key,
        engine=engine or (knobs.engine if knobs is not None else ""),
        step_method=scenario.step_method, points=fit_points,
        holdout_method=("TPOT: tau refitted without each level" if len(pts) > 1
                        else "TPOT: none (one level)"),
        created=today or date.today().isoformat(), inputs=inputs,
        notes=(*(knobs.notes if knobs is not None else ()), *notes),
        draft=fit.draft, acceptance_length=fit.acceptance_length, acceptance_fitted=fit.fitted,
        acceptance_std=None if math.isnan(fit.fitted_std) else fit.fitted_std,
        acceptance_measured=fit.measured)
    return cal, fit


def acceptance_text(fit: AcceptanceFit) -> str:
    """The fit in a few lines: tau fitted with its uncertainty, the server's, which is used."""
    sd = "" if math.isnan(fit.fitted_std) else f" +/- {fit.fitted_std:.2f}"
    lines = [f"draft {fit.draft}: acceptance length fitted from TPOT {fit.fitted:.2f}{sd} tokens "
             f"per step" + (" (clipped)" if fit.clipped else "")
             + ("" if len(fit.tpot_ms) > 1 else " (one level: no uncertainty)")]
    if fit.measured is None:
        lines.append("measured by the server (/metrics): unknown; the fitted tau is used")
    else:
        lines.append(f"measured by the server (/metrics): {fit.measured:.2f} (fitted "
                     f"{fit.mismatch:+.1%} off it); the measured tau is used")
    rows = [f"  C={c:g}: engine step {e:.3f} ms / TPOT {m:.3f} ms = {e / m:.2f} tokens"
            for c, e, m in zip(fit.concurrency, fit.engine_step_ms, fit.tpot_ms, strict=True)]
    return "\n".join(lines + rows) + "\n"


def acceptance_json(fit: AcceptanceFit) -> dict[str, Any]:
    """The fit as JSON (NaN as null)."""
    return {"draft": fit.draft, "fitted": fit.fitted,
           "fitted_std": None if math.isnan(fit.fitted_std) else fit.fitted_std,
           "measured": fit.measured, "used": fit.acceptance_length, "mismatch": fit.mismatch,
           "clipped": fit.clipped,
           "levels": [{"concurrency": c, "engine_step_ms": e, "tpot_ms": m, "held_out_tau": h}
                      for c, e, m, h in zip(fit.concurrency, fit.engine_step_ms, fit.tpot_ms,
                                            fit.held_out, strict=True)]}
