"""Explorer: one deployment what-if. Inputs -> verdict per constraint -> curves -> table -> math.

Draws only: every number comes from `capacity/` through `app.cache`; the words, figures and
tables are `app.explorer_view` and `app.explorer_tables`, the inputs' state `app.state`.
The first screen is the inputs, the headline and the verdicts; every section below them that
is closed by default (`app.layout.section`) computes and sends its body only once opened, and
loads what only it needs (pandas, altair, the frontier's and the pools' views) then (issue 30,
docs/benchmarks.md "Start-up").
"""

from __future__ import annotations

import streamlit as st

from app import cache
from app import explorer_sections as sections
from app import explorer_view as view
from app.bootstrap import ensure_navigation
from app.explorer_inputs import engine_knob_inputs, main_inputs, sidebar_inputs
from app.format import entry_names, link_notices_text, markdown_plain, tokens_label
from app.i18n import chart_labels
from app.layout import metric_row, panel, section
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
from capacity.report.i18n import engine_label, error_text, note_text, t, tn

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
    st.warning(markdown_plain(note_text(catalog_warning, lang)))  # it quotes the file: plain text

notices = init_explorer(catalog)
st.session_state.setdefault("ex_c_max", max(1024, int(st.session_state[key("c")])))

st.title(T("nav_explorer"))
if notices:
    st.warning(link_notices_text(T("notice_title"), notices, lang))

# ---- inputs: the main ones at the top, the rest in the sidebar (app.explorer_inputs) --------
model, tp_moved = main_inputs(catalog, lang)
sidebar_inputs(catalog, lang)

state = from_widgets(lang)
write_url(state)
if tp_moved is not None:
    st.info(tn("tp_moved", state.gpus, lang, old=tp_moved[0], new=tp_moved[1],
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

# the what-if as the deployment it is (the Planner's figures): the headline's verdict counts it
dep: cache.DeploymentView | None
dep_error: CapacityError | None = None
try:
    dep = cache.deployment_view(state)
except CapacityError as exc:
    dep, dep_error = None, exc

# ---- headline -------------------------------------------------------------------------------
# the count that picks the form is the requests' (a value named n is the GPUs, not the count)
st.subheader(tn("headline", state.c, lang, c=f"{state.c:,}", ctx=tokens_label(state.ctx),
                n=state.gpus,
                gpu=entry_names(catalog.gpus)[state.gpu]
                + (T("headline_spare", n=scenario_spare(state)) if state.spare else "")))
with st.container(key="overall"):
    st.markdown(view.overall_markdown(ex, lang, dep))
# content-wide metrics that wrap onto a second line on a narrow page, never cut off
metric_row(view.key_metrics(ex, state, scenario.paid_gpus, lang), key="key_numbers")

unc = cache.uncertainty(state)
st.caption(view.ttft_caption(state, lang))
# the engine's scheduling under load, with its knobs: a what-if of its own, so it opens only
# when an engine or a knob was chosen for it
if box := section(T("sec_load", engine=engine_label(state.engine, lang)), key=view.LOAD_SECTION,
                  default=state.engine != DEFAULT_ENGINE or view.knobs_set(state)):
    with box:
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
if dep_error is not None:
    st.warning(T("err_inputs", msg=error_text(dep_error, lang)))
if dep is not None:
    with st.container(border=True, key="deployment"):
        panel(view.deployment_panel(dep, state, lang), numbers_key="deployment_numbers")
        if state.load > 0:
            st.button(T("dep_use_c", c=f"{state.c:,}"), key="dep_use_c",
                      on_click=use_concurrency_as_load, icon=":material/swap_horiz:")

if box := section(T("sec_uncertainty", lo=unc.step_ms[0], hi=unc.step_ms[2]),
                  key=view.UNCERTAINTY_SECTION, default=bool(unc.flags)):
    sections.uncertainty_body(box, unc, lang)

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
            pinned_dep = cache.deployment_view(pinned)
            overlays = cache.compare_charts(state, pinned, chart_labels(lang))
        except CapacityError as exc:
            st.warning(T("compare_error", msg=error_text(exc, lang)))
        else:
            diff = view.compare_diff_text(pinned, state, catalog, lang)
            if diff:
                st.markdown(diff)
            else:
                st.caption(T("compare_same"))
            frame = view.compare_frame(pinned_result.explanation, pinned, ex, state, lang,
                                       (pinned_dep, dep))
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
    st.markdown(f"**{view.binding_text(ex, state, lang, dep)}**")
    if ex.overall == Status.FAIL or ex.reliefs:
        if ex.reliefs:
            st.markdown(T("relief_ranked" if ex.binding_detail == Detail.SUBTOTAL
                          else "relief_click") + T("colon").rstrip())
            for i, r in enumerate(ex.reliefs):
                st.button(view.relief_text(r, state, catalog, lang), key=f"relief_{i}",
                          help=T("relief_apply"), icon=":material/arrow_forward:",
                          on_click=apply_relief, args=(r.kind, r.value, r.n_gpus, r.tp, r.pp))
        else:
            st.markdown(T("relief_none"))
st.caption(T("share"))

# ---- curves, capacity table: altair and pandas load when one of them is first opened ---------
if box := section(T("sec_charts"), key=view.CHARTS_SECTION, icon=":material/show_chart:"):
    sections.charts_body(box, state, lang)
if box := section(T("sec_table"), key=view.TABLE_SECTION, icon=":material/table_chart:"):
    sections.table_body(box, state, lang)

# ---- the buyer's chart (issue 26): throughput per GPU vs interactivity, app.frontier_view --
if box := section(T("frv_ex_title"), key=view.FRONTIER_SECTION, icon=":material/scatter_plot:"):
    from app.frontier_view import explorer_frontier

    explorer_frontier(box, state, scenario, ex.figures, lang)
# ---- disaggregated prefill/decode (issue 27): the what-if as two pools, app.disagg_view ----
if box := section(T("pd_title"), key=view.POOLS_SECTION, icon=":material/call_split:"):
    from app.disagg_view import explorer_disagg

    explorer_disagg(box, state, ex.figures, lang,
                    design_rate_per_s=None if dep is None else dep.option.design_rate_per_s)

# ---- show the math --------------------------------------------------------------------------
if box := section(T("sec_math"), key=view.MATH_SECTION, icon=":material/functions:"):
    sections.math_body(box, result, lang)
