"""The scorecard's rows for a user's own runs (the Results page): each measured level beside
the spec-sheet prediction and, with a calibration, the calibrated one (`run_checks`), and their
summary (`summarize`). The published rows' scorecard is `capacity.fit.validate`, whose `Check`,
`predict` and definitions these rows share, so a figure reads the same on both.
Source: docs/accuracy.md, docs/app.md (Results).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from capacity.fit import calibration as calib
from capacity.fit.measured import MeasuredPoint
from capacity.fit.validate import (
    Check,
    Metric,
    Spread,
    pick,
    predict,
    saturated_levels,
    spec_sheet,
)
from capacity.model.scenario import Scenario


def run_checks(points: Sequence[MeasuredPoint], scenario: Scenario,
               calibration: calib.Calibration | None = None) -> list[Check]:
    """The scorecard's rows for measured points of one's own (a stored run, an import): each
    level's decode step (the one the fit reads, `calibration.decode_measured_ms`: the median
    inter-token gap where the run has it, else TPOT; until 2026-12-07 TPOT always, so the
    page showed a vLLM level at 41.05 ms measured, its prefill stalls included, beside the
    fit's 11.2), TTFT and throughput beside the spec-sheet prediction of
    `scenario` (`spec_sheet`: every knob at peak) and, with a calibration, the calibrated
    one. Prompt and output lengths are each point's own (else the scenario's prompt and
    context)."""
    out: list[Check] = []
    by_len: dict[tuple[float, float], list[MeasuredPoint]] = {}
    for p in points:
        prompt = p.prompt_tokens if p.prompt_tokens is not None else float(scenario.prompt)
        output = (p.output_tokens if p.output_tokens is not None
                  else max(0.0, p.context_tokens - prompt))
        by_len.setdefault((prompt, output), []).append(p)
    cal_s = None if calibration is None else calib.apply(calibration, scenario)
    scenario = spec_sheet(scenario)
    for (prompt, output), pts in sorted(by_len.items()):
        pts = sorted(pts, key=lambda p: p.concurrency)
        levels = [p.concurrency for p in pts]
        spec = predict(scenario, levels, prompt, output)
        cal = None if cal_s is None else predict(cal_s, levels, prompt, output)
        # C_vram of the whole deployment (`c_vram` counts every replica): the saturation
        # note's, so one rule marks both (`saturated_levels`)
        sat = saturated_levels(levels, [p.output_tok_s for p in pts], spec.c_vram)
        for i, p in enumerate(pts):
            for metric, value in ((Metric.STEP, calib.decode_measured_ms(p)),
                                  (Metric.TTFT, p.ttft_ms),
                                  (Metric.THROUGHPUT, p.output_tok_s)):
                if value is None:
                    continue
                out.append(Check(
                    group="", gpu=scenario.gpu.key, engine=p.engine,
                    model=scenario.variant.key, source=p.source, date="", tp=scenario.tp,
                    concurrency=p.concurrency, prompt_tokens=prompt, output_tokens=output,
                    metric=metric, stat=p.stat, measured=float(value),
                    spec=pick(spec, metric, i), saturated=sat[i],
                    calibrated=None if cal is None else pick(cal, metric, i),
                    calibrated_from="" if calibration is None else calibration.name))
    return out


@dataclass(frozen=True, kw_only=True)
class RunAccuracy:
    """The summary of `run_checks`: rows, the share where the spec sheet is an upper bound, and
    the median |relative error| of the spec-sheet and calibrated predictions (fractions; NaN
    when there is none)."""

    rows: int
    upper_bound_rate: float
    spec_median_error: float
    calibrated_median_error: float


def summarize(checks: Sequence[Check]) -> RunAccuracy:
    """`RunAccuracy` of a list of checks (the Results page's caption)."""
    cal = [abs(e) for c in checks if (e := c.calibrated_error) is not None]
    return RunAccuracy(
        rows=len(checks),
        upper_bound_rate=(sum(c.upper_bound for c in checks) / len(checks)) if checks
        else math.nan,
        spec_median_error=Spread.of(abs(c.spec_error) for c in checks).median,
        calibrated_median_error=float(statistics.median(cal)) if cal else math.nan)
