"""The accuracy scorecard written out: Markdown for docs/accuracy.md, JSON, and the markers.

`markdown` is the part of docs/accuracy.md between `BEGIN` and `END` (`capacity validate --out
docs/accuracy.md` rewrites it with `write_between_markers`, keeping the text around it);
`to_json` is the whole `capacity.fit.validate.Scorecard` with its derived figures. Source:
docs/accuracy.md.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from capacity.errors import InputError
from capacity.fit import validate_added
from capacity.fit.validate import (
    MIN_WITHIN_LEVELS,
    Check,
    Scorecard,
    Spread,
    WithinLevel,
    band_coverage,
)
from capacity.untrusted import read_utf8

BEGIN = "<!-- validate:begin -->"
END = "<!-- validate:end -->"
"""Markers of the generated part of docs/accuracy.md; text outside them is kept."""
COMMAND = "capacity validate --out docs/accuracy.md"
"""The command line that regenerates docs/accuracy.md (named in the generated part)."""


def _n(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v:.4g}"


def _p(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.1%}"


def _x(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.2f}x"


def markdown(card: Scorecard, *, today: str | None = None, command: str = COMMAND) -> str:
    """The scorecard as Markdown (the part of docs/accuracy.md between the markers): the date
    and command line first, then the summary, optimism, held-out error and every row."""
    day = today or dt.date.today().isoformat()
    method = f", step method {card.step_method}" if card.step_method else ""
    n_ok = sum(c.upper_bound for c in card.checks)
    n_added = sum(bool(c.added) for c in card.checks)
    lines = [f"Generated {day} by `{command}`{method}.", "",
             f"{len(card.checks)} measured rows in {len(card.groups)} groups "
             "(GPU + engine + model) from data/reference/published.csv"
             + (f", {n_added} of them added later and held out (marked below)." if n_added
                else "."), "",
             "### Spec-sheet upper bound", "",
             f"The spec-sheet prediction is not slower than measured on {n_ok} of "
             f"{len(card.checks)} rows: **{_p(card.upper_bound_rate)}** (target 100%).", ""]
    if card.violations:
        lines += ["| group | C | metric | measured | spec-sheet | reason |",
                  "|---|---:|---|---:|---:|---|"]
        lines += [f"| {v.check.group} | {v.check.concurrency:g} | {v.check.metric} | "
                  f"{_n(v.check.measured)} | {_n(v.check.spec)} | {v.reason} |"
                  for v in card.violations]
        lines.append("")
    lines += ["### Optimism (spec-sheet speed / measured speed: decode step, throughput, end-to-end)", "",
              "| by | name | rows | median | range |", "|---|---|---:|---:|---|"]
    for by, rows in (("GPU", card.optimism_by_gpu), ("engine", card.optimism_by_engine)):
        lines += [f"| {by} | {name} | {s.n} | {_x(s.median)} | {_x(s.low)} - {_x(s.high)} |"
                  for name, s in rows]
    lines += ["", "### Calibrated, leave one group out (|predicted / measured - 1|)", "",
              "The step is the event model's TPOT, (E2E - TTFT) / (n - 1), in the row's "
              "statistic: what a closed loop's measured TPOT and ITL hold, the decode steps "
              "and the other requests' prefills that stall them (the spec sheet's: F4 alone).",
              "", "| metric | levels | rows | median | worst |", "|---|---|---:|---:|---:|"]
    lines += [f"| {m} | {w} | {s.n} | {_p(s.median)} | {_p(s.high)} |"
              for m, w, s in card.logo_error]
    lines += validate_added.markdown(card)
    lines += _band_markdown(card)
    lines += _within_markdown(card)
    lines += ["", "### Every row", "",
              "| group | in / out | C | metric | stat | measured | spec-sheet | optimism | "
              "calibrated (held out) | error | saturated | added |",
              "|---|---|---:|---|---|---:|---:|---:|---:|---:|---|---|"]
    for c in card.checks:
        lines.append(
            f"| {c.group} | {c.prompt_tokens:g} / {c.output_tokens:g} | {c.concurrency:g} | "
            f"{c.metric} | {c.stat} | {_n(c.measured)} | {_n(c.spec)} | {_x(c.optimism)} | "
            f"{_n(c.calibrated)} | {_p(c.calibrated_error)} | "
            f"{'yes' if c.saturated else 'no'} | {c.added or '-'} |")
    lines += ["", "Calibrated knobs for each group came from: " + "; ".join(
        sorted({f"{c.group}: {c.calibrated_from or 'none'}" for c in card.checks})) + ".", ""]
    if card.skipped:
        lines += ["Not predicted (not in the catalog): " + "; ".join(card.skipped) + ".", ""]
    return "\n".join(lines)


def _band_markdown(card: Scorecard) -> list[str]:
    """How often the band shown without measurements contains the measured decode step."""
    lines = ["", "### The band without measurements (decode step)", "",
             "How often the band of a prediction without calibration contains the measured "
             "decode step (a benchmark's TPOT): the decode step's band (the chapter's knobs to "
             "the typical ranges' slow edge, `capacity.fit.uncertainty.band`, as the Explorer "
             "shows it beside the step), its slow edge stretched to the event model's TPOT at "
             "the slow edge's knobs under the row's engine profile (the other requests' "
             "prefills that stall the decode, `validate.typical_step_bands`). It spans every "
             "knob at its slow edge at once, so it is an envelope, not an 80% band (issue 25's "
             "target for an 80% band is 75-85% of rows): the 80% band is the typical basis' "
             "step band, scored held out of each group in the section \"Typical basis, nobody "
             "measured\".", "",
             "| levels | rows in the band | rows | share |", "|---|---:|---:|---:|"]
    for where, flag in (("below", False), ("at saturation", True)):
        inside, n = band_coverage(card.checks, flag)
        lines.append(f"| {where} | {inside} | {n} | {_p(inside / n) if n else '-'} |")
    return lines


def _levels_tables(card: Scorecard, levels: Sequence[WithinLevel],
                   spread: Callable[[str], Spread], word: str) -> list[str]:
    """A decode-level section's two tables: the error by step method (levels, groups, median,
    worst), then every level with its step (stated or derived) and each method's prediction."""
    ms = card.within_methods
    groups = len({w.group for w in levels})
    lines = ["| step method | levels | groups | median | worst |", "|---|---:|---:|---:|---:|"]
    for m in ms:
        s = spread(m)
        lines.append(f"| {m} | {s.n} | {groups} | {_p(s.median)} | {_p(s.high)} |")
    lines += ["", "| group | C | context | measured ms | step | "
              + " | ".join(f"{m} ({word}) | error" for m in ms) + " |",
              "|---|---:|---:|---:|---|" + "---:|---:|" * len(ms)]
    for w in levels:
        cells = " | ".join(f"{_n(w.held_out_ms[i])} | {_p(w.error(i))}" for i in range(len(ms)))
        lines.append(f"| {w.group} | {w.concurrency:g} | {w.context_tokens:g} | "
                     f"{_n(w.measured_ms)} | {w.derived or 'stated'} | {cells} |")
    return lines


def _within_markdown(card: Scorecard) -> list[str]:
    """The within-group section (each level held out of its group's fit), then the levels
    beyond a fit of the lower ones."""
    if not card.within:
        return []
    groups = sorted({w.group for w in card.within})
    derived = [w for w in card.within if w.derived]
    lines = ["", "### Calibrated on the group's other levels (decode step, each level held out)",
             "", f"Groups with at least {MIN_WITHIN_LEVELS} decode levels, each level predicted "
             "by `capacity calibrate`'s fit of the group's other levels (the whole level held "
             "out, every prompt length of it; five folds of levels above eight), under each "
             f"step method: {len(card.within)} levels in {len(groups)} groups "
             f"({', '.join(groups)}), {len(derived)} of them with a step the source does not "
             "state (derived, marked on its row).", ""]
    lines += _levels_tables(card, card.within, card.within_error, "held out")
    if card.extrapolated:
        lines += ["", "### Fitted on the lower levels, predicted up to twice the largest", "",
                  "Each group above fitted on its decode levels up to half its largest (at "
                  "least two), and the levels above the largest fitted one, up to twice it, "
                  "predicted: the error to expect when a sweep stopped short of the load "
                  f"planned for. {len(card.extrapolated)} levels.", ""]
        lines += _levels_tables(card, card.extrapolated, card.extrapolated_error, "predicted")
    return lines


def jsonable(v: Any) -> Any:
    """`v` with every non-finite float as None, through dicts, lists and tuples (JSON-ready)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [jsonable(x) for x in v]
    return v


def to_json(card: Scorecard) -> str:
    """The scorecard as JSON: every check with its derived figures, and the summaries."""
    def check(c: Check) -> dict[str, Any]:
        return {**dataclasses.asdict(c), "metric": str(c.metric), "optimism": c.optimism,
                "upper_bound": c.upper_bound, "calibrated_error": c.calibrated_error}

    doc = {"upper_bound_rate": card.upper_bound_rate,
           "band_coverage": {w: dict(zip(("inside", "rows"), band_coverage(card.checks, f),
                                         strict=True))
                             for w, f in (("below", False), ("at saturation", True))},
           "violations": [{"check": check(v.check), "reason": v.reason} for v in card.violations],
           "optimism_by_gpu": {n: dataclasses.asdict(s) for n, s in card.optimism_by_gpu},
           "optimism_by_engine": {n: dataclasses.asdict(s) for n, s in card.optimism_by_engine},
           "leave_one_group_out": [{"metric": m, "levels": w, **dataclasses.asdict(s)}
                                   for m, w, s in card.logo_error],
           "within_group": {
               "methods": list(card.within_methods),
               "error": {m: dataclasses.asdict(card.within_error(m))
                         for m in card.within_methods},
               "levels": [{**dataclasses.asdict(w), "held_out_ms": dict(zip(
                   card.within_methods, w.held_out_ms, strict=True))} for w in card.within]},
           "added_rows": validate_added.to_dict(card),
           "groups": list(card.groups), "step_method": card.step_method,
           "skipped": list(card.skipped), "checks": [check(c) for c in card.checks]}
    return json.dumps(jsonable(doc), indent=2, allow_nan=False)


def write_between_markers(path: Path, generated: str, begin: str = BEGIN, end: str = END,
                          after: str = "") -> Path:
    """Put `generated` between `begin` and `end` (default: the scorecard's markers) in `path`,
    keeping everything outside them; a file without the markers gets them (and the part) right
    after the text `after` where it has it, else at the end; a missing file is created."""
    block = f"{begin}\n{generated.rstrip()}\n{end}"
    try:
        text = read_utf8(path)
    except FileNotFoundError:
        text = "# Accuracy\n\n"
    if begin in text and end in text and text.index(begin) < text.index(end):
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    elif after and after in text:
        head, tail = text.split(after, 1)
        text = head + after + "\n\n" + block + tail
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def between_markers(text: str, begin: str = BEGIN, end: str = END) -> str:
    """The generated part of a document between `begin` and `end` (default: the scorecard's
    markers), or '' when it has none."""
    if begin not in text or end not in text:
        return ""
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")


def fmt_or_dash(v: float | None, fmt: str) -> str:
    """`v` in format `fmt`, '-' where it is missing or not finite: the sections' tables."""
    return "-" if v is None or not math.isfinite(v) else format(v, fmt)


def not_scored_lines(skipped: Sequence[tuple[str, str]]) -> list[str]:
    """A section's closing 'Not scored: id: reason; ...' paragraph (a blank line before it),
    none where nothing was skipped. Example: [('a', 'no TTFT')] -> ['', 'Not scored: a: no
    TTFT.']."""
    if not skipped:
        return []
    return ["", "Not scored: " + "; ".join(f"{row}: {why}" for row, why in skipped) + "."]


def error_cells(errors: Sequence[float]) -> str:
    """A section's error summary for signed errors (predicted / measured - 1), as the cells
    'n | median |error| | worst (signed) | median signed' of its table. Example: [0.1, -0.3,
    0.2] -> '3 | 20.0% | -30.0% | +10.0%'."""
    worst = max(errors, key=abs, default=None)
    return (f"{len(errors)} | {fmt_or_dash(Spread.of(abs(e) for e in errors).median, '.1%')} | "
            f"{fmt_or_dash(worst, '+.1%')} | {fmt_or_dash(Spread.of(errors).median, '+.1%')}")


def spec_typical_error_lines(card: Any, bases: Sequence[str], labels: dict[str, str],
                             larger: str = "capacity") -> list[str]:
    """A spec-sheet-and-typical section's error table by basis and metric (`labels`: metric ->
    its name; 'all' first) and the spec sheet's bound (`ErrorsByMetric.spec_bound`), the
    metrics where faster is larger named `larger`: the MLPerf, TensorRT-LLM and saturated-run
    sections."""
    bound, total = card.spec_bound
    lines = ["| basis | metric | figures | median abs error | worst | median signed |",
             "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {basis} | {'all' if metric is None else labels[metric]} | "
              f"{error_cells(errs)} |" for basis, metric, errs in card.error_table(bases, labels)]
    return lines + ["", f"The spec sheet is on the fast side of the measured figure ({larger} at "
                    f"or above, latency at or below) on {bound} of {total} figures."]


def csv_number(r: dict[str, str], key: str, where: str, *, whole: bool = True,
               required: bool = True) -> Any:
    """Column `key` of a reference CSV's raw row `r` as a positive int (or float with
    `whole=False`), None when blank and not `required`; InputError naming the row (`where`) and
    the column otherwise (data/reference/disagg.csv, open_loop.csv)."""
    text = (r.get(key) or "").strip()
    if not text:
        if required:
            raise InputError(f"{where}: column '{key}' is empty")
        return None
    try:
        v: float = int(text) if whole else float(text)
    except ValueError:
        kind = "a whole number" if whole else "a number"
        raise InputError(f"{where}: column '{key}' must be {kind}, got '{text}'") from None
    if not (math.isfinite(v) and v > 0):
        raise InputError(f"{where}: column '{key}' must be > 0, got '{text}'")
    return v
