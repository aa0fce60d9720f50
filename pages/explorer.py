"""Explorer: one deployment what-if. Inputs -> verdict per constraint -> curves -> table -> math.

Draws only: every number comes from `capacity/` through `app.cache`; the words, figures and
tables are `app.explorer_view` and `app.explorer_tables`, the inputs' state `app.state`.
"""

from __future__ import annotations

import streamlit as st

from app import cache
from app import explorer_view as view
from app.bootstrap import ensure_navigation
from app.explorer_inputs import engine_knob_inputs, main_inputs, sidebar_inputs
from app.format import markdown_plain, tokens_label
from app.i18n import chart_labels
from app.layout import metric_row, panel
from app.state import (
    apply_relief,
    from_widgets,
    init_explorer,
    init_lang,
    key,
    pin,
    pinned_state,
    scenario_spare,
    set_context,
    unpin,
    use_concurrency_as_load,
    write_url,
)
from capacity.catalog.engines import DEFAULT_ENGINE
from capacity.errors import CapacityError
from capacity.report.explain import Detail, Status
from capacity.report.i18n import engine_label, error_text, note_text, t

ensure_navigation()
lang = init_lang()


def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
    return t(k, lang, **kw)


try:
    catalog = cache.catalog()
except CapacityError as exc:
    st.error(T("err_catalog", msg=error_text(exc, lang)))
    st.stop()
for catalog_warning in catalog.warnings:  # a bad custom file, skipped: name it, to be fixed
    st.warning(markdown_plain(catalog_warning))  # it quotes the file: plain text

notices = init_explorer(catalog)
st.session_state.setdefault("ex_c_max", max(1024, int(st.session_state[key("c")])))

st.title(T("nav_explorer"))
if notices:
    st.warning(T("notice_title") + "\n\n" + "\n".join(f"- {note_text(n, lang)}" for n in notices))

# ---- inputs: the main ones at the top, the rest in the sidebar (app.explorer_inputs) --------
model, tp_moved = main_inputs(catalog, lang)
sidebar_inputs(catalog, lang)

state = from_widgets(lang)
write_url(state)
if tp_moved is not None:
    st.info(T("tp_moved", old=tp_moved[0], new=tp_moved[1], n=state.gpus,
              model=model.name), icon=":material/swap_horiz:")

try:
    scenario = state.scenario(catalog)
    result = cache.explorer_result(state)  # the charts' specs come after the verdicts
except CapacityError as exc:
    st.error(T("err_inputs", msg=error_text(exc, lang)))
    st.stop()

ex = result.explanation
for w in scenario.warnings:
    st.warning(T("warn_scenario", msg=note_text(w, lang)))
    if getattr(w, "code", "") == "long_context":  # the fix, one click away
        st.button(T("fix_long_context", limit=f"{model.max_context_tokens:,}"),
                  key="fix_long_context", on_click=set_context, args=(model.max_context_tokens,),
                  icon=":material/arrow_forward:")

# ---- headline -------------------------------------------------------------------------------
st.subheader(T("headline", c=f"{state.c:,}", ctx=tokens_label(state.ctx), n=state.gpus,
               gpu=catalog.gpus[state.gpu].name
               + (T("headline_spare", n=scenario_spare(state)) if state.spare else "")))
with st.container(key="overall"):
    st.markdown(view.overall_markdown(ex, lang))
# content-wide metrics that wrap onto a second line on a narrow page, never cut off
metric_row(view.key_metrics(ex, state, scenario.paid_gpus, lang), key="key_numbers")

unc = cache.uncertainty(state)
st.caption(view.ttft_caption(state, lang))
# the engine's scheduling under load, with its knobs: a what-if of its own, so it opens only
# when an engine or a knob was chosen for it
with st.expander(T("sec_load", engine=engine_label(state.engine, lang)),
                 expanded=state.engine != DEFAULT_ENGINE or view.knobs_set(state)):
    engine_knob_inputs(state, scenario, lang)
    try:
        load = cache.load_view(state)
    except CapacityError as exc:
        st.warning(T("err_inputs", msg=error_text(exc, lang)), icon=":material/edit:")
    else:
        panel(view.load_panel(load, state, lang), numbers_key="load_numbers", title=False)
# ---- prefix caching (issue 12): only when a shared prefix is set ----------------------------
if state.prefix > 0:
    with st.container(border=True, key="prefix_effect"):
        panel(view.prefix_panel(cache.prefix_effect(state), state, lang))
# ---- speculative decoding (issue 26): only when a draft is chosen ---------------------------
if state.draft:
    draft_text, draft_ok = view.draft_source(state, catalog, lang)
    if ex.draft is not None:
        with st.container(border=True, key="draft_effect"):
            panel(view.draft_panel(ex.draft, state, scenario, lang, draft_text),
                  numbers_key="draft_numbers")
    else:
        st.warning(draft_text, icon=":material/edit:")
st.caption(view.prediction_caption(scenario, state.calibration, lang))

# ---- the deployment: the Planner's figures for exactly this what-if -------------------------
try:
    dep = cache.deployment_view(state)
except CapacityError as exc:
    dep = None
    st.warning(T("err_inputs", msg=error_text(exc, lang)))
if dep is not None:
    with st.container(border=True, key="deployment"):
        panel(view.deployment_panel(dep, state, lang), numbers_key="deployment_numbers")
        if state.load > 0:
            st.button(T("dep_use_c", c=f"{state.c:,}"), key="dep_use_c",
                      on_click=use_concurrency_as_load, icon=":material/swap_horiz:")

# Start-up (docs/benchmarks.md): what only the sections below the headline need loads here, on
# its way to the browser: pandas (tables), altair (charts), the frontier's and the pools' views
from app import explorer_tables as tables  # noqa: E402

with st.expander(T("sec_uncertainty", lo=unc.step_ms[0], hi=unc.step_ms[2]),
                 expanded=bool(unc.flags)):
    st.caption(T("unc_basis_cal") if unc.calibrated else T("unc_basis_spec"))
    if unc.flags:
        st.warning(tables.flags_text(unc, lang), icon=":material/report:")
    if unc.widenings:
        st.markdown(tables.widenings_text(unc, lang))
    st.dataframe(tables.band_frame(unc, lang), hide_index=True, key="unc_band")
    s1, s2 = st.columns(2)
    for col, title, rows in ((s1, T("sens_step"), unc.step_sensitivity),
                             (s2, T("sens_ttft"), unc.ttft_sensitivity)):
        col.markdown(f"**{title}**")
        col.dataframe(tables.sensitivity_frame(rows, lang), hide_index=True,
                      column_config={T("sens_swing"): st.column_config.NumberColumn(format="%.3f")})

# ---- compare: a pinned what-if beside this one ---------------------------------------------
pinned = pinned_state(lang)
if pinned is None:
    st.button(T("pin"), key="pin", on_click=pin, icon=":material/push_pin:", help=T("help_pin"))
else:
    with st.container(border=True, key="compare"):
        st.markdown(f"**{T('compare_title')}**")
        with st.container(horizontal=True):
            st.button(T("repin"), key="repin", on_click=pin, help=T("help_repin"),
                      icon=":material/push_pin:")
            st.button(T("unpin"), key="unpin", on_click=unpin, icon=":material/close:")
        try:
            from capacity.report.charts import COMPARE_CHARTS

            pinned_result = cache.explorer_result(pinned)
            overlays = cache.compare_charts(state, pinned, chart_labels(lang))
        except CapacityError as exc:
            st.warning(T("compare_error", msg=error_text(exc, lang)))
        else:
            diff = view.compare_diff_text(pinned, state, catalog, lang)
            if diff:
                st.markdown(diff)
            else:
                st.caption(T("compare_same"))
            frame = view.compare_frame(pinned_result.explanation, pinned, ex, state, lang)
            st.dataframe(frame, hide_index=True, key="compare_table", width="stretch",
                         height=35 * (len(frame) + 1) + 3)
            tabs = st.tabs([T("compare_ch_" + name) for name in COMPARE_CHARTS])
            for tab, name in zip(tabs, COMPARE_CHARTS, strict=True):
                tab.vega_lite_chart(overlays[name], width="stretch", key=f"compare_{name}")

# ---- verdict cards ------------------------------------------------------------------------
cards = st.columns(4)
for col, v in zip(cards, ex.verdicts, strict=True):
    with col.container(border=True, key=f"verdict_{v.constraint}"):
        st.markdown(view.card_title(v, lang))
        st.caption(T("q_" + v.constraint))
        st.markdown(view.detail_text(v, lang))

with st.container(key="binding"):
    st.markdown(f"**{view.binding_text(ex, state, lang)}**")
    if ex.overall == Status.FAIL or ex.reliefs:
        if ex.reliefs:
            st.markdown(T("relief_ranked" if ex.binding_detail == Detail.SUBTOTAL
                          else "relief_click") + ":")
            for i, r in enumerate(ex.reliefs):
                st.button(view.relief_text(r, state, catalog, lang), key=f"relief_{i}",
                          help=T("relief_apply"), icon=":material/arrow_forward:",
                          on_click=apply_relief, args=(r.kind, r.value, r.n_gpus, r.tp))
        else:
            st.markdown(T("relief_none"))
st.caption(T("share"))

# ---- charts ---------------------------------------------------------------------------------
from capacity.report.charts import ALL_CHARTS  # noqa: E402

st.subheader(T("sec_charts"))
specs = cache.explorer_specs(state, chart_labels(lang))
for i in range(0, len(ALL_CHARTS), 2):
    cols = st.columns(2)
    for col, name in zip(cols, ALL_CHARTS[i:i + 2], strict=True):
        with col.container(border=True):
            st.markdown(f"**{T('ch_' + name)}**")
            st.vega_lite_chart(specs[name], width="stretch", key=f"chart_{name}",
                               height=view.CHART_HEIGHTS[name])

# ---- capacity table -------------------------------------------------------------------------
st.subheader(T("sec_table"))
st.caption(T("table_help"))
edited = st.data_editor(
    tables.seed_rows(state.ctx), key=f"ex_table_{state.ctx}", num_rows="dynamic",
    hide_index=True, width="content",
    column_config={
        "concurrency": st.column_config.NumberColumn(T("col_concurrency"), min_value=1,
                                                     max_value=100_000, step=1),
        "context_tokens": st.column_config.NumberColumn(T("col_context_tokens"), min_value=1,
                                                        max_value=10_000_000, step=1),
    })
rows, bad = tables.edited_rows(edited)
if bad:
    st.warning(T("table_rows_error"))
if rows:
    try:
        table = tables.capacity_table(cache.capacity_rows(state, tuple(rows)), state.currency,
                                      lang)
    except CapacityError as exc:
        st.error(T("err_inputs", msg=error_text(exc, lang)))
    else:
        st.dataframe(table.shown, hide_index=True, width="stretch", key="ex_table_result",
                     column_order=table.column_order,
                     column_config={c: st.column_config.NumberColumn(format=f)
                                    for c, f in table.formats.items()})
        downloads = st.container(horizontal=True, key="ex_downloads")  # labels never cut
        downloads.download_button(T("dl_csv"), table.csv, file_name="capacity-table.csv",
                                  mime="text/csv", key="dl_csv")
        downloads.download_button(T("dl_md"), table.markdown, file_name="capacity-table.md",
                                  mime="text/markdown", key="dl_md")

# ---- the buyer's chart (issue 26): throughput per GPU vs interactivity, app.frontier_view --
from app.frontier_view import explorer_frontier  # noqa: E402

explorer_frontier(state, scenario, ex.figures, lang)
# ---- disaggregated prefill/decode (issue 27): the what-if as two pools, app.disagg_view ----
from app.disagg_view import explorer_disagg  # noqa: E402

explorer_disagg(state, ex.figures, lang)

# ---- show the math --------------------------------------------------------------------------
with st.expander(T("sec_math"), expanded=False):
    st.caption(T("math_help"))
    for step in result.math:
        st.markdown(f"**{T('m_' + step.key)}**")
        st.code(f"{step.formula}\n{step.substituted}", language=None)
        if step.note:  # why the chapter's step and the operator step differ here
            st.caption(note_text(step.note, lang))
