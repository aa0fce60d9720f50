"""The Planner's wide expert-parallelism section (issue 27): with "Also rank wide expert-parallel
deployments (MoE)" on (`planner_wide_ep`, the link's `wide_ep=1`; a MoE model's only), the
verdict of `capacity.plan.ep_search.compare_ep` (which wins and why), the cheapest EP deployment
in words, a table of the best ones and, in an expander, the GPUs without one and why. With the
disaggregated box on too, `pools_section`: EP deployments on separate prefill and decode pools
against them (`capacity.plan.ep_pools_search.compare_pools`, words from
`capacity.report.quote_ep_pools`).

Draws only: the comparison comes from `app.cache.wide_ep` (cached like the plan: a search over
every catalog GPU takes seconds); the words are `capacity.report.quote_ep`'s, the same the
quote's section uses, and every figure is a field or property of `EpPlanOption`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from app import cache
from capacity.errors import CapacityError
from capacity.plan.ep_pools import EpPoolsOption
from capacity.plan.ep_pools_search import PoolsComparison
from capacity.plan.ep_search import EpComparison, EpPlanOption, EpRejection
from capacity.plan.options import PlanInputs
from capacity.report.i18n import error_text, t
from capacity.report.quote_ep import (
    deployment_text,
    layout_text,
    network_text,
    nodes_cell,
    rejection_text,
    winner_text,
)
from capacity.report.quote_ep_pools import (
    decode_text,
    handover_text,
    pools_label,
    pools_winner_text,
    prefill_text,
)

TOP: int = 10
"""Wide-EP deployments the page's table lists."""


def ep_frame(options: Sequence[EpPlanOption], inputs: PlanInputs, lang: str) -> pd.DataFrame:
    """The best wide-EP deployments, one row each, in the order of the ranked options' table
    (what it costs first): GPU, layout, GPUs paid, costs, the SLO percentile's TTFT and TPOT
    at the design load, output tok/s and sequences per GPU, deployments, the nodes of one,
    what carries its all-to-all (numbers, formatted by `ep_columns`)."""
    q = inputs.slo.quantile * 100
    return pd.DataFrame([{
        "#": i + 1, t("wep_col_gpu", lang): o.gpu_name,
        t("wep_col_layout", lang): layout_text(o, lang),
        t("wep_col_gpus", lang): o.paid_gpus,
        t("pl_col_month", lang): o.cost_per_month,
        t("fig_col_mtok_design", lang): o.cost_per_mtok_design,
        t("fig_col_mtok", lang): o.cost_per_mtok,
        t("fig_col_ttft", lang, q=q): o.ttft_ms, t("fig_col_tpot", lang, q=q): o.tpot_ms,
        t("wep_col_tok", lang): o.output_tok_s_per_gpu,
        t("wep_col_batch", lang): o.batch_per_gpu,
        t("wep_col_deployments", lang): o.replicas,
        t("wep_col_nodes", lang): nodes_cell(o),
        t("wep_col_link", lang): network_text(o, lang),
        t("wep_col_weights", lang): f"{o.weights}, {o.kv_dtype} KV"}
        for i, o in enumerate(options)])


def ep_columns(inputs: PlanInputs, lang: str) -> dict[str, Any]:
    """The table's formats: milliseconds, tokens and money in the plan's currency."""
    cur, q = inputs.currency, inputs.slo.quantile * 100
    return {
        t("wep_col_batch", lang): st.column_config.NumberColumn(format="%.1f"),
        t("fig_col_ttft", lang, q=q): st.column_config.NumberColumn(format="%.0f ms"),
        t("fig_col_tpot", lang, q=q): st.column_config.NumberColumn(format="%.1f ms"),
        t("wep_col_tok", lang): st.column_config.NumberColumn(format="%,.0f"),
        t("pl_col_month", lang): st.column_config.NumberColumn(format=f"{cur} %,.0f"),
        t("fig_col_mtok_design", lang): st.column_config.NumberColumn(format=f"{cur} %.2f"),
        t("fig_col_mtok", lang): st.column_config.NumberColumn(format=f"{cur} %.2f")}


def rejected_expander(label: str, rejected: Sequence[EpRejection], lang: str) -> None:
    """The GPUs a search found nothing on and why, in an expander titled `label` (none when
    every GPU has an option)."""
    if rejected:
        with st.expander(label.rstrip(":：")):
            st.markdown("\n".join(f"- **{r.gpu_name}**{t('colon', lang)}"
                                  f"{rejection_text(r.detail, lang)}" for r in rejected))


def ep_section(inputs: PlanInputs, lang: str) -> EpComparison | None:
    """Draw the section for the page's inputs; returns the comparison for the quote (None when
    the model is dense, the inputs hold no arrival rate or the search fails, said on the
    page)."""
    st.subheader(t("wep_title", lang))
    if inputs.workload.peak_rate_per_s is None:
        st.info(t("wep_needs_rate", lang))
        return None
    try:
        with st.spinner(t("wep_title", lang) + "..."):
            cmp = cache.wide_ep(inputs)
    except CapacityError as exc:
        st.error(t("pl_error", lang, msg=error_text(exc, lang)))
        return None
    box = {"wide-ep": st.success, "aggregated": st.info}.get(cmp.winner, st.warning)
    box(winner_text(cmp, lang))
    s = cmp.ep
    best = s.best
    if best is None:
        st.warning(t("wep_none", lang, n=s.max_gpus))
    else:
        st.markdown(f"**{t('wep_q_chosen', lang)}**{t('colon', lang)}"
                    f"{deployment_text(best, lang)}")
        st.dataframe(ep_frame(s.options[:TOP], inputs, lang), hide_index=True,
                     width="stretch", column_config=ep_columns(inputs, lang))
        st.caption(t("wep_page_note", lang, rate=f"{s.design_rate_per_s:.3g}", n=s.max_gpus))
    rejected_expander(t("wep_rejected", lang, n=len(s.rejected)), s.rejected, lang)
    return cmp


def pools_frame(options: Sequence[EpPoolsOption], inputs: PlanInputs, lang: str
                ) -> pd.DataFrame:
    """The best EP-pools options, one row each, cheapest first: GPU, both pools' deployments
    and counts, GPUs paid, costs, the SLO percentile's TTFT and TPOT at the design load, the
    hand-over and the per-GPU rates (numbers, formatted by `pools_columns`)."""
    q = inputs.slo.quantile * 100
    return pd.DataFrame([{
        "#": i + 1, t("wep_col_gpu", lang): o.gpu_name,
        t("epp_col_prefill", lang): t("epp_reps", lang, n=o.prefill_replicas,
                                      what=prefill_text(o, lang)),
        t("epp_col_decode", lang): t("epp_reps", lang, n=o.decode_replicas,
                                     what=decode_text(o, lang)),
        t("wep_col_gpus", lang): o.paid_gpus,
        t("pl_col_month", lang): o.cost_per_month,
        t("fig_col_mtok_design", lang): o.cost_per_mtok_design,
        t("fig_col_mtok", lang): o.cost_per_mtok,
        t("fig_col_ttft", lang, q=q): o.ttft_ms, t("fig_col_tpot", lang, q=q): o.tpot_ms,
        t("epp_col_handover", lang): o.transfer_ms,
        t("wep_col_link", lang): handover_text(o, lang),
        t("epp_col_in", lang): o.input_tok_s_per_prefill_gpu,
        t("epp_col_out", lang): o.output_tok_s_per_decode_gpu,
        t("wep_col_weights", lang): f"{o.weights}, {o.kv_dtype} KV"}
        for i, o in enumerate(options)])


def pools_columns(inputs: PlanInputs, lang: str) -> dict[str, Any]:
    """The EP-pools table's formats: milliseconds, tokens and money in the plan's currency."""
    cur, q = inputs.currency, inputs.slo.quantile * 100
    return {
        t("fig_col_ttft", lang, q=q): st.column_config.NumberColumn(format="%.0f ms"),
        t("fig_col_tpot", lang, q=q): st.column_config.NumberColumn(format="%.1f ms"),
        t("epp_col_handover", lang): st.column_config.NumberColumn(format="%.1f ms"),
        t("epp_col_in", lang): st.column_config.NumberColumn(format="%,.0f"),
        t("epp_col_out", lang): st.column_config.NumberColumn(format="%,.0f"),
        t("pl_col_month", lang): st.column_config.NumberColumn(format=f"{cur} %,.0f"),
        t("fig_col_mtok_design", lang): st.column_config.NumberColumn(format=f"{cur} %.2f"),
        t("fig_col_mtok", lang): st.column_config.NumberColumn(format=f"{cur} %.2f")}


def pools_section(inputs: PlanInputs, lang: str) -> PoolsComparison | None:
    """Draw the EP-pools section for the page's inputs (both boxes on, a MoE model, an arrival
    rate: `ep_section` has said otherwise); returns the comparison for the quote (None when
    the search fails, said on the page)."""
    st.subheader(t("epp_title", lang))
    try:
        with st.spinner(t("epp_title", lang) + "..."):
            cmp = cache.ep_pools(inputs)
    except CapacityError as exc:
        st.error(t("pl_error", lang, msg=error_text(exc, lang)))
        return None
    box = {"pools": st.success, "wide-ep": st.info}.get(cmp.winner, st.warning)
    box(pools_winner_text(cmp, lang))
    s = cmp.pools
    best = s.best
    if best is None:
        st.warning(t("epp_none", lang, n=s.max_gpus))
    else:
        st.markdown(f"**{t('epp_q_chosen', lang)}**{t('colon', lang)}{pools_label(best, lang)}")
        st.dataframe(pools_frame(s.options[:TOP], inputs, lang), hide_index=True,
                     width="stretch", column_config=pools_columns(inputs, lang))
        st.caption(t("epp_page_note", lang, rate=f"{s.design_rate_per_s:.3g}", n=s.max_gpus))
    rejected_expander(t("epp_rejected", lang, n=len(s.rejected)), s.rejected, lang)
    return cmp
