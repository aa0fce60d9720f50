"""The Planner's disaggregated prefill/decode section (issue 27): with "Also rank disaggregated
prefill/decode" on (`planner_disagg`, the link's `disagg=1`), the verdict of
`capacity.plan.disagg.compare` (which wins and why), the cheapest disaggregated deployment in
words and a table of the best ones.

Draws only: the comparison comes from `app.cache.disagg` (cached like the plan); the words are
`capacity.report.quote_disagg`'s, the same the quote's section uses, and every figure is a field
of `DisaggOption` or its F7 (`DisaggOption.cost_per_mtok`, `cost_per_mtok_design`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from app import cache
from capacity.errors import CapacityError
from capacity.plan.disagg import Comparison, DisaggOption
from capacity.plan.options import PlanInputs
from capacity.report.i18n import error_text, t
from capacity.report.quote_disagg import deployment_text, link_name, pool_cell, winner_text

TOP: int = 10
"""Disaggregated deployments the page's table lists."""


def disagg_frame(options: Sequence[DisaggOption], inputs: PlanInputs, lang: str) -> pd.DataFrame:
    """The best disaggregated deployments, one row each: pools, link, hand-over, the SLO
    percentile's TTFT and TPOT at the design load, GPUs and costs (numbers, formatted by
    `disagg_columns`)."""
    q = inputs.slo.quantile * 100
    out = inputs.workload.output_tokens
    return pd.DataFrame([{
        "#": i + 1, t("dg_col_ratio", lang): d.ratio,
        t("dg_col_prefill", lang): pool_cell(d.prefill_gpu_name, d.prefill_replicas,
                                             d.prefill_tp, lang),
        t("dg_col_decode", lang): pool_cell(d.decode_gpu_name, d.decode_replicas, d.decode_tp,
                                            lang),
        t("dg_col_link", lang): link_name(d.link.kind, lang),
        t("dg_col_handover", lang): d.transfer_ms,
        t("fig_col_ttft", lang, q=q): d.ttft_ms, t("fig_col_tpot", lang, q=q): d.tpot_ms,
        t("dg_col_gpus", lang): d.n_gpus + d.spare_gpus,
        t("pl_col_month", lang): d.cost_per_month,
        t("fig_col_mtok_design", lang): d.cost_per_mtok_design(out),
        t("fig_col_mtok", lang): d.cost_per_mtok(out),
        t("dg_col_weights", lang): f"{d.weights}, {d.kv_dtype} KV"}
        for i, d in enumerate(options)])


def disagg_columns(inputs: PlanInputs, lang: str) -> dict[str, Any]:
    """The table's formats: milliseconds, and money in the plan's currency."""
    cur, q = inputs.currency, inputs.slo.quantile * 100
    ms = st.column_config.NumberColumn(format="%.1f ms")
    return {
        t("dg_col_handover", lang): ms, t("fig_col_tpot", lang, q=q): ms,
        t("fig_col_ttft", lang, q=q): st.column_config.NumberColumn(format="%.0f ms"),
        t("pl_col_month", lang): st.column_config.NumberColumn(format=f"{cur} %,.0f"),
        t("fig_col_mtok_design", lang): st.column_config.NumberColumn(format=f"{cur} %.2f"),
        t("fig_col_mtok", lang): st.column_config.NumberColumn(format=f"{cur} %.2f")}


def disagg_section(inputs: PlanInputs, lang: str) -> Comparison | None:
    """Draw the section for the page's inputs; returns the comparison for the quote (None
    when the inputs hold no arrival rate or it cannot be made, said on the page)."""
    st.subheader(t("dg_title", lang))
    if inputs.workload.peak_rate_per_s is None:
        st.info(t("dg_needs_rate", lang))
        return None
    try:
        cmp = cache.disagg(inputs)
    except CapacityError as exc:
        st.error(t("pl_error", lang, msg=error_text(exc, lang)))
        return None
    box = {"disaggregated": st.success, "aggregated": st.info}.get(cmp.winner, st.warning)
    box(winner_text(cmp, lang))
    best = cmp.best_disaggregated
    if best is None:
        st.warning(t("dg_none", lang, n=inputs.max_gpus))
        return cmp
    st.markdown(f"**{t('dg_q_chosen', lang)}**{t('colon', lang)}{deployment_text(best, lang)}")
    st.dataframe(disagg_frame(cmp.disaggregated[:TOP], inputs, lang), hide_index=True,
                 width="stretch", column_config=disagg_columns(inputs, lang))
    st.caption(t("dg_note", lang, eta=f"{best.link.efficiency:.0%}",
                 lat=f"{best.link.latency_ms:g}"))
    return cmp
