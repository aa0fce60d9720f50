"""The Planner's words, figures and tables: what `pages/planner.py` shows of a plan.

No widget is drawn here and nothing is searched: the plan comes from `app.cache` (which calls
`capacity.plan`); this module writes its options, rejections, mix and log sizing in the page's
language, mostly through the quote's own wording (`capacity.report.quote`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from app.layout import Metric
from capacity import workspace
from capacity.fit.traffic import LogSummary
from capacity.model.workload import Workload
from capacity.plan.alternatives import Alternative
from capacity.plan.detail import prefix_served
from capacity.plan.drafting import draft_note
from capacity.plan.mix import Fleet, MixPlan
from capacity.plan.options import Option, Plan, PlanInputs
from capacity.plan.search import runs_out_month
from capacity.report.i18n import t
from capacity.report.planner_url import PlannerState, planner_url
from capacity.report.quote import (
    alternative_text,
    basis_text,
    draft_note_text,
    draft_text,
    fix_text,
    fmt_money,
    fmt_ms,
    headline_rows,
    nodes_text,
    option_label,
    rejection_text,
    variants_text,
)

CTX_CHOICES = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
"""The context lengths the Planner offers (those the model takes)."""


def quote_link(state: PlannerState) -> str:
    """The Planner's address for the quote's link: the deployment's public address
    ($CAPACITY_PUBLIC_URL) when one is set, else relative (never the address this browser
    reached, which behind a proxy is a loopback one)."""
    return planner_url(state, base=workspace.public_url() + "/planner")


def best_captions(best: Option, inputs: PlanInputs, lang: str) -> list[str]:
    """The lines under the best option's name: its nodes and model variants, the prediction's
    basis, and (with growth) the month it runs out."""
    twins = variants_text(best, lang)  # named as such: read bare, it looked like the option's own
    lines = [" · ".join(x for x in (nodes_text(best, lang),
                                    twins and t("quote_variants", lang) + t("colon", lang) + twins)
                        if x),
             t("quote_basis", lang) + t("colon", lang) + basis_text(inputs, lang)]
    if best.draft:
        lines.append(t("dr_title", lang) + t("colon", lang) + draft_text(best, lang))
    if inputs.growth_per_month > 0:
        month = runs_out_month(inputs, best)
        lines.append(t("quote_growth", lang, g=inputs.growth_per_month) + t("colon", lang) + (
            t("quote_growth_v", lang, m=month) if month is not None
            else t("quote_growth_never", lang)))
    return lines


def draft_caption(result: Plan, lang: str) -> str:
    """Where the searched draft stops paying for the recommended option, or why none was
    chosen (`capacity.plan.drafting.draft_note`, in the quote's words); '' when no draft was
    searched."""
    note = draft_note(result)
    return "" if note is None else (t("dr_title", lang) + t("colon", lang)
                                    + draft_note_text(note, lang))


def headline_metrics(result: Plan, best: Option, lang: str) -> list[Metric]:
    """The best option's key figures: the quote's own labels and strings
    (`capacity.report.quote.headline_rows`), and what binds it."""
    return [*(Metric(label, value, help=label) for label, value in headline_rows(result, best, lang)),
            Metric(t("pl_col_binding", lang),
                   t("pl_binding_value", lang, reason=t("pl_reason_" + best.binding, lang),
                     share=f"{best.binding_ratio:.0%}"))]


def options_frame(options: Sequence[Option], pct: float, lang: str,
                  link: Callable[[Option], str]) -> pd.DataFrame:
    """The ranked options table: what a buyer compares, narrow enough for a 1400 px window
    (no sideways scrolling): the option (GPUs x count, layout, weights, KV), GPUs paid, cost per
    month and per M output tokens at the design load, TTFT and TPOT at the SLO percentile
    against their targets (headers, and `options_columns`' help), the binding constraint with
    its share of the limit, and a link to the option in the Explorer. The rest is in
    `option_details_frame`."""
    q = int(pct)
    return pd.DataFrame([{
        "#": i + 1, t("pl_col_option", lang): option_label(o, lang),
        t("fig_col_gpus", lang): o.paid_gpus, t("pl_col_month", lang): o.cost_per_month,
        t("pl_col_mtok", lang): o.cost_per_mtok_design,
        t("pl_col_ttft", lang, q=q): fmt_ms(o.ttft_ms), t("pl_col_tpot", lang, q=q): fmt_ms(o.tpot_ms),
        t("pl_col_binding", lang): t("pl_binding_value", lang,
                                     reason=t("pl_reason_" + o.binding, lang),
                                     share=f"{o.binding_ratio:.0%}"),
        t("pl_col_link", lang): link(o)}
        for i, o in enumerate(options)])


OPTION_PX = 345
"""The options table's option column, px, when a name would not fit on one line in it: what a
1400 px window leaves it beside the other columns (English 'throughput (48%)' is the widest
binding cell)."""
WRAP_ROW_PX = 68
"""A row tall enough for two lines (Streamlit wraps a cell's text only in rows over 64 px)."""


def text_px(text: str) -> float:
    """About how wide `text` is in a table cell, px, in Streamlit's 14 px Source Sans (its
    canvas's measureText: a CJK or full-width character 14, a space 2.8, ',' 3.5, '(' 4.2, a
    digit 7, 'K' 8.1, 'x' 6.2; '4 x A100 40GB SXM (2 replicas x TP=2), awq, fp8 KV' 291 and its
    Chinese name 312, within 3 px)."""
    def width(ch: str) -> float:
        if unicodedata.east_asian_width(ch) in "WF":
            return 14.0
        if ch == " ":
            return 2.8
        if ch in ",.;:()[]'|/!ilj":
            return 4.0
        return 8.2 if ch.isupper() else 7.0 if ch.isdigit() else 6.5
    return sum(map(width, text))


def options_layout(labels: Sequence[str]) -> tuple[int | None, int | None]:
    """The options table's row height and option column width, px: (None, None), Streamlit's
    own (one line, as wide as the longest name), unless a name (a draft, a spare, whole nodes)
    is wider than `OPTION_PX`; then the column is that wide and its rows hold two lines, so
    the name wraps instead of the table scrolling sideways."""
    if max(map(text_px, labels), default=0.0) + 17 <= OPTION_PX:  # 8.5 px padding each side
        return None, None
    return WRAP_ROW_PX, OPTION_PX


def option_details_frame(options: Sequence[Option], lang: str) -> pd.DataFrame:
    """The ranked options' other figures, row for row under the same numbers (#; the option's
    name would make the table too wide for a 1400 px window again): the price per GPU-hour,
    the cost per M output tokens at the SLO-feasible capacity and that capacity, the memory
    verdict, the nodes, the equivalent variants and (when any option has a draft, which its
    name says) the draft's acceptance length."""
    drafts = any(o.draft for o in options)
    return pd.DataFrame([{
        "#": i + 1,
        t("fig_col_price", lang): o.price_per_hour, t("fig_col_mtok", lang): o.cost_per_mtok,
        t("pl_col_max_rate", lang): round(o.capacity_rate_per_s, 3),
        t("pl_col_memory", lang): t("quote_verdict_" + (o.memory_verdict or ""), lang),
        t("pl_col_nodes", lang): " + ".join(map(str, o.nodes)),
        t("pl_col_variants", lang): variants_text(o, lang),
        **({t("pl_col_tau", lang): round(o.draft_acceptance_length, 2) if o.draft else None}
           if drafts else {})}
        for i, o in enumerate(options)])


def options_columns(inputs: PlanInputs, pct: float, lang: str,
                    option_px: int | None = None) -> dict[str, Any]:
    """The options tables' column formats (money in the currency, the link as a link), the
    short headers' meaning (help: the design load, the SLO targets) and the option column's
    width (`option_px`, `options_layout`'s; None: as wide as its longest name)."""
    cur, q = inputs.currency, int(pct)
    money = {"format": f"{cur} %.2f"}
    return {
        t("pl_col_option", lang): st.column_config.TextColumn(width=option_px),
        t("fig_col_gpus", lang): st.column_config.NumberColumn(help=t("fig_gpus", lang)),
        t("pl_col_link", lang): st.column_config.LinkColumn(
            t("pl_col_link", lang), display_text=t("pl_open", lang), help=t("pl_explorer", lang)),
        t("fig_col_price", lang): st.column_config.NumberColumn(**money),
        t("pl_col_month", lang): st.column_config.NumberColumn(format=f"{cur} %,.0f"),
        t("pl_col_mtok", lang): st.column_config.NumberColumn(
            **money, help=t("pl_help_mtok", lang)),
        t("fig_col_mtok", lang): st.column_config.NumberColumn(**money),
        t("pl_col_ttft", lang, q=q): st.column_config.TextColumn(help=t(
            "pl_help_ttft", lang, q=q, slo=fmt_ms(inputs.slo.ttft_ms))),
        t("pl_col_tpot", lang, q=q): st.column_config.TextColumn(help=t(
            "pl_help_tpot", lang, q=q, slo=fmt_ms(inputs.slo.tpot_ms))),
        t("pl_col_binding", lang): st.column_config.TextColumn(help=t("pl_help_binding", lang)),
        t("pl_col_tau", lang): st.column_config.NumberColumn(format="%.2f",
                                                             help=t("draft_tau", lang))}


def rejected_markdown(result: Plan, inputs: PlanInputs, lang: str) -> str:
    """The GPUs no option fits on, each with its reasons and what it would take."""
    return "\n".join(
        f"- **{r.gpu_name}**{t('colon', lang)}"
        f"{t('comma', lang).join(t('pl_reason_' + x, lang) for x in r.reasons)}"
        f"{t('dash', lang)}"
        f"{rejection_text(r, inputs.slo, lang)}"
        for r in result.rejected)


def cheaper_markdown(cheaper: Sequence[Alternative], inputs: PlanInputs, lang: str) -> str:
    """The cheaper alternatives to the rejected GPUs, one a line."""
    return "\n".join(f"- **{a.gpu_name}**{t('colon', lang)}{alternative_text(a, inputs, lang)}"
                     for a in cheaper)


def near_misses_markdown(result: Plan, lang: str) -> str:
    """The options that missed by a little, each with the fixes that would make it pass."""
    return "\n".join(
        f"- {option_label(m.option, lang)}{t('colon', lang)}"
        + t("list_sep", lang).join(fix_text(f, m.option.tp, lang) for f in m.fixes)
        for m in result.near_misses)


def prefix_caption(inp: PlanInputs, o: Option, lang: str) -> str:
    """'' unless the engine's cache serves less of the shared prefix than asked on `o`."""
    served, asked, kind = prefix_served(inp, o)
    return t("pl_prefix_served", lang, served=f"{served:,}", asked=f"{asked:,}",
             why=t("prefix_why_" + kind, lang)) if served < asked else ""


def fleet_heading(fleet: Fleet, cur: str, lang: str) -> str:
    """The mix's cheapest fleet: GPU, count and monthly cost."""
    return "#### " + t("mix_fleet", lang, gpu=fleet.gpu_name, n=fleet.paid_gpus,
                       cost=fmt_money(fleet.cost_per_month, cur))


def fleet_frame(fleet: Fleet, cur: str, pct: float, lang: str) -> pd.DataFrame:
    """The fleet's workloads: each one's option, GPUs, cost, share and latency."""
    return pd.DataFrame([{
        t("mix_workload", lang): p.name, t("pl_model", lang): p.plan.model_name,
        t("pl_col_option", lang): option_label(p.option, lang),
        t("mix_gpus", lang): p.option.paid_gpus,
        t("pl_col_month", lang): fmt_money(p.option.cost_per_month, cur),
        t("mix_share", lang): f"{fleet.share(p):.0%}",
        t("fig_col_mtok", lang): fmt_money(p.option.cost_per_mtok, cur),
        t("fig_col_ttft", lang, q=int(pct)): fmt_ms(p.option.ttft_ms),
        t("fig_col_tpot", lang, q=int(pct)): fmt_ms(p.option.tpot_ms)}
        for p in fleet.parts])


def other_fleets_text(mix: MixPlan, cur: str, lang: str) -> str:
    """The next cheapest fleets (up to three), in one line."""
    return t("mix_others", lang) + t("colon", lang) + t("list_sep", lang).join(
        f"{f.paid_gpus} x {f.gpu_name} {fmt_money(f.cost_per_month, cur)}"
        for f in mix.fleets[1:4])


def log_bad_text(log: LogSummary, lang: str) -> str:
    """The log's rows left out, by reason."""
    return t("pl_log_bad", lang, reasons=t("list_sep", lang).join(
        f"{n:,} {t(f'pl_log_bad_{i}', lang)}" for i, n in enumerate(log.bad_rows.values()) if n))


def log_peak_caption(log: LogSummary, lang: str) -> str:
    """The log's busiest hour: when, how many requests, the peak rate, burstiness, reuse."""
    cv = f"{log.burstiness_cv:.2f}" if log.burstiness_cv == log.burstiness_cv else "-"
    return t("pl_log_peak", lang, hour=f"{log.busiest_hour_of_day:02d}",
             clock=t("pl_log_clock_utc" if log.absolute_time else "pl_log_clock_rel", lang),
             n=f"{log.busiest_hour_requests:,}", rate=f"{log.peak_rate_per_s:.3f}",
             cv=cv, reuse=f"{log.prefix_reuse_share:.0%}")


def log_workload_caption(log: LogSummary, wl: Workload, pct: float, lang: str) -> str:
    """The workload the log's busiest hour gives."""
    return t("pl_log_workload", lang, rate=f"{log.peak_rate_per_s:.3f}",
             prompt=f"{wl.prompt:,}", out=f"{wl.output_tokens:,}",
             ctx=f"{wl.context_tokens:,}", q=f"{pct:g}")


def log_options_frame(log_plan: Plan, pct: float, lang: str) -> pd.DataFrame:
    """The ten best options for the log's busiest hour."""
    q = int(pct)
    return pd.DataFrame([{
        "#": i + 1, t("pl_col_option", lang): option_label(o, lang),
        t("pl_col_month", lang): round(o.cost_per_month), t("fig_col_mtok", lang): o.cost_per_mtok,
        t("fig_col_ttft", lang, q=q): fmt_ms(o.ttft_ms), t("fig_col_tpot", lang, q=q): fmt_ms(o.tpot_ms),
        t("pl_col_max_rate", lang): round(o.capacity_rate_per_s, 3),
        t("pl_col_binding", lang): t("pl_reason_" + o.binding, lang)}
        for i, o in enumerate(log_plan.options[:10])])
