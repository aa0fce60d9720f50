"""Results: stored runs and imports as measured points on the predicted curves; their accuracy
table; calibration in one step; the uncertainty band; a vLLM startup log reconciled against
the prediction.

Draws only: numbers come from `capacity.fit.overlay`, `capacity.fit.validate`,
`capacity.fit.calibration`, `capacity.fit.uncertainty` and `capacity.fit.vllm_log`.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import pandas as pd
import streamlit as st

from app import cache
from app import measure_state as ms
from app.bootstrap import ensure_navigation
from app.i18n import overlay_chart_labels
from app.state import init_lang
from capacity.bench.storage import run_warnings as bench_run_warnings
from capacity.errors import CapacityError
from capacity.fit import calibration as calib
from capacity.fit.findmax import max_concurrency_within_slo
from capacity.fit.imports import FORMATS
from capacity.fit.measured import MeasuredPoint, run_scenario
from capacity.fit.overlay import (
    COMPARE_COLUMNS,
    METRICS,
    Overlay,
    Predicted,
    compare_table,
    filter_runs,
    measured_frame,
    median_abs_error,
    points_from_summary,
    read_upload,
    typical_lengths,
)
from capacity.fit.uncertainty import band, sensitivity
from capacity.fit.validate import run_checks, summarize
from capacity.fit.vllm_log import parse_vllm_log, reconcile
from capacity.model.roofline import StepMethod
from capacity.model.scenario import DEFAULT_GPU, DEFAULT_MODEL, Scenario
from capacity.report.i18n import MESSAGES, error_text, note_text, t

ensure_navigation()
lang = init_lang()


def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
    return t(k, lang, **kw)


def num(v: float | None) -> str:
    """A number for a table cell: 4 significant digits, '-' when there is none."""
    if v is None or not math.isfinite(v):
        return "-"
    return "0" if abs(v) < 1e-6 else f"{v:.4g}"


def knob(v: float | None) -> str:
    """A knob's value: 3 significant digits, '0' below 0.0005 (a fitted overhead of 1e-6 ms is
    none), '-' when there is none."""
    if v is None or not math.isfinite(v):
        return "-"
    return "0" if abs(v) < 5e-4 else f"{v:.3g}"


def sig(v: float | None) -> float | None:
    """A number for a numeric table cell: 4 significant digits, None when there is none."""
    return None if v is None or not math.isfinite(v) else float(f"{v:.4g}")


def pct(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.1%}"


cat = cache.catalog()
variants = cat.variant_keys()
gpus = sorted(cat.gpus)
labels = overlay_chart_labels(lang)

st.title(T("r_title"))
st.caption(T("r_intro"))

# -- where the measured points come from ------------------------------------------------------
source = st.radio(T("r_source"), ["run", "import"], horizontal=True, key="r_source",
                  format_func=lambda s: T("r_source_" + s))
points: list[MeasuredPoint] = []
failures: pd.DataFrame | None = None
series = ""
inputs_desc = ""
cal_default = "calibration"
default_model, default_gpu = DEFAULT_MODEL, DEFAULT_GPU
compare: list[tuple[str, pd.DataFrame]] = []
fit_points: list[MeasuredPoint] | None = None  # what Fit uses: every chosen run's points
find_max: dict[str, object] | None = None  # a find-max run's answer (meta.json)
fit_batch1 = False  # the run's engine decodes one sequence through other kernels (llama.cpp)
fit_desc = ""

if source == "run":
    st.subheader(T("r_runs"))
    try:
        runs, warns = ms.runs()
    except CapacityError as exc:
        st.error(T("r_error", msg=error_text(exc, lang)))
        st.stop()
    for w in warns:
        st.caption(T("r_store_warning", msg=w))
    if runs.empty:
        st.info(T("r_no_runs", root=str(ms.bench_root())))
    else:
        c1, c2, c3, c4 = st.columns(4)
        f_labels = c1.multiselect(T("r_f_label"), sorted(runs["label"].dropna().unique()),
                                  key="r_f_label", placeholder=T("choose_options"))
        f_eps = c2.multiselect(T("r_f_endpoint"), sorted(runs["base_url"].dropna().unique()),
                               key="r_f_endpoint", placeholder=T("choose_options"))
        f_models = c3.multiselect(T("r_f_model"), sorted(runs["model"].dropna().unique()),
                                  key="r_f_model", placeholder=T("choose_options"))
        days = c4.date_input(T("r_f_date"), value=(), key="r_f_date")
        since = until = None
        if isinstance(days, tuple | list) and len(days) >= 1:
            since = days[0].isoformat()
            until = (days[1] if len(days) > 1 else days[0]).isoformat()
        elif isinstance(days, dt.date):
            since = until = days.isoformat()
        shown = filter_runs(runs, labels=f_labels, endpoints=f_eps, models=f_models,
                            since=since, until=until)
        cols = ["label", "started_at", "status", "model", "gpu", "levels", "requests_ok",
                "requests_failed", "base_url", "run_id"]
        listed = shown[cols].assign(status=shown["status"].map(
            lambda v: T("status_" + v) if f"status_{v}" in MESSAGES else v))
        st.dataframe(listed.rename(columns={c: T("r_c_" + c) for c in cols}),
                     hide_index=True, width="stretch")
        ids = shown["run_id"].tolist()
        # 'label · 11-30 01:03:20': short enough for a chart legend at 1000 px, unique per second
        names = {r.run_id: f"{r.label} · {str(r.started_at)[5:19].replace('T', ' ')}"
                 for r in shown.itertuples()}
        before = st.session_state.get("r_pick")
        kept = [i for i in before or [] if i in ids]
        # the newest run on a first visit, or when a filter hid every chosen run; a choice the
        # user emptied stays empty (none is a valid state: nothing is shown or fitted)
        st.session_state["r_pick"] = kept or (ids[:1] if before is None or before else [])
        chosen = st.multiselect(T("r_pick"), ids, key="r_pick",
                                format_func=lambda i: names.get(i, i), help=T("r_pick_help"),
                                placeholder=T("choose_options"))
        if not chosen:
            st.info(T("r_pick_none"))
        else:
            row = shown[shown["run_id"] == chosen[0]].iloc[0]
            meta = ms.run_meta(str(row["dir"]))
            args = meta.get("args") or {}
            find_max = meta.get("find_max") if isinstance(meta.get("find_max"), dict) else None
            fit_batch1 = calib.batch1_for_run(meta)
            run_warnings = bench_run_warnings(meta)
            if run_warnings:  # client-bound levels, prefix-cache hits, one-burst levels...
                st.warning(T("r_run_warnings", n=len(run_warnings)) + "\n\n"
                           + "\n".join(f"- {w}" for w in run_warnings))
            pm = args.get("predict_model") or row["model"]
            default_model = pm if pm in variants else DEFAULT_MODEL
            default_gpu = args.get("gpu") if args.get("gpu") in gpus else DEFAULT_GPU
            summ = ms.levels(chosen[0])
            failures = summ
            picked = shown.set_index("run_id").loc[chosen]
            # in charts a run is its label, with its start time only where two chosen runs
            # share a label (a legend of long names was cut at the chart's edge)
            shared = {lb for lb in picked["label"] if list(picked["label"]).count(lb) > 1}
            short = {i: names[i] if lb in shared else str(lb)
                     for i, lb in zip(chosen, picked["label"], strict=True)}
            series = short[chosen[0]]
            inputs_desc = "bench run " + ", ".join(
                f"{lb}/{i}" for i, lb in zip(chosen, picked["label"], strict=True))
            # the name follows the choice: its labels, each once, in the order chosen
            cal_default = "_".join(dict.fromkeys(str(lb) for lb in picked["label"]))[:80]
            points = points_from_summary(summ, model=default_model, gpu=default_gpu,
                                         source=chosen[0])
            fit_points = [*points, *[p for i in chosen[1:] for p in points_from_summary(
                ms.levels(i), model=default_model, gpu=default_gpu, source=i)]]
            fit_desc = "; ".join(names.get(i, i) for i in chosen)
            if summ.empty:
                st.warning(T("r_no_levels"))
            compare = [(short[i], ms.levels(i)) for i in chosen]
else:
    st.subheader(T("r_import"))
    st.caption(T("r_import_help"))
    c1, c2 = st.columns([3, 1])
    up = c1.file_uploader(T("r_upload"), type=["csv", "json", "jsonl"], key="r_upload")
    fmt = c2.selectbox(T("r_format"), ["auto", *FORMATS], key="r_format")
    conc = c2.number_input(T("r_aiperf_c"), min_value=0.0, value=0.0, step=1.0,
                           key="r_aiperf_c", help=T("r_aiperf_c_help"))
    if up is not None:
        try:
            points = read_upload(up.name, up.getvalue(), None if fmt == "auto" else fmt,
                                 concurrency=conc or None)
        except CapacityError as exc:
            st.error(T("r_error", msg=error_text(exc, lang)))
        else:
            series = up.name
            inputs_desc = f"import {up.name}"
            cal_default = "".join(c if c.isalnum() or c in "-_." else "-"
                                  for c in Path(up.name).stem) or "import"
            st.success(T("r_imported", n=len(points), name=up.name))

# -- what to predict it with ------------------------------------------------------------------
st.subheader(T("r_predict"))
if st.session_state.get("r_model_for") != series:  # a new source brings its own defaults
    st.session_state["r_model_for"] = series
    st.session_state["r_model"] = default_model
    st.session_state["r_gpu"] = default_gpu
c1, c2, c3, c4 = st.columns([3, 2, 1, 3])
c1.selectbox(T("r_model"), variants, key="r_model")
c2.selectbox(T("r_gpu"), gpus, key="r_gpu")
n_gpus = int(c3.number_input(T("r_gpu_count"), min_value=1, max_value=64, value=1, key="r_gpus"))
fitted: calib.Calibration | None = st.session_state.get(ms.FITTED)
cal_options = ["", *ms.saved_calibrations()]
if fitted is not None:
    cal_options.append("__fitted__")
if (pending := st.session_state.pop("r_cal_pending", None)) in cal_options:
    st.session_state["r_calibration"] = pending
cal_choice = c4.selectbox(T("r_calibration"), cal_options, key="r_calibration",
                          format_func=lambda n: T("r_cal_none") if n == "" else
                          (T("r_cal_fitted", name=fitted.name) if n == "__fitted__"
                           and fitted is not None else n))
calibration: calib.Calibration | None = None
try:
    if cal_choice == "__fitted__":
        calibration = fitted
    elif cal_choice:
        calibration = calib.load_named(cal_choice)
except CapacityError as exc:
    st.error(T("r_error", msg=error_text(exc, lang)))

sweeps = ms.reference_sweeps()
ref_names = [s.label for s in sweeps]
ref_by_label = {s.label: s for s in sweeps}


def ref_text(label: str) -> str:
    """A published sweep's name in the page's language (the option itself stays its label)."""
    s = ref_by_label[label]
    return T("r_ref_label", model=s.model_name, fmt=s.weight_format.split(" ")[0],
             gpu=s.gpu_name, engine=s.engine, p=f"{s.prompt_tokens:g}",
             o=f"{s.output_tokens:g}")


refs = st.multiselect(T("r_reference"), ref_names, key="r_reference", help=T("r_reference_help"),
                      format_func=ref_text, placeholder=T("choose_options"))
extra = pd.concat([measured_frame(s.points, f"{T('r_published')}: {ref_text(s.label)}")
                   for s in sweeps if s.label in refs] or [pd.DataFrame()], ignore_index=True)
if source == "run" and len(compare) > 1:
    extra = pd.concat([extra, *[measured_frame(points_from_summary(df), name)
                                for name, df in compare[1:]]], ignore_index=True)

if not points:
    if not refs:
        st.info(T("r_nothing"))
        st.stop()
    first = next(s for s in sweeps if s.label == refs[0])
    points = list(first.points)
    series = f"{T('r_published')}: {first.label}"
    inputs_desc = "data/reference/published.csv"
    cal_default = "published"
    extra = extra[extra["series"] != series] if not extra.empty else extra

scenario: Scenario | None = None
ov: Overlay | None = None
try:
    prompt, output = typical_lengths(points)
    scenario = run_scenario(st.session_state["r_model"], st.session_state["r_gpu"],
                            prompt_tokens=prompt, output_tokens=output, n_gpus=n_gpus,
                            catalog=cat)
    ov, chart_specs, ratio_spec = ms.overlay_view(
        tuple(points), st.session_state["r_model"], st.session_state["r_gpu"], n_gpus,
        calibration, failures, extra, series, labels,
        # a concurrency search's answer is a line on these charts (a rate's is not: their x
        # axis is concurrency)
        max_concurrency_within_slo(find_max))
except CapacityError as exc:
    st.error(T("r_error", msg=error_text(exc, lang)))
    st.stop()
assert ov is not None and scenario is not None

# -- the overlay ------------------------------------------------------------------------------
st.subheader(T("r_overlay"))
st.caption(T("r_overlay_help", prompt=ov.prompt_tokens, output=ov.output_tokens,
             model=scenario.variant.key, gpu=scenario.gpu.name, n=scenario.n_gpus,
             cal=ov.calibration or T("r_cal_none")))
st.caption(T("r_load_" + ov.load))
for w in scenario.warnings:
    st.caption(T("r_note", msg=note_text(w, lang)))
grid = st.columns(2)
for i, metric in enumerate(METRICS):
    with grid[i % 2]:
        st.markdown(f"**{labels[metric]}**")
        st.vega_lite_chart(spec=chart_specs[metric], width="stretch", height=380)
sat = ov.saturation
if sat.concurrency is None:
    st.info(T("r_sat_none", c_vram=ov.c_vram_spec))
else:
    st.info(T("r_sat_" + sat.kind, c=sat.concurrency, c_vram=ov.c_vram_spec,
              ratio=sat.ratio or math.nan))

# -- a find-max run: its measured maximum beside the predicted one -------------------------
if find_max is not None:
    st.subheader(T("r_fm_title"))
    speedup = float(st.number_input(T("r_fm_speedup"), min_value=0.01, max_value=10_000.0,
                                    value=1.0, key="r_fm_speedup", help=T("r_fm_speedup_help")))
    fm_labels = {k: T("r_fm_" + k) for k in ("load", "ttft", "verdict", "passed", "failed",
                                              "measured", "predicted", "target")}
    try:
        fm_ov, fm_spec = ms.find_max_view(
            json.dumps(find_max, default=str), st.session_state["r_model"],
            st.session_state["r_gpu"], n_gpus, max(1, round(ov.prompt_tokens)),
            max(1, round(ov.output_tokens)), speedup,
            fm_labels)
    except CapacityError as exc:
        st.error(T("r_error", msg=error_text(exc, lang)))
    else:
        st.caption(T("r_fm_help", pct=f"{fm_ov.pct:g}", ttft=f"{fm_ov.slo_ttft_ms:g}",
                     tpot=f"{fm_ov.slo_tpot_ms:g}", n=len(fm_ov.probes),
                     stopped=T("r_fm_converged") if find_max.get("converged")
                     else f"`{find_max.get('stopped', '')}`"))
        unit = T("r_fm_unit_" + ("rate" if fm_ov.by == "rate" else "concurrency"))
        m1, m2 = st.columns(2)
        hi = fm_ov.bracket[1]
        m1.metric(T("r_fm_measured"), f"{num(fm_ov.measured)} {unit}",
                  help=T("r_fm_bracket", lo=num(fm_ov.bracket[0]),
                         hi=num(hi) if hi is not None else "-"))
        if fm_ov.predicted_rate_per_s is None:
            m2.info(T("r_fm_no_prediction"))
        else:
            m2.metric(T("r_fm_predicted"), f"{num(fm_ov.predicted_rate_per_s)} {unit}",
                      delta=T("r_fm_ratio", ratio=f"{fm_ov.ratio:.2f}")
                      if fm_ov.ratio is not None else None, delta_color="off")
        st.vega_lite_chart(spec=fm_spec, width="stretch", height=300)

st.markdown(f"**{T('r_ratio')}**")
st.vega_lite_chart(spec=ratio_spec, width="stretch", height=300)
med_rows = []
for m in METRICS:
    med_rows.append({T("r_col_metric"): labels[m],
                     **{labels[s]: pct(median_abs_error(ov.ratios, s, m))
                        for s in (Predicted.SPEC_SHEET, Predicted.CALIBRATED)
                        if f"ratio_{s}" in ov.ratios}})
st.caption(T("r_median_err"))
st.dataframe(pd.DataFrame(med_rows), hide_index=True, width="stretch")


def ratio_header(col: str) -> str:
    """A column of the ratio table in the page's language."""
    name = col.removeprefix("ratio_")
    shown = {"concurrency": labels["concurrency"], "metric": T("r_col_metric"),
             "measured": T("r_measured")}.get(name) or labels.get(name, name)
    return T("r_ratio_col", series=shown) if col.startswith("ratio_") else shown


with st.expander(T("r_ratio_table")):
    ratio_view = ov.ratios.assign(metric=ov.ratios["metric"].map(lambda m: labels.get(m, m)))
    st.dataframe(ratio_view.rename(columns={c: ratio_header(str(c)) for c in ov.ratios.columns}),
                 hide_index=True, width="stretch")
if len(compare) > 1:
    st.markdown(f"**{T('r_compare')}**")
    st.dataframe(compare_table(compare, {c: T("r_cmp_" + c)
                                         for c in ("concurrency", *COMPARE_COLUMNS)}),
                 hide_index=True, width="stretch")

# -- accuracy on these runs (the scorecard's table, docs/accuracy.md) ------------------------
st.subheader(T("r_accuracy"))
st.caption(T("r_accuracy_help"))
try:
    checks = run_checks(points, scenario, calibration)
except CapacityError as exc:
    st.error(T("r_error", msg=error_text(exc, lang)))
else:
    acc = summarize(checks)
    st.caption(T("r_acc_summary", ok=sum(c.upper_bound for c in checks), n=acc.rows,
                 rate=pct(acc.upper_bound_rate), spec=pct(acc.spec_median_error),
                 cal=pct(acc.calibrated_median_error) if calibration is not None
                 else T("r_acc_no_cal")))
    st.dataframe(pd.DataFrame([{
        T("r_acc_c_concurrency"): c.concurrency, T("r_acc_c_metric"): T(f"r_acc_m_{c.metric}"),
        T("r_acc_c_stat"): T(f"r_acc_stat_{c.stat}") if f"r_acc_stat_{c.stat}" in MESSAGES
        else c.stat,
        T("r_acc_c_measured"): sig(c.measured), T("r_acc_c_spec"): sig(c.spec),
        T("r_acc_c_optimism"): sig(c.optimism), T("r_acc_c_calibrated"): sig(c.calibrated),
        T("r_acc_c_error"): pct(c.calibrated_error),
        T("r_acc_c_saturated"): T("r_acc_yes" if c.saturated else "r_acc_no")}
        for c in checks]).drop(  # without a calibration its two columns would be empty
        columns=[] if calibration is not None else [T("r_acc_c_calibrated"), T("r_acc_c_error")]),
        hide_index=True, width="stretch")

# -- calibration in one step ------------------------------------------------------------------
st.subheader(T("r_calibrate"))
st.caption(T("r_calibrate_help"))
c1, c2, c3 = st.columns([2, 1, 1])
if st.session_state.get("r_cal_name_for") != cal_default:  # a new choice names it anew
    st.session_state["r_cal_name_for"] = cal_default
    st.session_state["r_cal_name"] = cal_default
cal_name = c1.text_input(T("r_cal_name"), key="r_cal_name")
c1.caption(T("r_fit_on", runs=fit_desc or series))
if fit_batch1:
    c1.caption(T("r_fit_batch1"))
if c2.button(T("r_fit"), key="r_fit", type="primary"):
    try:
        calib.check_name(cal_name)  # a name, never a path (docs/reliability.md)
        # the operator step (F4b): the knobs belong to the GPU and engine (docs/calibration.md)
        st.session_state[ms.FITTED] = calib.fit(
            fit_points if fit_points is not None else points,
            scenario.with_(step_method=StepMethod.OPERATOR.value), name=cal_name,
            inputs=inputs_desc, batch1=fit_batch1)
    except CapacityError as exc:
        st.error(T("r_error", msg=error_text(exc, lang)))
    else:
        st.session_state["r_cal_pending"] = "__fitted__"
        st.rerun()
fitted = st.session_state.get(ms.FITTED)
if isinstance(fitted, calib.Calibration):
    if c3.button(T("r_save"), key="r_save"):
        try:
            path = calib.save_named(fitted, fitted.name, ms.calibrations_dir())
        except (CapacityError, OSError) as exc:
            st.error(T("r_error", msg=error_text(exc, lang)))
        else:
            st.success(T("r_saved", path=str(path)))
    knob_words = {n: T("r_knob_" + n) for n in calib.KNOBS}
    st.markdown(f"**{T('r_knobs', name=fitted.name)}**")
    if fitted.step_method == StepMethod.OPERATOR:
        st.caption(T("r_fit_method"))
    st.dataframe(pd.DataFrame([{T("r_col_knob"): knob_words[r.knob], T("r_col_spec"): knob(r.spec),
                                T("r_col_fitted"): knob(r.fitted), T("r_col_std"): num(r.std),
                                T("r_col_pinned"): "-" if (pin := fitted.pinned(r.knob)) is None
                                else T("r_pinned_yes" if pin else "r_pinned_no")}
                               for r in calib.knob_rows(fitted, scenario)]),
                 hide_index=True, width="stretch")
    st.dataframe(pd.DataFrame([{T("r_col_metric"): r.kind.upper(), T("r_col_spec"): pct(r.spec),
                                T("r_col_fitted"): pct(r.fitted),
                                T("r_col_held_out"): pct(r.held_out)}
                               for r in calib.error_rows(fitted)]),
                 hide_index=True, width="stretch")
    words = {**knob_words, "title": T("r_report_title", name=fitted.name),
             "basis": T("r_report_basis", model=fitted.model, gpu=fitted.gpu,
                        inputs=fitted.inputs or "-"),
             "knob": T("r_col_knob"), "spec": T("r_col_spec"), "fitted": T("r_col_fitted"),
             "std": T("r_col_std"), "errors": T("r_report_errors"), "metric": T("r_col_metric"),
             "held_out": T("r_col_held_out"),
             "holdout": T("r_holdout", method=fitted.holdout_method or "-")}
    e1, e2 = st.columns(2)
    e1.download_button(T("r_export_md"), calib.report_markdown(fitted, scenario, words=words),
                       file_name=f"{fitted.name}.md", mime="text/markdown", key="r_export_md")
    e2.download_button(T("r_export_csv"), calib.report_csv(fitted, scenario),
                       file_name=f"{fitted.name}.csv", mime="text/csv", key="r_export_csv")
    st.caption(T("r_holdout", method=fitted.holdout_method or "-"))
    for n in fitted.notes:
        st.caption(T("r_note", msg=note_text(n, lang)))
    with st.expander(T("r_residuals")):
        st.dataframe(pd.DataFrame([{
            T(f"r_res_{k}"): v for k, v in (
                ("kind", p.kind.upper()), ("concurrency", p.concurrency),
                ("context", p.context_tokens), ("measured_ms", p.measured_ms),
                ("spec_ms", p.spec_ms), ("fitted_ms", p.fitted_ms),
                ("held_out_ms", p.held_out_ms), ("fitted_error", p.fitted_error),
                ("held_out_error", p.held_out_error))} for p in fitted.points]),
            hide_index=True, width="stretch")

# -- uncertainty ------------------------------------------------------------------------------
st.subheader(T("r_uncertainty"))
c_at = st.number_input(T("r_unc_c"), min_value=1, max_value=100000,
                       value=int(max(p.concurrency for p in points)), key="r_unc_c")
try:
    b = band(scenario, [float(c_at)], calibration)
    lo, mid, hi = (float(x[0]) for x in b.step_ms)
    cols = st.columns(3)
    cols[0].metric(T("r_unc_step"), f"{mid:.2f} ms", help=T("r_unc_range", lo=lo, hi=hi))
    cols[0].caption(T("r_unc_range", lo=lo, hi=hi))
    cols[1].metric(T("r_unc_ttft"), f"{b.ttft_s[1]:.3f} s")
    cols[1].caption(T("r_unc_range_s", lo=b.ttft_s[0], hi=b.ttft_s[2]))
    cols[2].metric(T("r_unc_cvram"), str(b.max_concurrency_vram[1]))
    cols[2].caption(T("r_unc_range_c", lo=b.max_concurrency_vram[0],
                      hi=b.max_concurrency_vram[2]))
    if calibration is None:
        basis = T("r_unc_basis_typical")
    else:
        basis = T("r_unc_basis_cal_far" if b.widenings else "r_unc_basis_cal",
                  name=calibration.name, step=b.spread[0], ttft=b.spread[1])
    st.caption(T("r_unc_basis", basis=basis))
    base = scenario if calibration is None else calib.apply(calibration, scenario)
    sens = sensitivity(base, float(c_at), "step_ms")
    st.markdown(f"**{T('r_sens', top=T('in_' + sens[0].name))}**")
    st.dataframe(pd.DataFrame([{T("r_col_input"): T("in_" + r.name), T("r_col_low"): num(r.low),
                                T("r_col_high"): num(r.high),
                                T("r_col_out_low"): num(r.output_low),
                                T("r_col_out_high"): num(r.output_high),
                                T("r_col_swing"): num(r.swing)}
                               for r in sens]), hide_index=True, width="stretch")
except CapacityError as exc:
    st.error(T("r_error", msg=error_text(exc, lang)))

# -- vLLM startup log -------------------------------------------------------------------------
st.subheader(T("r_vllm"))
log_text = st.text_area(T("r_vllm_paste"), key="r_vllm", height=140, help=T("r_vllm_help"))
if log_text.strip():
    try:
        parsed = parse_vllm_log(log_text)
        compared, terms = reconcile(parsed, scenario)
    except CapacityError as exc:
        st.error(T("r_error", msg=error_text(exc, lang)))
    else:
        st.caption(T("r_vllm_settings", util=compared.util, ctx=compared.context_tokens,
                     found=", ".join(f"`{f}`" for f in parsed.found) or "-"))
        st.dataframe(pd.DataFrame([{T("r_col_term"): note_text(x.name, lang),
                                    T("r_col_unit"): T("unit_" + x.unit)
                                    if f"unit_{x.unit}" in MESSAGES else x.unit,
                                    T("r_col_logged"): x.logged,
                                    T("r_col_predicted"): x.predicted,
                                    T("r_col_ratio"): x.ratio,
                                    T("r_col_cause"): note_text(x.cause, lang)}
                                   for x in terms]), hide_index=True, width="stretch")
