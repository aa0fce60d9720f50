"""Planner page: daily users (or peak concurrency) and SLOs -> ranked GPU options, charts, quote.

Draws only: every number comes from `capacity.plan.search`, `capacity.plan.queueing` and
`capacity.report.quote`.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from app import cache
from app.bootstrap import ensure_navigation
from app.planner_state import (
    MIX_N,
    entered_prices,
    from_widgets,
    init_planner,
    keep_prices,
    mix_key,
    price_rows,
    write_url,
)
from app.state import init_lang
from capacity import workspace
from capacity.catalog.engines import DEFAULT_ENGINE, engine_names
from capacity.catalog.loader import Catalog
from capacity.catalog.offers import OFFER_KINDS, without_offer
from capacity.errors import CapacityError
from capacity.fit.calibration import load as load_calibration
from capacity.fit.calibration import saved_calibrations
from capacity.fit.planning import GpuBand, engines, gpu_band
from capacity.fit.traffic import LogSummary, summarize_log
from capacity.model.basis import SPEC_SHEET, TYPICAL_PREFIX
from capacity.plan.alternatives import Alternative, alternatives
from capacity.plan.mix import MAX_WORKLOADS, MIX_NAME_CHARS, MixPlan, MixWorkload, plan_mix
from capacity.plan.queueing import QueueResult
from capacity.plan.search import (
    CurvePoint,
    Option,
    Plan,
    PlanInputs,
    load_curve,
    pareto_front,
    plan,
    runs_out_month,
    simulate_option,
)
from capacity.report.bases import basis_label
from capacity.report.charts import log_arrivals_chart, log_length_chart
from capacity.report.i18n import engine_label, error_text, note_text, t
from capacity.report.quote import (
    alternative_text,
    band_text,
    basis_text,
    blocks_pdf,
    fix_text,
    fmt_money,
    fmt_ms,
    headline_rows,
    mix_quote_blocks,
    nodes_text,
    option_label,
    quote_file_name,
    quote_markdown,
    quote_pdf,
    rejection_text,
    render_markdown,
    tokens_over_context,
    variants_text,
)
from capacity.report.urlstate import (
    PLANNER_KV,
    PLANNER_PCTS,
    explorer_state,
    explorer_url,
    planner_url,
)

ensure_navigation()

CTX_CHOICES = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]


def _catalog() -> Catalog:
    return cache.catalog()


@st.cache_data(show_spinner=False)
def _plan(inp: PlanInputs) -> Plan:
    return plan(inp, _catalog())


@st.cache_data(show_spinner=False)
def _curve(inp: PlanInputs, o: Option) -> list[CurvePoint]:
    return load_curve(inp, o, catalog=_catalog(), points=10, n_requests=400)


@st.cache_data(show_spinner=False)
def _sim(inp: PlanInputs, o: Option) -> QueueResult:
    return simulate_option(inp, o, _catalog(), n_requests=1000)


@st.cache_data(show_spinner=False)
def _quotes(p: Plan, sim: QueueResult | None, lang: str, link: str,
            band: tuple[int | None, int | None] | None,
            cheaper: tuple[Alternative, ...]) -> tuple[str, bytes]:
    return (quote_markdown(p, lang=lang, simulation=sim, catalog=_catalog(), link=link,
                           band=band, cheaper=cheaper),
            quote_pdf(p, lang=lang, simulation=sim, catalog=_catalog(), link=link, band=band,
                      cheaper=cheaper))


@st.cache_data(show_spinner=False)
def _cheaper(p: Plan) -> tuple[Alternative, ...]:
    return alternatives(p, _catalog())


@st.cache_data(show_spinner=False)
def _mix(workloads: tuple[MixWorkload, ...]) -> MixPlan:
    return plan_mix(workloads, _catalog())


@st.cache_data(show_spinner=False)
def _mix_quotes(mix: MixPlan, lang: str, link: str) -> tuple[str, bytes]:
    return (render_markdown(mix_quote_blocks(mix, lang=lang, catalog=_catalog(), link=link)),
            blocks_pdf(lambda lg: mix_quote_blocks(mix, lang=lg, catalog=_catalog(), link=link),
                       lang=lang))


@st.cache_data(show_spinner=False)
def _band(inp: PlanInputs, o: Option) -> GpuBand:
    cal = load_calibration(inp.calibration) if inp.calibration else None
    return gpu_band(inp, o, cal, _catalog())


def _here() -> str:
    """The Planner's address for the quote's link: the deployment's public address
    ($CAPACITY_PUBLIC_URL) when one is set, else relative (never the address this browser
    reached, which behind a proxy is a loopback one)."""
    return workspace.public_url() + "/planner"


lang = init_lang()  # the app's sidebar switch (or ?lang= on a shared link)


def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
    return t(k, lang, **kw)


st.title(T("pl_title"))
st.caption(T("pl_intro"))

catalog = _catalog()
saved, notices = init_planner(catalog)  # the URL (a shared link) or this session's last values
if notices:
    st.warning(T("notice_title") + "\n\n" + "\n".join(f"- {note_text(n, lang)}" for n in notices))
variants = catalog.variant_keys()
c1, c2, c3 = st.columns(3)
with c1:
    st.selectbox(T("pl_model"), variants, key="planner_model")
    limit = catalog.variant(st.session_state["planner_model"]).model.max_context_tokens
    if int(st.session_state["planner_ctx"]) > limit:  # a new model with a shorter limit
        st.session_state["planner_ctx"] = limit
    ctx_choices = sorted({*(c for c in CTX_CHOICES if c <= limit), limit,
                          int(st.session_state["planner_ctx"])})
    mode = st.radio(T("pl_mode"), ["dau", "conc"], horizontal=True, key="planner_mode",
                    format_func=lambda m: T("pl_mode_" + m))
    if mode == "dau":
        st.number_input(T("pl_dau"), min_value=1, step=50, key="planner_dau")
        st.number_input(T("pl_rpu"), min_value=0.1, key="planner_rpu")
        st.slider(T("pl_share"), 0.05, 1.0, step=0.05, key="planner_share")
        st.number_input(T("pl_hours"), min_value=0.25, max_value=24.0, step=0.25,
                        key="planner_hours")
    else:
        st.number_input(T("pl_conc"), min_value=1, key="planner_conc")
with c2:
    st.selectbox(T("pl_ctx"), ctx_choices, key="planner_ctx")
    st.number_input(T("pl_out"), min_value=1, key="planner_out")
    st.slider(T("pl_headroom"), 0.0, 1.0, step=0.05, key="planner_headroom")
    st.number_input(T("pl_growth"), min_value=0.0, max_value=10.0, step=0.05,
                    key="planner_growth", format="%.2f")
    st.number_input(T("prefix_tokens"), min_value=0, max_value=10_000_000, step=256,
                    key="planner_prefix", help=T("help_prefix"))
    st.slider(T("prefix_share"), min_value=0.0, max_value=1.0, step=0.05,
              key="planner_prefix_share", disabled=not st.session_state.get("planner_prefix"))
with c3:
    st.number_input(T("pl_ttft"), min_value=10.0, step=100.0, key="planner_ttft")
    st.number_input(T("pl_tpot"), min_value=1.0, step=5.0, key="planner_tpot")
    st.select_slider(T("pl_pct"), list(PLANNER_PCTS), key="planner_pct")
    st.number_input(T("pl_cost_target"), min_value=0.0, step=0.5, key="planner_cost_target")

with st.expander(T("pl_space")):
    s1, s2, s3 = st.columns(3)
    gpu_keys = sorted(catalog.gpus)
    with s1:
        st.multiselect(T("pl_gpus"), gpu_keys, key="planner_gpus", placeholder=T("choose_options"),
                       format_func=lambda k: catalog.gpus[k].name)
        st.slider(T("pl_maxg"), 1, 16, key="planner_maxg")
    with s2:
        st.multiselect(T("pl_kv"), list(PLANNER_KV), key="planner_kv",
                       placeholder=T("choose_options"))
        st.checkbox(T("pl_tp"), key="planner_tp")
        st.checkbox(T("pl_spare"), key="planner_spare")
        engine_keys = list(engine_names())  # whose scheduling the load model follows
        if st.session_state.get("planner_engine") not in engine_keys:
            st.session_state["planner_engine"] = DEFAULT_ENGINE
        st.selectbox(T("engine"), engine_keys, key="planner_engine", help=T("pl_help_engine"),
                     format_func=lambda k: engine_label(k, lang))
    with s3:
        st.radio(T("pl_currency"), ["CNY", "USD"], horizontal=True, key="planner_currency")
        st.number_input(T("pl_fx"), min_value=0.01, max_value=1e4, step=0.05, key="planner_fx")
        st.slider(T("pl_util"), 0.5, 1.0, step=0.01, key="planner_util")
        bases = ["", SPEC_SHEET, *(TYPICAL_PREFIX + k for k in engines()), *saved_calibrations()]
        if st.session_state.get("planner_cal", "") not in bases:
            st.session_state["planner_cal"] = ""
        st.selectbox(T("prediction"), bases, key="planner_cal",
                     format_func=lambda b: basis_label(b, lang), help=T("help_prediction"))
        st.slider(T("pl_mfu"), 0.05, 1.0, step=0.05, key="planner_mfu",
                  disabled=bool(st.session_state.get("planner_cal")), help=T("help_pl_mfu"))

state = from_widgets(lang, catalog)
with st.expander(T("pl_prices", cur=state.cur), expanded=bool(state.prices or state.offer)):
    st.caption(T("pl_prices_help"))
    # ---- offer kind (issue 13): the bundled published offers, or the catalog's prices ----
    st.selectbox(T("pl_offer"), ["", *OFFER_KINDS], key="planner_offer",
                 format_func=lambda k: T("offer_kind_" + k) if k else T("pl_offer_catalog"),
                 help=T("help_pl_offer"))
    missing = without_offer({o.gpu: o for o in state.offer_list(catalog)},
                            state.gpu_list(catalog)) if state.offer else ()
    if missing:
        st.info(T("pl_offer_missing", kind=T("offer_kind_" + state.offer),
                  gpus=T("comma").join(catalog.gpus[g].name for g in missing)))
    # ---- end offer kind ----
    rows = price_rows(state, catalog, lang)
    edited = st.data_editor(
        pd.DataFrame(rows), key=f"planner_prices_{state.cur}_{state.offer}", hide_index=True,
        width="stretch", disabled=["gpu", "name", "catalog", "source"],
        column_config={
            "gpu": None, "name": st.column_config.TextColumn(T("pl_col_gpu")),
            "price": st.column_config.NumberColumn(T("pl_col_price", cur=state.cur),
                                                   min_value=0.0001, max_value=1e5,
                                                   format="%.2f"),
            "catalog": st.column_config.NumberColumn(T("pl_col_catalog", cur=state.cur),
                                                     format="%.2f"),
            "source": st.column_config.TextColumn(T("pl_col_source"))})
    state = keep_prices(state, entered_prices(edited.to_dict("records")))
write_url(state)
pct = state.pct
try:
    inputs = state.inputs(catalog)
    result = _plan(inputs)
except CapacityError as exc:
    st.error(T("pl_error", msg=error_text(exc, lang)))
    st.stop()

cur = inputs.currency
best = result.best
over = tokens_over_context(inputs.workload)
if over:
    st.warning(T("warn_tokens_over", total=f"{over:,}", ctx=f"{inputs.workload.context_tokens:,}"))


def link(o: Option) -> str:
    return explorer_url(explorer_state(inputs, o, catalog, lang))


st.subheader(T("pl_best"))
if best is None:
    st.warning(T("pl_none"))
else:
    st.markdown(f"### {option_label(best, lang)}")
    twins = variants_text(best, lang)  # named as such: read bare, it looked like the option's own
    st.caption(" · ".join(x for x in (nodes_text(best, lang),
                                      twins and T('quote_variants') + T("colon") + twins) if x))
    st.caption(T("quote_basis") + T("colon") + basis_text(inputs, lang))
    if inputs.growth_per_month > 0:
        month = runs_out_month(inputs, best)
        st.caption(T("quote_growth", g=inputs.growth_per_month) + T("colon") + (
            T("quote_growth_v", m=month) if month is not None else T("quote_growth_never")))
    # one row that wraps: each figure as wide as its value, none cut on a narrow window
    row = st.container(horizontal=True, wrap=True, gap="medium", key="pl_headline")
    # the quote's own labels and strings (capacity.report.quote.headline_rows)
    for label, value in headline_rows(result, best, lang):
        row.metric(label, value, help=label, width="content")
    row.metric(T("pl_col_binding"),
               f"{T('pl_reason_' + best.binding)} ({best.binding_ratio:.0%})", width="content")

if result.options:
    st.subheader(T("pl_options", n=len(result.options), m=result.evaluated))
    shown = result.options[:30]
    q = int(pct)
    table = pd.DataFrame([{
        "#": i + 1, T("pl_col_option"): option_label(o, lang),
        T("fig_col_gpus"): o.paid_gpus, T("fig_col_price"): o.price_per_hour,
        T("pl_col_month"): o.cost_per_month,
        T("fig_col_mtok_design"): o.cost_per_mtok_design, T("fig_col_mtok"): o.cost_per_mtok,
        T("fig_col_ttft", q=q): fmt_ms(o.ttft_ms), T("fig_col_tpot", q=q): fmt_ms(o.tpot_ms),
        T("pl_col_max_rate"): round(o.capacity_rate_per_s, 3),
        T("pl_col_memory"): T("quote_verdict_" + (o.memory_verdict or "")),
        T("pl_col_nodes"): " + ".join(map(str, o.nodes)),
        T("pl_col_variants"): variants_text(o, lang),
        T("pl_col_binding"): T("pl_reason_" + o.binding), T("pl_col_link"): link(o)}
        for i, o in enumerate(shown)])
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        T("pl_col_link"): st.column_config.LinkColumn(T("pl_col_link"),
                                                      display_text=T("pl_explorer")),
        T("fig_col_price"): st.column_config.NumberColumn(format=f"{cur} %.2f"),
        T("pl_col_month"): st.column_config.NumberColumn(format=f"{cur} %,.0f"),
        T("fig_col_mtok_design"): st.column_config.NumberColumn(format=f"{cur} %.2f"),
        T("fig_col_mtok"): st.column_config.NumberColumn(format=f"{cur} %.2f")})

if result.rejected:
    st.subheader(T("pl_rejected"))
    st.markdown("\n".join(
        f"- **{r.gpu_name}**{T('colon')}{T('comma').join(T('pl_reason_' + x) for x in r.reasons)}"
        f"{T('dash')}"
        f"{rejection_text(r, inputs.slo, lang)}"
        for r in result.rejected))
cheaper = _cheaper(result) if result.rejected else ()
if cheaper:
    st.subheader(T("alt_title"))
    st.markdown("\n".join(f"- **{a.gpu_name}**{T('colon')}{alternative_text(a, inputs, lang)}"
                          for a in cheaper))
if result.near_misses:
    st.subheader(T("pl_near"))
    st.markdown("\n".join(
        f"- {option_label(m.option, lang)}{T('colon')}"
        + T("list_sep").join(fix_text(f, m.option.tp, lang) for f in m.fixes)
        for m in result.near_misses))

if result.options:
    opts = result.options[:200]
    front = pareto_front(opts)
    frame = pd.DataFrame([{
        "option": option_label(o, lang), "gpu": o.gpu_name, "cost_per_month": o.cost_per_month,
        "goodput_req_s": o.capacity_rate_per_s, "binding": o.binding, "pareto": f,
        "rank": i + 1} for i, (o, f) in enumerate(zip(opts, front, strict=True))])
    st.subheader(T("pl_chart_cost"))
    base = alt.Chart(frame).encode(
        x=alt.X("cost_per_month:Q", title=T("pl_ax_month", cur=cur),
                scale=alt.Scale(type="log")),
        y=alt.Y("goodput_req_s:Q", title=T("pl_ax_goodput"),
                scale=alt.Scale(type="log")),
        tooltip=["rank", "option", alt.Tooltip("cost_per_month:Q", format=",.0f"),
                 alt.Tooltip("goodput_req_s:Q", format=".2f"), "binding"])
    points = base.mark_circle(size=45, opacity=0.6).encode(color=alt.Color("gpu:N", title="GPU"))
    front_line = base.transform_filter(alt.datum.pareto).mark_line(
        color="black", point=alt.OverlayMarkDef(color="black", size=70, shape="diamond"))
    st.altair_chart(alt.layer(points, front_line), width="stretch")

    labels = [option_label(o, lang) for o in result.options[:30]]
    chosen_label = st.selectbox(T("pl_chosen"), labels, key="planner_chosen")
    chosen = result.options[labels.index(chosen_label)]
    st.link_button(T("pl_explorer"), link(chosen))
    try:
        sim = _sim(inputs, chosen)
        curve = _curve(inputs, chosen)
    except CapacityError as exc:
        st.error(T("pl_error", msg=error_text(exc, lang)))
        st.stop()
    st.caption(T("pl_sim", a=sim.ttft_ms[0.5], b=sim.ttft_ms[0.9], c=sim.ttft_ms[0.99],
                 d=sim.tpot_ms[0.5], e=sim.tpot_ms[0.9], f=sim.tpot_ms[0.99],
                 ok=sim.slo_met_share))
    pts = pd.DataFrame([{"rate_per_s": c.rate_per_s, "percentile": f"p{round(qq * 100)}",
                         "ttft_ms": c.ttft_ms[qq]} for c in curve for qq in (0.5, 0.9, 0.99)])
    st.subheader(T("pl_chart_ttft"))
    lines = alt.Chart(pts).mark_line(point=True).encode(
        x=alt.X("rate_per_s:Q", title=T("pl_ax_rate")),
        y=alt.Y("ttft_ms:Q", title=T("pl_ax_ttft"), scale=alt.Scale(type="log")),
        color=alt.Color("percentile:N", title=T("pl_ax_pct")),
        tooltip=["percentile", alt.Tooltip("rate_per_s:Q", format=".2f"),
                 alt.Tooltip("ttft_ms:Q", format=",.0f")])
    slo_rule = alt.Chart(pd.DataFrame({"y": [inputs.slo.ttft_ms], "label": ["TTFT SLO"]})
                         ).mark_rule(color="red", strokeDash=[6, 3]).encode(y="y:Q")
    load_rule = alt.Chart(pd.DataFrame({"x": [chosen.design_rate_per_s]})).mark_rule(
        color="gray", strokeDash=[2, 2]).encode(x="x:Q")
    st.altair_chart(alt.layer(lines, slo_rule, load_rule), width="stretch")

    band = None if best is None else _band(inputs, best)
    if band is not None and best is not None:
        st.caption(T("quote_band") + T("colon") + band_text(best, (band.low, band.high),
                                                      inputs.max_gpus, lang))
    md, pdf = _quotes(result, sim if chosen == best else None, lang,
                      planner_url(state, base=_here()),
                      None if band is None else (band.low, band.high), cheaper)
    d1, d2 = st.columns(2)
    name = quote_file_name(result, lang)
    d1.download_button(T("pl_quote_md"), md, file_name=name + ".md",
                       mime="text/markdown", key="planner_quote_md")
    d2.download_button(T("pl_quote_pdf"), pdf, file_name=name + ".pdf",
                       mime="application/pdf", key="planner_quote_pdf")

# Mix: more workloads on the same fleet, each with its own model, traffic and SLO (sized on its
# own replicas of one GPU type: capacity.plan.mix). The inputs above are the first workload;
# the others share its peak window, headroom, GPUs, prices and efficiency basis. They are in
# the URL (`mix`, read into these widgets by app.planner_state), so a link reopens the mix.
with st.expander(T("mix_add"), expanded=bool(st.session_state.get(MIX_N, 0))):
    st.caption(T("mix_help"))
    n_more = int(st.number_input(T("mix_n"), min_value=0, max_value=MAX_WORKLOADS - 1,
                                 step=1, key=MIX_N))
    for i in range(n_more):
        c = st.columns([2, 3, 2, 2, 2, 2, 2, 2])
        c[0].text_input(T("mix_workload"), max_chars=MIX_NAME_CHARS, key=mix_key(i, "name"))
        c[1].selectbox(T("pl_model"), variants, key=mix_key(i, "model"))
        c[2].number_input(T("pl_dau"), min_value=1, max_value=10**9, step=100,
                          key=mix_key(i, "dau"))
        c[3].number_input(T("pl_rpu"), min_value=0.1, max_value=1e5, key=mix_key(i, "rpu"))
        c[4].selectbox(T("pl_ctx"), sorted({*CTX_CHOICES, int(st.session_state[mix_key(i, "ctx")])}),
                       key=mix_key(i, "ctx"))
        c[5].number_input(T("pl_out"), min_value=1, max_value=1_000_000, key=mix_key(i, "out"))
        c[6].number_input(T("pl_ttft"), min_value=10.0, max_value=1e7, key=mix_key(i, "ttft"))
        c[7].number_input(T("pl_tpot"), min_value=1.0, max_value=1e6, key=mix_key(i, "tpot"))
    extra: tuple[MixWorkload, ...] = ()
    try:
        extra = state.mix_workloads(catalog, first_name=T("mix_first"))[1:]
    except CapacityError as exc:
        st.error(T("pl_error", msg=error_text(exc, lang)))
    if extra:
        try:
            mix = _mix((MixWorkload(name=T("mix_first"), inputs=inputs), *extra))
        except CapacityError as exc:
            st.error(T("pl_error", msg=error_text(exc, lang)))
            st.stop()
        fleet = mix.best
        if fleet is None:
            st.warning(T("mix_none"))
        else:
            st.markdown("#### " + T("mix_fleet", gpu=fleet.gpu_name, n=fleet.paid_gpus,
                                    cost=fmt_money(fleet.cost_per_month, cur)))
            st.dataframe(pd.DataFrame([{
                T("mix_workload"): p.name, T("pl_model"): p.plan.model_name,
                T("pl_col_option"): option_label(p.option, lang),
                T("mix_gpus"): p.option.paid_gpus,
                T("pl_col_month"): fmt_money(p.option.cost_per_month, cur),
                T("mix_share"): f"{fleet.share(p):.0%}",
                T("fig_col_mtok"): fmt_money(p.option.cost_per_mtok, cur),
                T("fig_col_ttft", q=int(pct)): fmt_ms(p.option.ttft_ms),
                T("fig_col_tpot", q=int(pct)): fmt_ms(p.option.tpot_ms)}
                for p in fleet.parts]), hide_index=True, width="stretch")
            if mix.fleets[1:]:
                st.caption(T("mix_others") + T("colon") + T("list_sep").join(
                    f"{f.paid_gpus} x {f.gpu_name} {fmt_money(f.cost_per_month, cur)}"
                    for f in mix.fleets[1:4]))
        for g, names in mix.short:
            st.caption(T("mix_short", gpu=catalog.gpu(g).name, names=T("comma").join(names)))
        mmd, mpdf = _mix_quotes(mix, lang, planner_url(state, base=_here()))
        m1, m2 = st.columns(2)
        m1.download_button(T("mix_quote_md"), mmd, file_name=f"capacity-mix-quote-{lang}.md",
                           mime="text/markdown", key="planner_mix_quote_md")
        m2.download_button(T("mix_quote_pdf"), mpdf, file_name=f"capacity-mix-quote-{lang}.pdf",
                           mime="application/pdf", key="planner_mix_quote_pdf")


# =============================================================================================
# Size from a log (issue 12): upload a request log -> its summary charts -> ranked options for
# its busiest hour. A block of its own: it reads the page's `inputs` and changes nothing above.
# =============================================================================================


@st.cache_data(max_entries=4, show_spinner=False)
def _log_summary(name: str, data: bytes) -> LogSummary:
    """`capacity.fit.traffic.summarize_log` over the uploaded bytes (DuckDB reads a file: the
    upload goes to a temporary one, removed after)."""
    suffix = Path(name).suffix.lower() or ".csv"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"log{suffix}"
        path.write_bytes(data)
        s = summarize_log(path)
    return replace(s, path=name)


with st.expander(T("pl_log"), expanded=False):
    st.caption(T("pl_log_help"))
    upload = st.file_uploader(T("pl_log_upload"), type=["csv", "jsonl", "json", "ndjson"],
                              key="planner_log")
    if upload is not None:
        try:
            log = _log_summary(upload.name, upload.getvalue())
        except CapacityError as exc:
            st.error(T("pl_log_error", msg=error_text(exc, lang)))
            st.stop()
        left = sum(log.bad_rows.values())
        st.markdown(T("pl_log_read", rows=f"{log.rows:,}", kept=f"{log.kept:,}",
                      left=f"{left:,}"))
        if left:
            st.warning(T("pl_log_bad", reasons=T("list_sep").join(
                f"{n:,} {T(f'pl_log_bad_{i}')}" for i, n in enumerate(log.bad_rows.values())
                if n)))
        if not log.arrivals:   # lengths only (a vLLM result without start_times)
            st.warning(T("pl_log_no_arrivals"))
            st.altair_chart(log_length_chart(
                log, prompt_label=T("pl_log_prompt"), output_label=T("pl_log_output"),
                x_title=T("pl_log_tokens"), y_title=T("pl_log_requests")), width="stretch")
            st.stop()
        cv = f"{log.burstiness_cv:.2f}" if log.burstiness_cv == log.burstiness_cv else "-"
        st.caption(T("pl_log_peak", hour=f"{log.busiest_hour_of_day:02d}",
                     clock=T("pl_log_clock_utc" if log.absolute_time else "pl_log_clock_rel"),
                     n=f"{log.busiest_hour_requests:,}", rate=f"{log.peak_rate_per_s:.3f}",
                     cv=cv, reuse=f"{log.prefix_reuse_share:.0%}"))
        g1, g2 = st.columns(2)
        with g1:
            st.markdown("**" + T("pl_log_lengths") + "**")
            st.altair_chart(log_length_chart(
                log, prompt_label=T("pl_log_prompt"), output_label=T("pl_log_output"),
                x_title=T("pl_log_tokens"), y_title=T("pl_log_requests")), width="stretch")
        with g2:
            st.markdown("**" + T("pl_log_arrivals") + "**")
            st.altair_chart(log_arrivals_chart(log, x_title=T("pl_log_hour"),
                                               y_title=T("pl_log_requests")), width="stretch")
        try:
            log_wl = log.workload(percentile=pct, headroom=inputs.workload.headroom)
            log_plan = _plan(replace(inputs, workload=log_wl))
        except CapacityError as exc:
            st.error(T("pl_log_error", msg=error_text(exc, lang)))
            st.stop()
        st.caption(T("pl_log_workload", rate=f"{log.peak_rate_per_s:.3f}",
                     prompt=f"{log_wl.prompt:,}", out=f"{log_wl.output_tokens:,}",
                     ctx=f"{log_wl.context_tokens:,}", q=f"{pct:g}"))
        st.markdown("**" + T("pl_log_options") + "**")
        if not log_plan.options:
            st.warning(T("pl_none"))
        else:
            q = int(pct)
            st.dataframe(pd.DataFrame([{
                "#": i + 1, T("pl_col_option"): option_label(o, lang),
                T("pl_col_month"): round(o.cost_per_month), T("fig_col_mtok"): o.cost_per_mtok,
                T("fig_col_ttft", q=q): fmt_ms(o.ttft_ms), T("fig_col_tpot", q=q): fmt_ms(o.tpot_ms),
                T("pl_col_max_rate"): round(o.capacity_rate_per_s, 3),
                T("pl_col_binding"): T("pl_reason_" + o.binding)}
                for i, o in enumerate(log_plan.options[:10])]), hide_index=True, width="stretch")
