"""The calibration report: the knob table and the errors, as rows, Markdown and CSV.

What a person reads of a `capacity.fit.calibration.Calibration` (the Results page and its
Markdown and CSV export): each fitted knob beside the value the scenario had (spec-sheet)
with its standard error (`knob_rows`), and the median |relative error| per kind of point,
spec-sheet, fitted and held out of the fit (`error_rows`). Source: docs/calibration.md.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass

from capacity.fit.calibration import KNOBS, Calibration, PointKind
from capacity.fit.calibration_problem import spec_value
from capacity.model.scenario import Scenario


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
