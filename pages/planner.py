"""Planner page: daily users (or peak concurrency) and SLOs -> ranked GPU options, charts, quote.

Draws only: every number comes from `capacity.plan` through `app.cache`; the words and tables
are `app.planner_view`, the inputs `app.planner_inputs` over `app.planner_state`.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from app import cache
from app import planner_view as view
from app.bootstrap import ensure_navigation
from app.format import link_notices_text
from app.frontier_view import planner_frontier
from app.layout import metric_row
from app.planner_disagg import disagg_section
from app.planner_ep import ep_section, pools_section
from app.planner_inputs import mix_inputs, plan_inputs
from app.planner_state import (
    MIX_N,
    entered_prices,
    from_widgets,
    init_planner,
    keep_prices,
    price_rows,
    write_url,
)
from app.state import init_lang
from capacity.catalog.loader import MAX_PRICE_PER_HOUR, MIN_PRICE_PER_HOUR
from capacity.catalog.offers import OFFER_KINDS, without_offer
from capacity.errors import CapacityError
from capacity.plan.mix import MixWorkload
from capacity.plan.options import Option
from capacity.report.bases import band_text
from capacity.report.charts import log_arrivals_chart, log_length_chart, options_chart, ttft_curve_chart
from capacity.report.check import check_caption, miss_text
from capacity.report.i18n import error_text, t, tn
from capacity.report.quote import option_label, quote_file_name
from capacity.report.urlstate import explorer_state, explorer_url

ensure_navigation()
lang = init_lang()  # the app's sidebar switch (or ?lang= on a shared link)


def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
    return t(k, lang, **kw)


st.title(T("pl_title"))
st.caption(T("pl_intro"))

catalog = cache.catalog()
saved, notices = init_planner(catalog)  # the URL (a shared link) or this session's last values
if notices:
    st.warning(link_notices_text(T("notice_title"), notices, lang))
plan_inputs(catalog, lang)

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
                                                   min_value=MIN_PRICE_PER_HOUR,
                                                   max_value=MAX_PRICE_PER_HOUR,
                                                   format="%.2f"),
            "catalog": st.column_config.NumberColumn(T("pl_col_catalog", cur=state.cur),
                                                     format="%.2f"),
            "source": st.column_config.TextColumn(T("pl_col_source"))})
    state = keep_prices(state, entered_prices(edited.to_dict("records")))

write_url(state)
pct = state.pct
try:
    inputs = state.inputs(catalog)
    result = cache.plan(inputs)
except CapacityError as exc:
    st.error(T("pl_error", msg=error_text(exc, lang)))
    st.stop()

cur = inputs.currency
best = result.best
over = inputs.workload.tokens_over_context
if over:
    st.warning(T("warn_tokens_over", total=f"{over:,}", ctx=f"{inputs.workload.context_tokens:,}"))


def link(o: Option) -> str:
    return explorer_url(explorer_state(inputs, o, catalog, lang))


st.subheader(T("pl_best"))
if best is None:
    st.warning(T("pl_none"))
else:
    st.markdown(f"### {option_label(best, lang)}")
    for line in (*view.best_captions(best, inputs, lang), view.draft_caption(result, lang)):
        if line:
            st.caption(line)
    # one row that wraps: each figure as wide as its value, none cut on a narrow window
    metric_row(view.headline_metrics(result, best, lang), key="pl_headline")

if result.options:
    st.subheader(T("pl_options", n=len(result.options), m=result.evaluated))
    # one line a row; a name too long for a 1400 px window (a draft, a spare) wraps in two
    row_px, option_px = view.options_layout([option_label(o, lang) for o in result.options[:30]])
    columns = view.options_columns(inputs, pct, lang, option_px)
    st.dataframe(view.options_frame(result.options[:30], pct, lang, link), hide_index=True,
                 width="stretch", column_config=columns, row_height=row_px)
    with st.expander(T("pl_details")):  # the other figures, row for row, by the same numbers
        st.dataframe(view.option_details_frame(result.options[:30], lang), hide_index=True,
                     width="stretch", column_config=columns, placeholder="-")
# disaggregated prefill/decode ranked beside them (issue 27), when asked for: also in the quote
comparison = disagg_section(inputs, lang) if state.disagg else None
# and a MoE model's wide expert-parallel deployments (issue 27), when asked for: also in the quote
ep_cmp = ep_section(inputs, lang) if state.wide_ep else None
# both on: the MoE model's EP deployments on separate prefill and decode pools, also in the quote
pools_cmp = pools_section(inputs, lang) if state.disagg and ep_cmp is not None else None

if result.rejected:
    st.subheader(T("pl_rejected"))
    st.markdown(view.rejected_markdown(result, inputs, lang))
cheaper = cache.cheaper(result) if result.rejected else ()
if cheaper:
    st.subheader(T("alt_title"))
    st.markdown(view.cheaper_markdown(cheaper, inputs, lang))
if result.near_misses:
    st.subheader(T("pl_near"))
    st.markdown(view.near_misses_markdown(result, lang))

if result.options:
    opts = result.options[:200]
    st.subheader(T("pl_chart_cost"))
    st.altair_chart(options_chart(opts, [option_label(o, lang) for o in opts],
                                  x_title=T("pl_ax_month", cur=cur), y_title=T("pl_ax_goodput")),
                    width="stretch")

    labels = [option_label(o, lang) for o in result.options[:30]]
    chosen_label = st.selectbox(T("pl_chosen"), labels, key="planner_chosen")
    chosen = result.options[labels.index(chosen_label)]
    st.link_button(T("pl_explorer"), link(chosen))
    if served := view.prefix_caption(inputs, chosen, lang):
        st.caption(served)
    try:
        sim = cache.simulation(inputs, chosen)
        curve = cache.curve(inputs, chosen)
    except CapacityError as exc:
        st.error(T("pl_error", msg=error_text(exc, lang)))
        st.stop()
    st.caption(check_caption(sim, lang))
    if (miss := miss_text(sim, inputs.slo, lang)) is not None:
        st.warning(miss)
    st.subheader(T("pl_chart_ttft"))
    st.altair_chart(ttft_curve_chart(curve, slo_ttft_ms=inputs.slo.ttft_ms,
                                     design_rate_per_s=chosen.design_rate_per_s,
                                     x_title=T("pl_ax_rate"), y_title=T("pl_ax_ttft"),
                                     legend_title=T("pl_ax_pct")), width="stretch")

    band = None if best is None else cache.band_of(inputs, best)
    if band is not None and best is not None:
        st.caption(T("quote_band") + T("colon") + band_text(best, band, inputs.max_gpus, lang))
    md, pdf = cache.quotes(result, sim if chosen == best else None, lang, view.quote_link(state),
                           band, cheaper, comparison, ep_cmp, pools_cmp)
    d1, d2 = st.columns(2)
    name = quote_file_name(result, lang)
    d1.download_button(T("pl_quote_md"), md, file_name=name + ".md",
                       mime="text/markdown", key="planner_quote_md")
    d2.download_button(T("pl_quote_pdf"), pdf, file_name=name + ".pdf",
                       mime="application/pdf", key="planner_quote_pdf")

planner_frontier(inputs, result, lang)  # the buyer's chart, the recommendation on it

# Mix: more workloads on the same fleet, each with its own model, traffic and SLO (sized on its
# own replicas of one GPU type: capacity.plan.mix). The inputs above are the first workload;
# the others share its peak window, headroom, GPUs, prices and efficiency basis. They are in
# the URL (`mix`, read into these widgets by app.planner_state), so a link reopens the mix.
with st.expander(T("mix_add"), expanded=bool(st.session_state.get(MIX_N, 0))):
    st.caption(T("mix_help"))
    mix_inputs(catalog, lang)
    extra: tuple[MixWorkload, ...] = ()
    try:
        extra = state.mix_workloads(catalog, first_name=T("mix_first"))[1:]
    except CapacityError as exc:
        st.error(T("pl_error", msg=error_text(exc, lang)))
    if extra:
        try:
            mix = cache.mix((MixWorkload(name=T("mix_first"), inputs=inputs), *extra))
        except CapacityError as exc:
            st.error(T("pl_error", msg=error_text(exc, lang)))
            st.stop()
        fleet = mix.best
        if fleet is None:
            st.warning(T("mix_none"))
        else:
            st.markdown(view.fleet_heading(fleet, cur, lang))
            st.dataframe(view.fleet_frame(fleet, cur, pct, lang), hide_index=True, width="stretch")
            if mix.fleets[1:]:
                st.caption(view.other_fleets_text(mix, cur, lang))
        for g, names in mix.short:
            st.caption(T("mix_short", gpu=catalog.gpu(g).name, names=T("comma").join(names)))
        mmd, mpdf = cache.mix_quotes(mix, lang, view.quote_link(state))
        m1, m2 = st.columns(2)
        m1.download_button(T("mix_quote_md"), mmd, file_name=f"capacity-mix-quote-{lang}.md",
                           mime="text/markdown", key="planner_mix_quote_md")
        m2.download_button(T("mix_quote_pdf"), mpdf, file_name=f"capacity-mix-quote-{lang}.pdf",
                           mime="application/pdf", key="planner_mix_quote_pdf")


# =============================================================================================
# Size from a log (issue 12): upload a request log -> its summary charts -> ranked options for
# its busiest hour. A block of its own: it reads the page's `inputs` and changes nothing above.
# =============================================================================================
with st.expander(T("pl_log"), expanded=False):
    st.caption(T("pl_log_help"))
    upload = st.file_uploader(T("pl_log_upload"), type=["csv", "jsonl", "json", "ndjson"],
                              key="planner_log")
    if upload is not None:
        try:
            log = cache.log_summary(upload.name, upload.getvalue())
        except CapacityError as exc:
            st.error(T("pl_log_error", msg=error_text(exc, lang)))
            st.stop()
        left = sum(log.bad_rows.values())
        st.markdown(tn("pl_log_read", log.rows, lang, rows=f"{log.rows:,}", kept=f"{log.kept:,}",
                       left=f"{left:,}"))
        if left:
            st.warning(view.log_bad_text(log, lang))
        if not log.arrivals:   # lengths only (no send times, or all at one instant)
            st.warning(T("pl_log_no_arrivals"))
            st.altair_chart(log_length_chart(
                log, prompt_label=T("pl_log_prompt"), output_label=T("pl_log_output"),
                x_title=T("pl_log_tokens"), y_title=T("pl_log_requests")), width="stretch")
            st.stop()
        st.caption(view.log_peak_caption(log, lang))
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
            log_plan = cache.plan(replace(inputs, workload=log_wl))
        except CapacityError as exc:
            st.error(T("pl_log_error", msg=error_text(exc, lang)))
            st.stop()
        st.caption(view.log_workload_caption(log, log_wl, pct, lang))
        st.markdown("**" + T("pl_log_options") + "**")
        if not log_plan.options:
            st.warning(T("pl_none"))
        else:
            st.dataframe(view.log_options_frame(log_plan, pct, lang), hide_index=True,
                         width="stretch")
