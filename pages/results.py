"""Results: stored runs and imports as measured points on the predicted curves; their accuracy
table; calibration in one step; the uncertainty band; a vLLM startup log reconciled against
the prediction.

Draws only: numbers come from `capacity.fit.overlay`, `capacity.fit.validate`,
`capacity.fit.calibration`, `capacity.fit.uncertainty` and `capacity.fit.vllm_log`; the points
chosen and the choices kept are `app.results_state`, the words and tables `app.results_view`.
"""

from __future__ import annotations

import json

import streamlit as st

from app import auth, cache
from app import measure_state as ms
from app import results_state as rs
from app import results_view as view
from app.bootstrap import ensure_navigation
from app.format import markdown_plain, plain_error
from app.i18n import overlay_chart_labels
from app.results_inputs import imported_points, stored_runs
from app.state import init_lang
from capacity.access import Right
from capacity.errors import CapacityError
from capacity.fit import calibration as calib
from capacity.fit import calibration_report as cal_report
from capacity.fit import calibration_store as cal_store
from capacity.fit.findmax import max_concurrency_within_slo
from capacity.fit.measured import decode_context_tokens, run_scenario
from capacity.fit.overlay import COMPARE_COLUMNS, METRICS, compare_table, typical_lengths
from capacity.fit.run_accuracy import run_checks, summarize
from capacity.fit.uncertainty import band, sensitivity
from capacity.fit.validate_predict import spec_sheet
from capacity.fit.vllm_log import parse_vllm_log, reconcile
from capacity.model.roofline import StepMethod
from capacity.report.i18n import engine_label, note_text, t

ensure_navigation()
lang = init_lang()


def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
    return t(k, lang, **kw)


cat = cache.catalog()
variants = cat.variant_keys()
gpus = sorted(cat.gpus)
labels = overlay_chart_labels(lang)

st.title(T("r_title"))
st.caption(T("r_intro"))

# -- where the measured points come from ------------------------------------------------------
source = st.radio(T("r_source"), ["run", "import"], horizontal=True, key="r_source",
                  format_func=lambda s: T("r_source_" + s))
m = rs.Measured()

if source == "run":
    st.subheader(T("r_runs"))
    m = stored_runs(variants, gpus, lang, auth.current())  # the runs this user may see
else:
    st.subheader(T("r_import"))
    st.caption(T("r_import_help"))
    m = imported_points(lang)

# -- what to predict it with ------------------------------------------------------------------
st.subheader(T("r_predict"))
rs.reset_for_source(m.series, m.model, m.gpu)  # a new source brings its own defaults
c1, c2, c3, c4 = st.columns([3, 2, 1, 3])
c1.selectbox(T("r_model"), variants, key="r_model")
c2.selectbox(T("r_gpu"), gpus, key="r_gpu")
n_gpus = int(c3.number_input(T("r_gpu_count"), min_value=1, max_value=64, value=1, key="r_gpus"))
fitted: calib.Calibration | None = st.session_state.get(ms.FITTED)
cal_choice = c4.selectbox(T("r_calibration"), rs.calibration_options(fitted), key="r_calibration",
                          format_func=lambda n: T("r_cal_none") if n == "" else
                          (T("r_cal_fitted", name=fitted.name) if n == rs.FITTED_CHOICE
                           and fitted is not None else n))
calibration: calib.Calibration | None = None
try:
    calibration = rs.chosen_calibration(cal_choice, fitted)
except CapacityError as exc:
    st.error(T("r_error", msg=plain_error(exc, lang)))

sweeps = ms.reference_sweeps()
ref_by_label = {s.label: s for s in sweeps}
refs = st.multiselect(T("r_reference"), list(ref_by_label), key="r_reference",
                      help=T("r_reference_help"),
                      format_func=lambda lb: view.reference_text(ref_by_label[lb], lang),
                      placeholder=T("choose_options"))
extra = rs.extra_series([(view.published_series(s, lang), s.points)
                         for s in sweeps if s.label in refs], m.compare)

if not m.points:
    if not refs:
        st.info(T("r_nothing"))
        st.stop()
    m = rs.from_reference(ref_by_label[refs[0]], view.published_series(ref_by_label[refs[0]], lang))
    extra = extra[extra["series"] != m.series] if not extra.empty else extra

try:
    prompt, output = typical_lengths(m.points)
    scenario = run_scenario(st.session_state["r_model"], st.session_state["r_gpu"],
                            prompt_tokens=prompt, output_tokens=output, n_gpus=n_gpus,
                            catalog=cat)
    ov, chart_specs, ratio_spec = ms.overlay_view(
        tuple(m.points), st.session_state["r_model"], st.session_state["r_gpu"], n_gpus,
        calibration, m.failures, extra, m.series, labels,
        # a concurrency search's answer is a line on these charts (a rate's is not: their x
        # axis is concurrency)
        max_concurrency_within_slo(m.find_max), engine=m.engine)
except CapacityError as exc:
    st.error(T("r_error", msg=plain_error(exc, lang)))
    st.stop()

# -- the overlay ------------------------------------------------------------------------------
st.subheader(T("r_overlay"))
st.caption(view.overlay_caption(ov, scenario, lang))
st.caption(T("r_load_" + ov.load) + ("" if ov.load == "none" else " " + T(
    "r_load_engine", engine=engine_label(m.engine, lang))))
for w in scenario.warnings:
    st.caption(T("r_note", msg=note_text(w, lang)))
grid = st.columns(2)
for i, metric in enumerate(METRICS):
    with grid[i % 2]:
        st.markdown(f"**{labels[metric]}**")
        st.vega_lite_chart(spec=chart_specs[metric], width="stretch", height=380)
st.info(view.saturation_text(ov, lang))

# -- a find-max run: its measured maximum beside the predicted one -------------------------
if m.find_max is not None:
    st.subheader(T("r_fm_title"))
    speedup = float(st.number_input(T("r_fm_speedup"), min_value=0.01, max_value=10_000.0,
                                    value=1.0, key="r_fm_speedup", help=T("r_fm_speedup_help")))
    try:
        fm_ov, fm_spec = ms.find_max_view(
            json.dumps(m.find_max, default=str), st.session_state["r_model"],
            st.session_state["r_gpu"], n_gpus, max(1, round(ov.prompt_tokens)),
            max(1, round(ov.output_tokens)), speedup, view.find_max_labels(lang))
    except CapacityError as exc:
        st.error(T("r_error", msg=plain_error(exc, lang)))
    else:
        st.caption(view.find_max_caption(fm_ov, m.find_max, lang))
        m1, m2 = st.columns(2)
        measured, predicted = view.find_max_metrics(fm_ov, lang)
        m1.metric(measured.label, measured.value, help=measured.help)
        if predicted is None:
            m2.info(T("r_fm_no_prediction"))
        else:
            m2.metric(predicted.label, predicted.value, delta=predicted.delta, delta_color="off")
        st.vega_lite_chart(spec=fm_spec, width="stretch", height=300)

st.markdown(f"**{T('r_ratio')}**")
st.vega_lite_chart(spec=ratio_spec, width="stretch", height=300)
st.caption(T("r_median_err"))
st.dataframe(view.median_error_frame(ov, labels, lang), hide_index=True, width="stretch")
with st.expander(T("r_ratio_table")):
    st.dataframe(view.ratio_frame(ov, labels, lang), hide_index=True, width="stretch",
                 placeholder="-")  # the roofline column: only the metrics it predicts
if len(m.compare) > 1:
    st.markdown(f"**{T('r_compare')}**")
    st.dataframe(compare_table(m.compare, {c: T("r_cmp_" + c)
                                           for c in ("concurrency", *COMPARE_COLUMNS)}),
                 hide_index=True, width="stretch")

# -- accuracy on these runs (the scorecard's table, docs/accuracy.md) ------------------------
st.subheader(T("r_accuracy"))
st.caption(T("r_accuracy_help"))
try:
    checks = run_checks(m.points, scenario, calibration)
except CapacityError as exc:
    st.error(T("r_error", msg=plain_error(exc, lang)))
else:
    st.caption(view.accuracy_caption(checks, summarize(checks), calibration is not None, lang))
    st.caption(view.saturated_rule_text(ov.c_vram_spec, lang))
    st.dataframe(view.accuracy_frame(checks, calibration is not None, lang), hide_index=True,
                 width="stretch")

# -- calibration in one step ------------------------------------------------------------------
st.subheader(T("r_calibrate"))
st.caption(T("r_calibrate_help"))
c1, c2, c3 = st.columns([2, 1, 1])
rs.reset_calibration_name(m.cal_default)  # a new choice names it anew
cal_name = c1.text_input(T("r_cal_name"), key="r_cal_name")
c1.caption(T("r_fit_on", runs=markdown_plain(m.fit_desc or m.series)))  # labels of meta.json
if m.fit_batch1:
    c1.caption(T("r_fit_batch1"))
if c2.button(T("r_fit"), key="r_fit", type="primary"):
    try:
        cal_store.check_name(cal_name)  # a name, never a path (docs/reliability.md)
        rs.check_fittable(m)  # a sped-up simulator's times are no GPU's (as calibrate refuses)
        # the operator step (F4b): the knobs belong to the GPU and engine (docs/calibration.md)
        rs.keep_fitted(calib.fit(
            m.fit_points if m.fit_points is not None else m.points,
            scenario.with_(step_method=StepMethod.OPERATOR.value), name=cal_name,
            inputs=m.inputs_desc, batch1=m.fit_batch1))
    except CapacityError as exc:
        st.error(T("r_error", msg=plain_error(exc, lang)))
    else:
        st.rerun()
fitted = st.session_state.get(ms.FITTED)
if isinstance(fitted, calib.Calibration):
    can_save = auth.allowed(Right.SAVE_CALIBRATION)  # a viewer fits, but saves nothing
    auth.read_only_note(Right.SAVE_CALIBRATION, lang)
    save_as = st.session_state.get(rs.SAVE_PENDING)
    overwrite = save_as is not None and save_as == cal_name
    if save_as is not None and not overwrite:
        st.session_state.pop(rs.SAVE_PENDING)  # the name changed since: ask again on Save
    if overwrite:
        st.warning(T("r_save_exists", name=cal_name))
        o1, o2 = st.columns(2)
        do_save = o1.button(T("r_save_overwrite"), key="r_save_overwrite", disabled=not can_save)
        if o2.button(T("r_save_cancel"), key="r_save_cancel"):
            st.session_state.pop(rs.SAVE_PENDING)
            st.rerun()
    else:
        do_save = c3.button(T("r_save"), key="r_save", disabled=not can_save)
    if do_save and not auth.refused(Right.SAVE_CALIBRATION, lang):
        try:
            path = rs.save_fitted(fitted, cal_name, ms.calibrations_dir(), overwrite=overwrite)
        except (CapacityError, OSError) as exc:
            st.error(T("r_error", msg=plain_error(exc, lang)))
        else:  # saved (its new name shown everywhere after the rerun), or a name to ask about
            if path is not None:
                st.session_state[rs.SAVED_TO] = str(path)
            st.rerun()
    if (saved_to := st.session_state.pop(rs.SAVED_TO, None)) is not None:
        st.success(T("r_saved", path=saved_to))
    st.markdown(f"**{T('r_knobs', name=fitted.name)}**")
    if fitted.step_method == StepMethod.OPERATOR:
        st.caption(T("r_fit_method"))
    st.dataframe(view.knob_frame(fitted, scenario, lang), hide_index=True, width="stretch")
    st.dataframe(view.error_frame(fitted, lang), hide_index=True, width="stretch")
    e1, e2 = st.columns(2)
    e1.download_button(T("r_export_md"), cal_report.report_markdown(
        fitted, scenario, words=view.report_words(fitted, lang)),
        file_name=f"{fitted.name}.md", mime="text/markdown", key="r_export_md")
    e2.download_button(T("r_export_csv"), cal_report.report_csv(fitted, scenario),
                       file_name=f"{fitted.name}.csv", mime="text/csv", key="r_export_csv")
    st.caption(T("r_holdout", method=fitted.holdout_method or "-"))
    for n in fitted.notes:
        st.caption(T("r_note", msg=note_text(n, lang)))
    with st.expander(T("r_residuals")):
        st.dataframe(view.residuals_frame(fitted, lang), hide_index=True, width="stretch")

# -- uncertainty ------------------------------------------------------------------------------
# around the prediction the rest of the page shows: the spec sheet (the overlay's dashed curve,
# the banner's C_vram, the accuracy table), the chosen calibration applied to it as the overlay
# applies it
st.subheader(T("r_uncertainty"))
c_at = st.number_input(T("r_unc_c"), min_value=1, max_value=100000,
                       value=int(max(p.concurrency for p in m.points)), key="r_unc_c")
try:
    page_basis = spec_sheet(scenario)
    # the step at the context a request holds on average while decoding, as the table and the
    # charts predict it (at the full context it read 13.54 ms beside their 13.44 at C = 64)
    b = band(page_basis, [float(c_at)], calibration,
             step_context_tokens=decode_context_tokens(prompt, output))
    for col, (metric, rng) in zip(st.columns(3), view.band_metrics(b, lang), strict=True):
        col.metric(metric.label, metric.value, help=metric.help)
        col.caption(rng)
    st.caption(view.band_basis(b, calibration, lang))
    base = page_basis if calibration is None else calib.apply(calibration, page_basis)
    sens = sensitivity(base, float(c_at), "step_ms")
    st.markdown(f"**{T('r_sens', top=T('in_' + sens[0].name))}**")
    st.caption(T("r_sens_help"))
    st.dataframe(view.sensitivity_frame(sens, lang), hide_index=True, width="stretch")
except CapacityError as exc:
    st.error(T("r_error", msg=plain_error(exc, lang)))

# -- vLLM startup log -------------------------------------------------------------------------
st.subheader(T("r_vllm"))
log_text = st.text_area(T("r_vllm_paste"), key="r_vllm", height=140, help=T("r_vllm_help"))
if log_text.strip():
    try:
        parsed = parse_vllm_log(log_text)
        compared, terms = reconcile(parsed, scenario)
    except CapacityError as exc:
        st.error(T("r_error", msg=plain_error(exc, lang)))
    else:
        st.caption(T("r_vllm_settings", util=compared.util, ctx=compared.context_tokens,
                     found=", ".join(f"`{f}`" for f in parsed.found) or "-"))
        st.dataframe(view.terms_frame(terms, lang), hide_index=True, width="stretch")
