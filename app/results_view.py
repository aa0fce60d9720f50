"""The Results page's words, figures and tables: stored runs, the overlay's accuracy, a fitted
calibration, the uncertainty band and a vLLM log's terms, in the page's language.

No widget is drawn here and nothing is fitted: the figures come from `capacity.fit` (through
`app.measure_state` where cached); number formats are `app.format`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from app.format import knob, markdown_plain, num, pct, sig
from app.layout import Metric
from capacity.access import User
from capacity.fit import calibration as calib
from capacity.fit import calibration_report as cal_report
from capacity.fit.findmax import FindMaxOverlay
from capacity.fit.overlay import METRICS, Overlay, Predicted, median_abs_error
from capacity.fit.reference import ReferenceSweep
from capacity.fit.run_accuracy import RunAccuracy
from capacity.fit.uncertainty import Band, Sensitivity
from capacity.fit.validate import Check
from capacity.fit.validate_formulas import SATURATION_GAIN
from capacity.fit.vllm_log import Term
from capacity.model.scenario import Scenario
from capacity.report.i18n import MESSAGES, note_text, t

RUN_COLUMNS = ["label", "started_at", "status", "model", "gpu", "levels", "requests_ok",
               "requests_failed", "base_url", "run_id"]
"""The stored runs' columns the page lists."""
FIND_MAX_LABELS = ("load", "ttft", "verdict", "passed", "failed", "measured", "predicted", "target")
"""The find-max chart's labels (`r_fm_<name>` messages)."""


def word_or_self(prefix: str, value: str, lang: str) -> str:
    """`value` in words when the table has a message `<prefix><value>`, else as it is."""
    return t(prefix + value, lang) if prefix + value in MESSAGES else value


def seen_by(started_by: str, shared: bool, user: User) -> str:
    """Who sees a run, as the access rule has it (`capacity.access.may_see_run`): 'everyone'
    (no owner: stored without sign-in or before owners were recorded), 'shared' (its owner
    shared it), 'you' (the user's own, not shared) or 'owner' (another user's, not shared:
    listed to an admin only); message keys r_seen_*."""
    if not started_by:
        return "everyone"
    if shared:
        return "shared"
    return "you" if started_by == user.id else "owner"


def runs_table(shown: pd.DataFrame, lang: str, user: User | None = None) -> pd.DataFrame:
    """The stored runs listed: their status in words, the columns in the page's language; with
    a signed-in `user`, who sees each run (`seen_by`) after its status."""
    listed = shown[RUN_COLUMNS].assign(
        status=shown["status"].map(lambda v: word_or_self("status_", v, lang)))
    columns = list(RUN_COLUMNS)
    if user is not None and user.signed_in and "started_by" in shown:
        listed.insert(3, "seen_by", [
            t("r_seen_" + seen_by(str(o), bool(sh), user), lang)
            for o, sh in zip(shown["started_by"], shown["shared"], strict=True)])
        columns.insert(3, "seen_by")
    return listed.rename(columns={c: t("r_c_" + c, lang) for c in columns})


def run_warnings_text(warnings: Sequence[str], lang: str) -> str:
    """A run's warnings, one a line under a heading that counts them."""
    return (t("r_run_warnings", lang, n=len(warnings)) + "\n\n"
            + "\n".join(f"- {markdown_plain(w)}" for w in warnings))


def reference_text(s: ReferenceSweep, lang: str) -> str:
    """A published sweep's name in the page's language (the option itself stays its label)."""
    return t("r_ref_label", lang, model=s.model_name, fmt=s.weight_format.split(" ")[0],
             gpu=s.gpu_name, engine=s.engine, p=f"{s.prompt_tokens:g}", o=f"{s.output_tokens:g}")


def published_series(s: ReferenceSweep, lang: str) -> str:
    """A published sweep's series on the charts: 'published: <its name>' ('公开数据：...' in
    Chinese), the same whether it is the chart's own series or one added beside a run (so the
    page can drop the copy of the one it shows as its own)."""
    return t("r_published", lang) + t("colon", lang) + reference_text(s, lang)


def overlay_caption(ov: Overlay, scenario: Scenario, lang: str) -> str:
    """What the overlay predicts with: the lengths, model, GPUs and calibration."""
    return t("r_overlay_help", lang, prompt=ov.prompt_tokens, output=ov.output_tokens,
             model=scenario.variant.key, gpu=scenario.gpu.name, n=scenario.n_gpus,
             cal=ov.calibration or t("r_cal_none", lang))


def saturation_text(ov: Overlay, lang: str) -> str:
    """Where the measured runs saturate, against the memory's limit, naming the rule a plateau
    is found by (`flat_levels`, the accuracy table's too)."""
    sat = ov.saturation
    gain = f"{SATURATION_GAIN:.0%}"
    if sat.concurrency is None:
        return t("r_sat_none", lang, c_vram=ov.c_vram_spec, gain=gain)
    return t("r_sat_" + sat.kind, lang, c=sat.concurrency, c_vram=ov.c_vram_spec,
             ratio=sat.ratio or math.nan, gain=gain)


def saturated_rule_text(c_vram: int, lang: str) -> str:
    """What the accuracy table's saturated column marks (`saturated_levels`): the saturation
    note's plateau, or a concurrency above the spec-sheet C_vram (requests, `c_vram`)."""
    return t("r_acc_sat_rule", lang, gain=f"{SATURATION_GAIN:.0%}", c_vram=c_vram)


def find_max_labels(lang: str) -> dict[str, str]:
    """The find-max chart's labels in the page's language."""
    return {k: t("r_fm_" + k, lang) for k in FIND_MAX_LABELS}


def find_max_caption(fm: FindMaxOverlay, answer: Mapping[str, object], lang: str) -> str:
    """The search's targets, probes and how it stopped."""
    # why it stopped, as meta.json says: in a code span, no backtick of its own to end it
    why = str(answer.get("stopped", "")).replace("`", "'")[:200]
    return t("r_fm_help", lang, pct=f"{fm.pct:g}", ttft=f"{fm.slo_ttft_ms:g}",
             tpot=f"{fm.slo_tpot_ms:g}", n=len(fm.probes),
             stopped=t("r_fm_converged", lang) if answer.get("converged") else f"`{why}`")


def find_max_metrics(fm: FindMaxOverlay, lang: str) -> tuple[Metric, Metric | None]:
    """The measured maximum (its bracket as help), and the predicted one with their ratio (None:
    the event model predicts none)."""
    unit = t("r_fm_unit_" + ("rate" if fm.by == "rate" else "concurrency"), lang)
    hi = fm.bracket[1]
    measured = Metric(t("r_fm_measured", lang), f"{num(fm.measured)} {unit}",
                      help=t("r_fm_bracket", lang, lo=num(fm.bracket[0]),
                             hi=num(hi) if hi is not None else "-"))
    if fm.predicted_rate_per_s is None:
        return measured, None
    return measured, Metric(t("r_fm_predicted", lang), f"{num(fm.predicted_rate_per_s)} {unit}",
                            delta=t("r_fm_ratio", lang, ratio=f"{fm.ratio:.2f}")
                            if fm.ratio is not None else None, delta_color="off")


def median_error_frame(ov: Overlay, labels: Mapping[str, str], lang: str) -> pd.DataFrame:
    """The median error of each prediction (spec sheet, calibrated) per metric."""
    return pd.DataFrame([{t("r_col_metric", lang): labels[m],
                          **{labels[s]: pct(median_abs_error(ov.ratios, s, m))
                             for s in (Predicted.SPEC_SHEET, Predicted.CALIBRATED)
                             if f"ratio_{s}" in ov.ratios}} for m in METRICS])


def ratio_frame(ov: Overlay, labels: Mapping[str, str], lang: str) -> pd.DataFrame:
    """The ratio table: metric names and column headers in the page's language."""

    def header(col: str) -> str:
        name = col.removeprefix("ratio_")
        shown = {"concurrency": labels["concurrency"], "metric": t("r_col_metric", lang),
                 "measured": t("r_measured", lang)}.get(name) or labels.get(name, name)
        return t("r_ratio_col", lang, series=shown) if col.startswith("ratio_") else shown

    view = ov.ratios.assign(metric=ov.ratios["metric"].map(lambda m: labels.get(m, m)))
    return view.rename(columns={c: header(str(c)) for c in ov.ratios.columns})


def accuracy_caption(checks: Sequence[Check], acc: RunAccuracy, calibrated: bool,
                     lang: str) -> str:
    """The scorecard's summary of these runs: rows within the upper bound, median errors."""
    return t("r_acc_summary", lang, ok=sum(c.upper_bound for c in checks), n=acc.rows,
             rate=pct(acc.upper_bound_rate), spec=pct(acc.spec_median_error),
             cal=pct(acc.calibrated_median_error) if calibrated else t("r_acc_no_cal", lang))


def accuracy_frame(checks: Sequence[Check], calibrated: bool, lang: str) -> pd.DataFrame:
    """The scorecard's table (docs/accuracy.md) of these runs; without a calibration its two
    columns would be empty, and are left out."""
    frame = pd.DataFrame([{
        t("r_acc_c_concurrency", lang): c.concurrency,
        t("r_acc_c_metric", lang): t(f"r_acc_m_{c.metric}", lang),
        t("r_acc_c_stat", lang): word_or_self("r_acc_stat_", c.stat, lang),
        t("r_acc_c_measured", lang): sig(c.measured), t("r_acc_c_spec", lang): sig(c.spec),
        t("r_acc_c_optimism", lang): sig(c.optimism),
        t("r_acc_c_calibrated", lang): sig(c.calibrated),
        t("r_acc_c_error", lang): pct(c.calibrated_error),
        t("r_acc_c_saturated", lang): t("r_acc_yes" if c.saturated else "r_acc_no", lang)}
        for c in checks])
    return frame.drop(columns=[] if calibrated
                      else [t("r_acc_c_calibrated", lang), t("r_acc_c_error", lang)])


def knob_frame(fitted: calib.Calibration, scenario: Scenario, lang: str) -> pd.DataFrame:
    """The fitted knobs beside the spec sheet's, with their spread and whether pinned."""

    def pinned(name: str) -> str:
        pin = fitted.pinned(name)
        return "-" if pin is None else t("r_pinned_yes" if pin else "r_pinned_no", lang)

    return pd.DataFrame([{t("r_col_knob", lang): t("r_knob_" + r.knob, lang),
                          t("r_col_spec", lang): knob(r.spec),
                          t("r_col_fitted", lang): knob(r.fitted),
                          t("r_col_std", lang): num(r.std), t("r_col_pinned", lang): pinned(r.knob)}
                         for r in cal_report.knob_rows(fitted, scenario)])


def error_frame(fitted: calib.Calibration, lang: str) -> pd.DataFrame:
    """The calibration's errors: spec sheet, fitted and held out, per kind of step."""
    return pd.DataFrame([{t("r_col_metric", lang): r.kind.upper(), t("r_col_spec", lang): pct(r.spec),
                          t("r_col_fitted", lang): pct(r.fitted),
                          t("r_col_held_out", lang): pct(r.held_out)}
                         for r in cal_report.error_rows(fitted)])


def report_words(fitted: calib.Calibration, lang: str) -> dict[str, str]:
    """The calibration report's words (`calibration_report.report_markdown`) in the page's
    language."""
    return {**{n: t("r_knob_" + n, lang) for n in calib.KNOBS},
            "title": t("r_report_title", lang, name=fitted.name),
            "basis": t("r_report_basis", lang, model=fitted.model, gpu=fitted.gpu,
                       inputs=fitted.inputs or "-"),
            "knob": t("r_col_knob", lang), "spec": t("r_col_spec", lang),
            "fitted": t("r_col_fitted", lang), "std": t("r_col_std", lang),
            "errors": t("r_report_errors", lang), "metric": t("r_col_metric", lang),
            "held_out": t("r_col_held_out", lang),
            "holdout": t("r_holdout", lang, method=fitted.holdout_method or "-")}


def residuals_frame(fitted: calib.Calibration, lang: str) -> pd.DataFrame:
    """Every point the calibration was fitted on: measured, spec sheet, fitted, held out."""
    return pd.DataFrame([{
        t(f"r_res_{k}", lang): v for k, v in (
            ("kind", p.kind.upper()), ("concurrency", p.concurrency),
            ("context", p.context_tokens), ("measured_ms", p.measured_ms),
            ("spec_ms", p.spec_ms), ("fitted_ms", p.fitted_ms),
            ("held_out_ms", p.held_out_ms), ("fitted_error", p.fitted_error),
            ("held_out_error", p.held_out_error))} for p in fitted.points])


def band_metrics(b: Band, lang: str) -> list[tuple[Metric, str]]:
    """The band at one concurrency: step time, TTFT and C_vram, each with its range. TTFT is
    in ms to 4 significant digits, as the accuracy table writes its (unqueued) TTFT."""
    lo, mid, hi = (float(x[0]) for x in b.step_ms)
    ttft_lo, ttft_mid, ttft_hi = (x * 1e3 for x in b.ttft_s)
    return [(Metric(t("r_unc_step", lang), f"{mid:.2f} ms",
                    help=t("r_unc_range", lang, lo=lo, hi=hi)),
             t("r_unc_range", lang, lo=lo, hi=hi)),
            (Metric(t("r_unc_ttft", lang), f"{ttft_mid:.4g} ms"),
             t("r_unc_range_ttft", lang, lo=ttft_lo, hi=ttft_hi)),
            (Metric(t("r_unc_cvram", lang), str(b.max_concurrency_vram[1])),
             t("r_unc_range_c", lang, lo=b.max_concurrency_vram[0], hi=b.max_concurrency_vram[2]))]


def band_basis(b: Band, calibration: calib.Calibration | None, lang: str) -> str:
    """What the band rests on: typical spreads, or the calibration's own (wider far from it)."""
    if calibration is None:
        basis = t("r_unc_basis_typical", lang)
    else:
        basis = t("r_unc_basis_cal_far" if b.widenings else "r_unc_basis_cal", lang,
                  name=calibration.name, step=b.spread[0], ttft=b.spread[1])
    return t("r_unc_basis", lang, basis=basis)


def sensitivity_frame(sens: Sequence[Sensitivity], lang: str) -> pd.DataFrame:
    """What moves the step time most: each input's range and the step time at its ends."""
    return pd.DataFrame([{t("r_col_input", lang): t("in_" + r.name, lang),
                          t("r_col_low", lang): num(r.low), t("r_col_high", lang): num(r.high),
                          t("r_col_out_low", lang): num(r.output_low),
                          t("r_col_out_high", lang): num(r.output_high),
                          t("r_col_swing", lang): num(r.swing)} for r in sens])


def terms_frame(terms: Sequence[Term], lang: str) -> pd.DataFrame:
    """A vLLM log's memory terms: logged, predicted, their ratio and the likely cause."""
    return pd.DataFrame([{t("r_col_term", lang): note_text(x.name, lang),
                          t("r_col_unit", lang): word_or_self("unit_", x.unit, lang),
                          t("r_col_logged", lang): x.logged,
                          t("r_col_predicted", lang): x.predicted,
                          t("r_col_ratio", lang): x.ratio,
                          t("r_col_cause", lang): note_text(x.cause, lang)} for x in terms])
