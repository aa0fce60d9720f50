"""Explorer: one deployment what-if. Inputs -> verdict per constraint -> curves -> table -> math.

Draws only: every number comes from `capacity/` through `app.cache`.
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from app import cache
from app.bootstrap import ensure_navigation
from app.i18n import chart_labels, status_text, verdict_text
from app.state import (
    MAX_CONCURRENCY,
    MAX_CONTEXT,
    PROMPT_FOLLOWS,
    apply_relief,
    fit_tp,
    from_mirror,
    from_widgets,
    init_explorer,
    init_lang,
    key,
    mirror_inputs,
    on_basis_change,
    on_currency_change,
    on_gpu_change,
    on_model_change,
    pin,
    pinned_state,
    prediction_caption,
    scenario_spare,
    set_context,
    show_basis_knobs,
    sync_prompt,
    unpin,
    use_concurrency_as_load,
    valid_tps,
    write_url,
)
from capacity.catalog.engines import DEFAULT_ENGINE, engine_names
from capacity.errors import CapacityError
from capacity.fit.calibration import saved_calibrations
from capacity.fit.planning import engines as typical_engines
from capacity.model.basis import SPEC_SHEET, TYPICAL_PREFIX
from capacity.model.cost import CURRENCIES
from capacity.model.memory import MemoryVerdict
from capacity.model.scenario import SEED_TABLE_ROWS
from capacity.plan.queueing import MAX_LOAD_REQUESTS
from capacity.report.bases import basis_label
from capacity.report.charts import ALL_CHARTS, COMPARE_CHARTS
from capacity.report.explain import (
    TABLE_COLUMNS,
    Constraint,
    Detail,
    Explanation,
    Relief,
    ReliefKind,
    Status,
    Verdict,
)
from capacity.report.i18n import engine_label, error_text, note_text, t
from capacity.report.quote import figure_rows, nodes_text, option_label
from capacity.report.tables import render
from capacity.report.urlstate import PLANNER_PCTS, STEP_METHODS, ExplorerState
from capacity.units import KV_DTYPES

ensure_navigation()
lang = init_lang()


def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
    return t(k, lang, **kw)



CTX_OPTIONS = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288,
               1048576]
CHART_HEIGHTS = {"step_time": 380, "throughput": 380, "vram": 250, "ttft": 380, "cost": 380,
                 "roofline": 380}
MEMORY_WORD = {Status.PASS: MemoryVerdict.FITS, Status.TIGHT: MemoryVerdict.TIGHT,
               Status.FAIL: MemoryVerdict.DOES_NOT_FIT}
COMPARED_FIELDS = ("model", "weights", "gpu", "gpus", "tp", "c", "ctx", "prompt", "kv", "block",
                   "util", "overhead", "headroom", "slo_ttft_ms", "slo_tpot_ms", "slo_cost",
                   "currency", "price", "rate", "calibration", "eff", "mfu",
                   "eta_bw", "step_oh_ms", "prefill_oh_ms", "step")
FIELD_LABEL = {"calibration": "prediction"}
STATUS_COLOR = {Status.PASS: "green", Status.TIGHT: "orange", Status.FAIL: "red"}


def tokens_label(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 and n >= 1024 else f"{n:,}"


try:
    catalog = cache.catalog()
except CapacityError as exc:
    st.error(T("err_catalog", msg=error_text(exc, lang)))
    st.stop()
for catalog_warning in catalog.warnings:  # a bad custom file, skipped: name it, to be fixed
    st.warning(catalog_warning)

notices = init_explorer(catalog)
ctx_now = int(st.session_state[key("ctx")])
st.session_state.setdefault("ex_c_max", max(1024, int(st.session_state[key("c")])))

st.title(T("nav_explorer"))
if notices:
    st.warning(T("notice_title") + "\n\n" + "\n".join(f"- {note_text(n, lang)}" for n in notices))

# ---- inputs: the main ones on the page, the rest in the sidebar ----------------------------
models = sorted(catalog.models)
gpus = sorted(catalog.gpus)
row1 = st.columns([3, 2, 3])
row1[0].selectbox(T("model"), models, key=key("model"),
                  format_func=lambda k: catalog.models[k].name,
                  on_change=on_model_change, args=(catalog,))
model = catalog.models[st.session_state[key("model")]]
# the contexts this model takes (and the current one, even past its limit: it is flagged)
ctx_options = sorted({*(c for c in CTX_OPTIONS if c <= model.max_context_tokens),
                      model.max_context_tokens, ctx_now})
formats = [f.key for f in catalog.formats_for(model)]
if st.session_state[key("weights")] not in formats:
    on_model_change(catalog)
row1[1].selectbox(T("weights"), formats, key=key("weights"),
                  format_func=lambda k: catalog.formats[k].name)
row1[2].selectbox(T("gpu"), gpus, key=key("gpu"), format_func=lambda k: catalog.gpus[k].name,
                  on_change=on_gpu_change, args=(catalog,))
row2 = st.columns([3, 2, 3])
row2[0].number_input(T("gpus"), min_value=1, max_value=64, step=1, key=key("gpus"))
tp_moved = fit_tp(catalog)
tp_sizes = valid_tps(catalog)
row2[1].selectbox(T("tp_short"), tp_sizes, key=key("tp"), help=T("help_tp"))
row2[2].selectbox(T("kv"), list(KV_DTYPES), key=key("kv"))
row3 = st.columns([3, 1, 3, 1], vertical_alignment="bottom")
mirror_inputs()
row3[0].slider(T("c"), min_value=1, max_value=int(st.session_state["ex_c_max"]), step=1,
               key=key("c"))
row3[1].number_input(T("c_exact"), min_value=1, max_value=MAX_CONCURRENCY, step=1,
                     key=key("c_in"), on_change=from_mirror, args=("c",),
                     help=T("help_exact"), label_visibility="collapsed")
row3[2].select_slider(T("ctx"), options=ctx_options, key=key("ctx"), format_func=tokens_label)
row3[3].number_input(T("ctx_exact"), min_value=1, max_value=MAX_CONTEXT, step=1024,
                     key=key("ctx_in"), on_change=from_mirror, args=("ctx",),
                     help=T("help_exact"), label_visibility="collapsed")

with st.sidebar:
    with st.expander(T("sec_workload"), expanded=False):
        st.toggle(T("prompt_follows"), key=key(PROMPT_FOLLOWS), on_change=sync_prompt,
                  help=T("help_prompt_follows"))
        st.number_input(T("prompt"), min_value=1, max_value=10_000_000, step=512,
                        key=key("prompt"), disabled=bool(st.session_state[key(PROMPT_FOLLOWS)]))
        st.number_input(T("out_tokens"), min_value=1, max_value=1_000_000, step=64,
                        key=key("out"), help=T("help_out_tokens"))
        st.slider(T("util"), min_value=0.05, max_value=1.0, step=0.01, key=key("util"),
                  help=T("help_util"))
        st.number_input(T("overhead"), min_value=0.0, max_value=1000.0, step=0.1,
                        key=key("overhead"))
        st.number_input(T("block"), min_value=1, max_value=1024, step=1, key=key("block"))
        st.slider(T("headroom"), min_value=0.0, max_value=1.0, step=0.05, key=key("headroom"))
        engines = list(engine_names())
        if st.session_state[key("engine")] not in engines:
            st.session_state[key("engine")] = DEFAULT_ENGINE
        st.selectbox(T("engine"), engines, key=key("engine"),
                     format_func=lambda k: engine_label(k, lang), help=T("help_engine"))
    with st.expander(T("sec_prefix"), expanded=False):
        st.number_input(T("prefix_tokens"), min_value=0, max_value=10_000_000, step=256,
                        key=key("prefix"), help=T("help_prefix"))
        st.slider(T("prefix_share"), min_value=0.0, max_value=1.0, step=0.05,
                  key=key("prefix_share"))
    with st.expander(T("sec_slo"), expanded=True):
        st.number_input(T("slo_ttft_ms"), min_value=1.0, max_value=1e7, step=100.0,
                        key=key("slo_ttft_ms"))
        st.number_input(T("slo_tpot_ms"), min_value=0.1, max_value=1e6, step=5.0,
                        key=key("slo_tpot_ms"))
        st.number_input(T("slo_cost"), min_value=0.0, max_value=1e6, step=0.1,
                        key=key("slo_cost"), format="%.3f")
        st.select_slider(T("pl_pct"), sorted({*PLANNER_PCTS, int(st.session_state[key("pct")])}),
                         key=key("pct"), help=T("help_ex_pct"))
    with st.expander(T("sec_cost"), expanded=True):
        st.segmented_control(T("currency"), list(CURRENCIES), key=key("currency"),
                             required=True, on_change=on_currency_change)
        st.number_input(T("price"), min_value=0.0, max_value=1e5, step=0.1, key=key("price"),
                        format="%.3f")
        st.number_input(T("rate"), min_value=0.01, max_value=1e4, step=0.05, key=key("rate"))
        st.session_state[key("spare")] = bool(st.session_state[key("spare")])
        st.checkbox(T("ex_spare"), key=key("spare"), help=T("help_ex_spare"))
    with st.expander(T("sec_eff"), expanded=bool(st.session_state[key("calibration")])):
        bases = ["", SPEC_SHEET, *(TYPICAL_PREFIX + k for k in typical_engines()),
                 *saved_calibrations()]
        if st.session_state[key("calibration")] not in bases:
            st.session_state[key("calibration")] = ""
        st.selectbox(T("prediction"), bases, key=key("calibration"),
                     format_func=lambda b: basis_label(b, lang), help=T("help_prediction"),
                     on_change=on_basis_change, args=(catalog,))
        calibrated = bool(st.session_state[key("calibration")])
        if calibrated:  # a named basis sets every knob: the sliders show its values
            show_basis_knobs(catalog)
        st.slider(T("eff"), min_value=0.01, max_value=1.0, step=0.01, key=key("eff"),
                  help=T("help_eff"), disabled=calibrated)
        st.slider(T("mfu"), min_value=0.01, max_value=1.0, step=0.01, key=key("mfu"),
                  disabled=calibrated)
        # the rest of a basis' knobs (a Planner option on a typical-engine basis carries them;
        # 1.0 and 0 ms are the chapter's spec sheet)
        st.slider(T("eta_bw"), min_value=0.01, max_value=1.0, step=0.01, key=key("eta_bw"),
                  help=T("help_eta_bw"), disabled=calibrated)
        st.number_input(T("step_oh_ms"), min_value=0.0, max_value=1000.0, step=0.5,
                        key=key("step_oh_ms"), disabled=calibrated)
        st.number_input(T("prefill_oh_ms"), min_value=0.0, max_value=100_000.0, step=1.0,
                        key=key("prefill_oh_ms"), disabled=calibrated)
        st.radio(T("step_method"), list(STEP_METHODS), key=key("step"), horizontal=True,
                 format_func=lambda m: T("step_method_" + m), help=T("help_step_method"),
                 disabled=calibrated)

state = from_widgets(lang)
write_url(state)
if tp_moved is not None:
    st.info(T("tp_moved", old=tp_moved[0], new=tp_moved[1], n=state.gpus,
              model=model.name), icon=":material/swap_horiz:")

try:
    scenario = state.scenario(catalog)
    result = cache.explorer_result(state, chart_labels(lang), cache.catalog_version())
except CapacityError as exc:
    st.error(T("err_inputs", msg=error_text(exc, lang)))
    st.stop()

ex: Explanation = result.explanation
fig = ex.figures
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
overall = ex.overall
with st.container(key="overall"):
    icon = {Status.PASS: ":material/check_circle:", Status.TIGHT: ":material/warning:",
            Status.FAIL: ":material/block:"}[overall]
    failing = [T("c_" + v.constraint) for v in ex.verdicts if v.status == Status.FAIL]
    sep = "、" if lang == "zh" else ", "
    st.markdown(f"#### :{STATUS_COLOR[overall]}[{icon} "
                f"{T('overall_' + overall, names=sep.join(failing))}]")
cur = state.currency
with st.container(horizontal=True, wrap=True, gap="medium", key="key_numbers"):
    # content-wide metrics that wrap onto a second line on a narrow page, never cut off
    st.metric(T("metric_tpot"), f"{fig['step_ms']:.1f} ms", help=T("help_tpot"),
              width="content")
    st.metric(T("metric_ttft"), f"{fig['ttft_s']:.2f} s", help=T("help_ttft"), width="content")
    st.metric(T("metric_tok_s"), f"{fig['tok_s_per_request']:,.1f}", width="content")
    st.metric(T("metric_agg"), f"{fig['aggregate_tok_s']:,.0f}", width="content")
    st.metric(T("metric_cost_at", cur=cur, c=f"{state.c:,}"), f"{fig['cost_per_mtok']:,.3f}",
              help=T("help_metric_cost", month=f"{fig['monthly_cost']:,.0f} {cur}",
                     paid=scenario.paid_gpus), width="content")
    st.metric(T("metric_cvram"), f"{int(fig['c_vram']):,}", help=T("help_cvram"),
              width="content")


unc = cache.uncertainty(state, cache.catalog_version())
if state.prompt:
    st.caption(T("ttft_prompt_apart", p=tokens_label(state.prompt_tokens), ctx=tokens_label(state.ctx)))
else:
    st.caption(T("ttft_prompt_follows", p=tokens_label(state.prompt_tokens)))
try:
    load = cache.load_view(state, cache.catalog_version())
except CapacityError as exc:
    load = None
    st.warning(T("err_inputs", msg=error_text(exc, lang)))
if load is not None:
    # a closed loop of C clients with no think time, each sending the whole prompt again: a
    # what-if of its own, so it opens only when asked for, or when an engine was chosen for it
    with st.expander(T("sec_load", engine=engine_label(load.engine, lang)),
                     expanded=state.engine != DEFAULT_ENGINE):
        if load.point is None:
            st.caption(T("load_too_many", n=MAX_LOAD_REQUESTS))
        else:
            with st.container(horizontal=True, wrap=True, gap="medium", key="load_numbers"):
                for name, q, values in (("load_ttft_p50", 0.5, load.point.ttft_ms),
                                        ("load_ttft_p90", 0.9, load.point.ttft_ms),
                                        ("load_tpot_p50", 0.5, load.point.tpot_ms),
                                        ("load_tpot_p90", 0.9, load.point.tpot_ms)):
                    unit = "s" if name.startswith("load_ttft") else "ms"
                    v = values[q] / 1e3 if unit == "s" else values[q]
                    st.metric(T(name), f"{v:,.2f} s" if unit == "s" else f"{v:,.1f} ms",
                              width="content")
            st.caption(T("load_caption_rate", rate=f"{load.rate_per_s:.3g}",
                         p=tokens_label(load.prompt_tokens), o=f"{load.output_tokens:,}",
                         slots=load.slots) if load.rate_per_s > 0 else
                       T("load_caption", c=f"{state.c:,}", p=tokens_label(load.prompt_tokens),
                         o=f"{load.output_tokens:,}", slots=load.slots))
# ---- prefix caching (issue 12): only when a shared prefix is set ----------------------------
if state.prefix > 0:
    pe = cache.prefix_effect(state, cache.catalog_version())
    with st.container(border=True, key="prefix_effect"):
        st.markdown("**" + T("prefix_title", p=f"{pe.prefix_tokens:,}",
                             share=f"{pe.share:.0%}") + "**")
        with st.container(horizontal=True, wrap=True, gap="medium"):
            st.metric(T("prefix_ttft"), f"{pe.ttft_s[1]:.2f} s",
                      delta=f"{pe.ttft_s[1] - pe.ttft_s[0]:+.2f} s", delta_color="inverse",
                      width="content")
            st.metric(T("prefix_cvram"), f"{pe.c_vram[1]:,}",
                      delta=f"{pe.c_vram[1] - pe.c_vram[0]:+,}", width="content")
            st.metric(T("prefix_cost", cur=cur), f"{pe.cost_per_mtok[1]:,.3f}",
                      delta=f"{pe.cost_per_mtok[1] - pe.cost_per_mtok[0]:+,.3f}",
                      delta_color="inverse", width="content")
        st.caption(T("prefix_caption", t0=f"{pe.ttft_s[0]:.2f} s", c0=f"{pe.c_vram[0]:,}",
                     cost0=f"{pe.cost_per_mtok[0]:,.3f}", cur=cur,
                     p=f"{state.prompt_tokens:,}"))
st.caption(prediction_caption(scenario, state.calibration, lang))

# ---- the deployment: the Planner's figures for exactly this what-if -------------------------
try:
    dep = cache.deployment_view(state, cache.catalog_version())
except CapacityError as exc:
    dep = None
    st.warning(T("err_inputs", msg=error_text(exc, lang)))
if dep is not None:
    o = dep.option
    with st.container(border=True, key="deployment"):
        st.markdown("**" + T("dep_title", label=option_label(o, lang)) + "**")
        with st.container(horizontal=True, wrap=True, gap="medium", key="deployment_numbers"):
            for label, value in figure_rows(dep.inputs, o, lang):
                st.metric(label, value, help=label, width="content")
        load_words = (T("dep_load_rate", rate=f"{state.load:.3g}") if state.load > 0
                      else T("dep_load_conc", c=f"{state.c:,}"))
        verdict = (T("dep_ok") if o.feasible else T("dep_fails", reasons=T("list_sep").join(
            T("pl_reason_" + r) for r in o.failures)))
        st.caption(" · ".join(x for x in (load_words, nodes_text(o, lang), verdict) if x))
        if state.load > 0:
            st.button(T("dep_use_c", c=f"{state.c:,}"), key="dep_use_c",
                      on_click=use_concurrency_as_load, icon=":material/swap_horiz:")
def num(x: float) -> str:
    """A number for the How-sure tables: thousands separated, 3 significant figures below."""
    if not math.isfinite(x):
        return "—"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def knob_name(name: str) -> str:
    return T("in_" + name)


with st.expander(T("sec_uncertainty", lo=unc.step_ms[0], hi=unc.step_ms[2]),
                 expanded=bool(unc.flags)):
    st.caption(T("unc_basis_cal") if unc.calibrated else T("unc_basis_spec"))
    if unc.flags:
        st.warning(T("unc_flags") + "\n\n" + "\n".join(
            "- " + (T("unc_flag_high", knob=knob_name(f.knob), value=f.value, limit=f.limit)
                    if math.isfinite(f.limit) else
                    T("unc_flag_std", knob=knob_name(f.knob), value=f.value, std=f.std))
            for f in unc.flags), icon=":material/report:")
    if unc.widenings:
        st.markdown(T("unc_wider") + "\n\n" + "\n".join(
            "- " + T("unc_w_" + w.kind, used=w.used,
                     measured=knob_name(w.measured) if w.kind == "implausible" else w.measured,
                     amount=f"{w.amount:.0%}", output=T("unc_out_" + w.output))
            for w in unc.widenings))
    st.dataframe(pd.DataFrame(
        [[T("metric_tpot") + " (ms)", *map(num, unc.step_ms)],
         [T("metric_ttft") + " (s)", *map(num, unc.ttft_s)],
         [T("metric_cvram"), *(f"{int(v):,}" for v in unc.max_concurrency_vram)]],
        columns=[T("unc_quantity"), T("unc_low"), T("unc_mid"), T("unc_high")]),
        hide_index=True, key="unc_band")
    s1, s2 = st.columns(2)
    for col, title, rows in ((s1, T("sens_step"), unc.step_sensitivity),
                             (s2, T("sens_ttft"), unc.ttft_sensitivity)):
        col.markdown(f"**{title}**")
        col.dataframe(pd.DataFrame(
            [[T("in_" + r.name), f"{num(r.low)} .. {num(r.high)}", num(r.output_low),
              num(r.output_high), r.swing] for r in rows],
            columns=[T("sens_input"), T("sens_range"), T("unc_low"), T("unc_high"),
                     T("sens_swing")]), hide_index=True,
            column_config={T("sens_swing"): st.column_config.NumberColumn(format="%.3f")})


# ---- compare: a pinned what-if beside this one ---------------------------------------------
def shown_value(st8: ExplorerState, name: str) -> str:
    """One input of a state as the page shows it."""
    v = getattr(st8, name)
    if name == "model":
        return catalog.models[v].name if v in catalog.models else str(v)
    if name == "gpu":
        return catalog.gpus[v].name if v in catalog.gpus else str(v)
    if name == "weights":
        return catalog.formats[v].name if v in catalog.formats else str(v)
    if name == "ctx":
        return tokens_label(int(v))
    if name == "prompt":
        return tokens_label(st8.prompt_tokens)
    if name == "calibration":
        return basis_label(str(v), lang)
    if isinstance(v, float):
        return f"{v:g}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def key_numbers(e: Explanation, st8: ExplorerState) -> list[str]:
    f = e.figures
    return [f"{f['step_ms']:.1f}", f"{f['ttft_s']:.2f}", f"{f['tok_s_per_request']:,.1f}",
            f"{f['aggregate_tok_s']:,.0f}", f"{f['cost_per_mtok']:,.3f} {st8.currency}",
            f"{f['monthly_cost']:,.0f} {st8.currency}", f"{int(f['c_vram']):,}",
            *(verdict_text(MEMORY_WORD[v.status], lang) if v.constraint == Constraint.MEMORY
              else status_text(v.status, lang) for v in e.verdicts),
            status_text(e.overall, lang)]


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
            pinned_result = cache.explorer_result(pinned, chart_labels(lang),
                                                  cache.catalog_version())
            overlays = cache.compare_charts(state, pinned, chart_labels(lang),
                                            cache.catalog_version())
        except CapacityError as exc:
            st.warning(T("compare_error", msg=error_text(exc, lang)))
        else:
            diff = [f for f in COMPARED_FIELDS if getattr(pinned, f) != getattr(state, f)]
            if diff:
                st.markdown(T("compare_diff") + " " + T("list_sep").join(
                    T("compare_item", name=T(FIELD_LABEL.get(f, f)),
                      pinned=shown_value(pinned, f), now=shown_value(state, f))
                    for f in diff) + ".")
            else:
                st.caption(T("compare_same"))
            rows = [T("metric_tpot") + " (ms)", T("metric_ttft") + " (s)", T("metric_tok_s"),
                    T("metric_agg"), T("col_cost_per_mtok"), T("metric_month"),
                    T("metric_cvram"), *(T("c_" + v.constraint) for v in ex.verdicts),
                    T("compare_overall")]
            st.dataframe(pd.DataFrame({
                T("unc_quantity"): rows,
                T("chart_pinned"): key_numbers(pinned_result.explanation, pinned),
                T("chart_current"): key_numbers(ex, state)}), hide_index=True,
                key="compare_table", width="stretch", height=35 * (len(rows) + 1) + 3)
            tabs = st.tabs([T("compare_ch_" + name) for name in COMPARE_CHARTS])
            for tab, name in zip(tabs, COMPARE_CHARTS, strict=True):
                tab.vega_lite_chart(overlays[name], width="stretch", key=f"compare_{name}")

# ---- verdict cards ------------------------------------------------------------------------
def detail_text(v: Verdict) -> str:
    return T("d_" + v.detail, value=v.value, limit=v.limit, unit=v.unit,
             value_s=v.value / 1e3, limit_s=v.limit / 1e3)


cards = st.columns(4)
for col, v in zip(cards, ex.verdicts, strict=True):
    with col.container(border=True, key=f"verdict_{v.constraint}"):
        color = STATUS_COLOR[v.status]
        word = (verdict_text(MEMORY_WORD[v.status], lang) if v.constraint == Constraint.MEMORY
                else status_text(v.status, lang))
        st.markdown(f"**{T('c_' + v.constraint)}** &nbsp; :{color}-badge[{word}]")
        st.caption(T("q_" + v.constraint))
        st.markdown(detail_text(v))


def binding_text(e: Explanation) -> str:
    b, d = e.binding, e.binding_detail
    slo_ttft, slo_tpot = state.slo_ttft_ms / 1e3, state.slo_tpot_ms
    failing = any(v.status == Status.FAIL for v in e.verdicts)
    if (b == Constraint.MEMORY and failing
            and e.verdict(Constraint.MEMORY).status == Status.FAIL):
        if fig["weights_shortfall_gb"] > 0:
            return T("b_memory_weights", short=fig["weights_shortfall_gb"])
        return T("b_memory" if fig["c_vram"] >= 1 else "b_memory_none", c=e.concurrency,
                 subtotal=fig["subtotal_gb"], usable=fig["usable_gb"], short=fig["shortfall_gb"],
                 c_vram=int(fig["c_vram"]))
    if e.verdict(Constraint.SLO).status == Status.FAIL:
        if d == Detail.TTFT:
            return T("b_ttft", ttft=fig["ttft_s"], slo=slo_ttft)
        if d == Detail.COST:
            return T("b_cost", cost=fig["cost_per_mtok"], cur=cur, slo=state.slo_cost)
        return T("b_tpot_compute" if b == Constraint.COMPUTE else "b_tpot_bandwidth",
                 step=fig["step_ms"], slo=slo_tpot)
    if b == Constraint.MEMORY:
        return T("b_ok_memory", subtotal=fig["subtotal_gb"], usable=fig["usable_gb"],
                 c_vram=int(fig["c_vram"]))
    if b == Constraint.COMPUTE:
        return T("b_ok_compute", ttft=fig["ttft_s"], slo_ttft=slo_ttft)
    return T("b_ok_bandwidth", step=fig["step_ms"], slo=slo_tpot)


def relief_text(r: Relief, detail: Detail) -> str:
    value = r.value
    if r.kind == ReliefKind.KV_DTYPE:
        value = str(value).upper()
    elif r.kind == ReliefKind.WEIGHTS:
        value = catalog.formats[str(value)].name if str(value) in catalog.formats else value
    elif r.kind == ReliefKind.CONTEXT:
        value = tokens_label(int(value))
    if r.kind in (ReliefKind.PROMPT, ReliefKind.CONCURRENCY):
        value = f"{int(value):,}"
    kind: str = r.kind
    if r.kind == ReliefKind.CONCURRENCY and detail == Detail.COST:
        kind = "concurrency_cost"
    elif r.kind == ReliefKind.GPUS and r.tp != state.tp:
        kind = "gpus_tp"
    elif r.kind == ReliefKind.TP and detail == Detail.SUBTOTAL:
        kind = "tp_memory"
    text = T("r_" + kind, value=value, tp=r.tp, n=r.n_gpus, cur=cur)
    res = r.result
    if isinstance(res, str):  # a MemoryVerdict
        shown = T("r_memory_result", verdict=verdict_text(res, lang), subtotal=r.subtotal_gb,
                  usable=r.usable_gb, cost=r.cost_per_mtok, cur=cur)
    elif detail == Detail.TTFT or r.kind in (ReliefKind.PROMPT, ReliefKind.TP, ReliefKind.MFU):
        shown = f"TTFT {res / 1e3:.2f} s"
    elif detail == Detail.COST or r.kind == ReliefKind.PRICE:
        shown = f"{res:.3f} {cur}"
    else:
        shown = f"TPOT {res:.1f} ms"
    return f"{text} → {shown}"


with st.container(key="binding"):
    st.markdown(f"**{binding_text(ex)}**")
    if ex.overall == Status.FAIL or ex.reliefs:
        if ex.reliefs:
            st.markdown(T("relief_ranked" if ex.binding_detail == Detail.SUBTOTAL
                          else "relief_click") + ":")
            for i, r in enumerate(ex.reliefs):
                st.button(relief_text(r, r.detail), key=f"relief_{i}",
                          help=T("relief_apply"), icon=":material/arrow_forward:",
                          on_click=apply_relief, args=(r.kind, r.value, r.n_gpus, r.tp))
        else:
            st.markdown(T("relief_none"))
st.caption(T("share"))

# ---- charts ---------------------------------------------------------------------------------
st.subheader(T("sec_charts"))
for i in range(0, len(ALL_CHARTS), 2):
    cols = st.columns(2)
    for col, name in zip(cols, ALL_CHARTS[i:i + 2], strict=True):
        with col.container(border=True):
            st.markdown(f"**{T('ch_' + name)}**")
            st.vega_lite_chart(result.specs[name], width="stretch", key=f"chart_{name}",
                               height=CHART_HEIGHTS[name])

# ---- capacity table -------------------------------------------------------------------------
st.subheader(T("sec_table"))
st.caption(T("table_help"))
seed_rows = pd.DataFrame({"concurrency": [c for c, _ in SEED_TABLE_ROWS],
                          "context_tokens": [state.ctx] * len(SEED_TABLE_ROWS)})
edited = st.data_editor(
    seed_rows, key=f"ex_table_{state.ctx}", num_rows="dynamic", hide_index=True,
    width="content",
    column_config={
        "concurrency": st.column_config.NumberColumn(T("col_concurrency"), min_value=1,
                                                     max_value=100_000, step=1),
        "context_tokens": st.column_config.NumberColumn(T("col_context_tokens"), min_value=1,
                                                        max_value=10_000_000, step=1),
    })
rows = []
bad = False
for c, ctx in zip(edited["concurrency"], edited["context_tokens"], strict=True):
    if pd.isna(c) or pd.isna(ctx):
        continue
    if not (math.isfinite(c) and math.isfinite(ctx)) or c < 1 or ctx < 1:
        bad = True
        continue
    rows.append((int(c), int(ctx)))
if bad:
    st.warning(T("table_rows_error"))
if rows:
    try:
        table = cache.capacity_rows(state, tuple(rows), cache.catalog_version())
    except CapacityError as exc:
        st.error(T("err_inputs", msg=error_text(exc, lang)))
        table = None
    if table is not None:
        shown = table.copy()
        shown["verdict"] = shown["verdict"].map(lambda v: verdict_text(v, lang))
        shown["slo"] = shown["slo"].map(lambda v: status_text(v, lang))
        headers = [T("col_" + c) for c in TABLE_COLUMNS]
        headers[TABLE_COLUMNS.index("cost_per_mtok")] += f" ({cur})"
        shown.columns = headers
        formats = {"kv_total_gb": "%.1f", "subtotal_gb": "%.1f", "usable_gb": "%.1f",
                   "ttft_s": "%.2f", "tpot_ms": "%.1f", "tok_s_per_request": "%.1f",
                   "aggregate_tok_s": "%.0f", "cost_per_mtok": "%.3f"}
        # the verdicts and cost first: the measurements that follow scroll on a narrow page
        first = ("concurrency", "context_tokens", "verdict", "slo", "cost_per_mtok")
        order = [*first, *(c for c in TABLE_COLUMNS if c not in first)]
        st.dataframe(shown, hide_index=True, width="stretch", key="ex_table_result",
                     column_order=[headers[TABLE_COLUMNS.index(c)] for c in order],
                     column_config={headers[TABLE_COLUMNS.index(c)]:
                                    st.column_config.NumberColumn(format=f)
                                    for c, f in formats.items()})
        downloads = st.container(horizontal=True, key="ex_downloads")  # labels never cut
        raw = [[r[c] for c in TABLE_COLUMNS] for r in table.to_dict("records")]
        csv_headers = list(TABLE_COLUMNS)
        csv_headers[TABLE_COLUMNS.index("cost_per_mtok")] = f"cost_per_mtok_{cur.lower()}"
        downloads.download_button(T("dl_csv"), render(csv_headers, raw, "csv"),
                           file_name="capacity-table.csv", mime="text/csv", key="dl_csv")
        md_rows = shown.values.tolist()
        downloads.download_button(T("dl_md"), render(headers, md_rows, "markdown"),
                           file_name="capacity-table.md", mime="text/markdown", key="dl_md")

# ---- show the math --------------------------------------------------------------------------
with st.expander(T("sec_math"), expanded=False):
    st.caption(T("math_help"))
    for step in result.math:
        st.markdown(f"**{T('m_' + step.key)}**")
        st.code(f"{step.formula}\n{step.substituted}", language=None)
        if step.note:  # why the chapter's step and the operator step differ here
            st.caption(note_text(step.note, lang))
