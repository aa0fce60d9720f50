"""Wide expert parallelism in words (issue 27): the verdict of `capacity.plan.ep_search.compare_ep`
in the page's or the quote's language, the chosen EP deployment as a buyer reads it, and the
quote's section (docs/expert-parallel.md, "On the Planner page and in the quote").

- `reason_text`: `EpComparison.reason` in `lang`, built from the same figures and branches; in
  English it is the library's own sentence, word for word (tests/test_planner_ep.py);
- `ep_label`: `EpPlanOption.label` in `lang` (in English the library's);
- `deployment_text`: '2 nodes x 8 H100 SXM: EP16, DP attention, 32 redundant experts,
  all-to-all over InfiniBand 400 Gb/s; 3 such deployments';
- `layout_text`, `network_text`, `nodes_cell`, `rejection_text`: the table cells of the Planner
  page and the quote (a rejection is a coded note, `ep_search.ep_rejection`, said from its
  code and figures);
- `ep_blocks`: the quote's section (`capacity.report.document` blocks), passed to
  `capacity.report.quote.quote_blocks` as one of its `sections` (`ep_section`).

Every figure is a field or property of `EpPlanOption` (`cost_per_month`, `cost_per_mtok`,
`cost_per_mtok_design`, `ttft_ms`, `tpot_ms`, `batch_per_gpu`, `output_tok_s_per_gpu`, ...),
the one computation the Planner page, the quote and `capacity size --wide-ep --json` share.
Pure: no Streamlit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from capacity.plan.ep_search import LINK_NAMES, EpComparison, EpPlanOption, EpRejection
from capacity.report.document import Block, Heading, Para, Table
from capacity.report.i18n import note_text, t, tn
from capacity.report.money import fmt_money, fmt_ms
from capacity.report.quote import option_label, plan_basis_name

TOP: int = 5
"""Wide-EP deployments the quote lists (the chosen one and the next ones)."""


def _month(cur: str, v: float, lang: str) -> str:
    return t("dg_month", lang, cur=cur, v=f"{v:,.0f}")


def _pct(cmp: EpComparison) -> str:
    """'p90', as `compare_ep` writes the SLO percentile."""
    return f"p{cmp.ep.inputs.slo.quantile * 100:g}"


def network_text(o: EpPlanOption, lang: str) -> str:
    """What carries the all-to-all: 'NVLink', 'InfiniBand 400 Gb/s' (`EpPlanOption.network`)."""
    key = "dg_link_" + o.link.replace("-", "_")
    name = t(key, lang) if o.link in LINK_NAMES else o.link
    return name if o.scale_up else t("wep_net_out", lang, name=name,
                                     gbit=f"{o.scale_out_gbit_s:g}")


def _attention(o: EpPlanOption, lang: str) -> str:
    return (t("wep_dp_attn", lang) if o.attention_tp == 1
            else t("wep_tp_attn", lang, tp=o.attention_tp))


def _redundant(o: EpPlanOption, lang: str) -> str:
    return t("wep_redundant", lang, n=o.redundant_experts) if o.redundant_experts else ""


def _overlap(o: EpPlanOption, lang: str) -> str:
    return t("wep_overlap_" + o.overlap.replace("-", "_"), lang)


def _nodes(o: EpPlanOption, lang: str) -> str:
    """'2 nodes x 8 H100 SXM': the nodes one deployment spans."""
    return tn("dg_nodes", o.nodes, lang, size=min(o.ep, o.gpus_per_node), gpu=o.gpu_name)


def ep_label(o: EpPlanOption, lang: str) -> str:
    """`EpPlanOption.label` in `lang`: the deployment with its overlap, weights and KV, '3 x
    (...)' for replicas, '+ 1 spare deployment' for an N+1 spare."""
    one = t("wep_label", lang, nodes=_nodes(o, lang), ep=o.ep, attn=_attention(o, lang),
            red=_redundant(o, lang), overlap=_overlap(o, lang), weights=o.weights,
            kv=o.kv_dtype, net=network_text(o, lang))
    spare = t("wep_label_spare", lang) if o.spare_gpus else ""
    return (one if o.replicas == 1 else t("wep_label_reps", lang, r=o.replicas, label=one)) + spare


def layout_text(o: EpPlanOption, lang: str) -> str:
    """One deployment's layout in a table cell: 'EP16, DP attention, 32 redundant experts,
    two-batch overlap'."""
    return t("wep_layout", lang, ep=o.ep, attn=_attention(o, lang), red=_redundant(o, lang),
             overlap=_overlap(o, lang))


def nodes_cell(o: EpPlanOption) -> str:
    """The nodes one deployment spans, in a table cell: '2 x 8'."""
    return f"{o.nodes} x {min(o.ep, o.gpus_per_node)}"


def deployment_text(o: EpPlanOption, lang: str) -> str:
    """The deployment as a buyer reads it: the nodes one deployment spans, EP degree,
    attention, redundant experts and what carries the all-to-all; then how many such
    deployments serve the load, and the spare."""
    out = t("wep_deploy", lang, nodes=_nodes(o, lang), ep=o.ep, attn=_attention(o, lang),
            red=_redundant(o, lang), net=network_text(o, lang))
    if o.replicas > 1:
        out += tn("wep_such", o.replicas, lang)
    if o.spare_gpus:
        out += t("wep_spare", lang, n=o.spare_gpus)
    return out


def reason_text(cmp: EpComparison, lang: str) -> str:
    """Why the winner wins, in `lang`: the branches and figures of `EpComparison.reason`
    (`capacity.plan.ep_search.compare_ep`), said in the language's words."""
    inp = cmp.ep.inputs
    agg, ep = cmp.aggregated.best, cmp.ep.best
    pct, n_out = _pct(cmp), inp.workload.output_tokens
    if cmp.winner == "wide-ep" and ep is not None:
        head = t("wep_r_head", lang, label=ep_label(ep, lang),
                 money=_month(ep.currency, ep.cost_per_month, lang),
                 gpus=tn("dg_gpus", ep.paid_gpus, lang), batch=f"{ep.batch:,.0f}", pct=pct,
                 tpot=f"{ep.tpot_ms:.1f}", tok=f"{ep.output_tok_s_per_gpu:,.0f}",
                 w=f"{ep.weights_per_gpu_gb:.0f}")
        if agg is None:
            return head + t("list_sep", lang) + t("wep_r_no_agg", lang, n=inp.max_gpus)
        per_gpu = agg.design_rate_per_s * n_out / agg.n_gpus
        return head + t("list_sep", lang) + t(
            "wep_r_agg_needs", lang, label=option_label(agg, lang),
            money=_month(agg.currency, agg.cost_per_month, lang),
            gpus=tn("dg_gpus", agg.paid_gpus, lang), tp=agg.tp, slots=agg.slots_per_replica,
            tok=f"{per_gpu:,.0f}")
    if cmp.winner == "aggregated" and agg is not None:
        per_gpu = agg.design_rate_per_s * n_out / agg.n_gpus
        if ep is None:
            tail = t("wep_r_no_ep", lang, n=cmp.ep.max_gpus)
        else:
            tail = t("wep_r_costs", lang, label=ep_label(ep, lang),
                     money=_month(ep.currency, ep.cost_per_month, lang),
                     gpus=tn("dg_gpus", ep.paid_gpus, lang)) + (
                t("wep_r_too_big", lang, ep=ep.ep)
                if ep.replicas == 1 and ep.n_gpus > agg.n_gpus else
                t("wep_r_tok", lang, tok=f"{ep.output_tok_s_per_gpu:,.0f}"))
        return t("wep_r_agg", lang, label=option_label(agg, lang),
                 money=_month(agg.currency, agg.cost_per_month, lang),
                 gpus=tn("dg_gpus", agg.paid_gpus, lang), pct=pct, tpot=f"{agg.tpot_ms:.1f}",
                 tok=f"{per_gpu:,.0f}", tail=tail)
    return t("wep_r_none", lang, ttft=f"{inp.slo.ttft_ms:g}", tpot=f"{inp.slo.tpot_ms:g}",
             n=inp.max_gpus, m=cmp.ep.max_gpus)


def winner_text(cmp: EpComparison, lang: str) -> str:
    """'**Wide EP wins**: wide EP: 1 node x 8 H200 SXM: ...': the verdict in bold (Markdown, as
    the page and the quote show it) and `reason_text`."""
    key = "wep_winner_" + cmp.winner.replace("-", "_")
    return f"**{t(key, lang)}**{t('colon', lang)}{reason_text(cmp, lang)}"


def rejection_text(detail: str, lang: str) -> str:
    """Why a GPU has no wide-EP deployment (`EpRejection.detail`, a coded `Note` of
    `ep_search.ep_rejection`) in `lang`, from its code and figures (`note_text`); a plain
    string stays as it is."""
    return note_text(detail, lang)


def rejected_blocks(heading: str, rejected: Sequence[EpRejection], lang: str) -> list[Block]:
    """The GPUs a search found nothing on and why (`rejection_text`), under `heading`: a
    quote's table (none when every GPU has an option)."""
    if not rejected:
        return []
    return [Para(heading), Table(("GPU", t("quote_why", lang)), tuple(
        (r.gpu_name, rejection_text(r.detail, lang)) for r in rejected))]


def ep_blocks(cmp: EpComparison, lang: str = "en", top: int = TOP) -> list[Block]:
    """The quote's section: the winner and why, the cheapest wide-EP deployment in words with
    its monthly cost, costs per million output tokens, SLO figures and step, the next ones in
    a table, the GPUs without one, and what the figures are."""
    s = cmp.ep
    inp = s.inputs
    cur, q = inp.currency, inp.slo.quantile * 100
    b: list[Block] = [Heading(t("wep_title", lang)),
                      Para(t("wep_q_intro", lang, rate=f"{s.design_rate_per_s:.3g}",
                             n=s.max_gpus)),
                      Para(winner_text(cmp, lang))]
    o = s.best
    if o is None:
        b.append(Para(t("wep_none", lang, n=s.max_gpus)))
    else:
        b.append(Para(t("wep_q_chosen", lang) + t("colon", lang) + deployment_text(o, lang)))
        b.append(Table((t("quote_quantity", lang), t("quote_value", lang)), (
            (t("wep_col_layout", lang), t("wep_layout_full", lang, layout=layout_text(o, lang),
                                          weights=o.weights, kv=o.kv_dtype)),
            (t("wep_col_gpus", lang), str(o.paid_gpus)),
            (t("fig_month", lang), fmt_money(o.cost_per_month, cur)),
            (t("fig_col_mtok_design", lang), fmt_money(o.cost_per_mtok_design, cur)),
            (t("fig_col_mtok", lang), fmt_money(o.cost_per_mtok, cur)),
            (t("fig_col_ttft", lang, q=q), fmt_ms(o.ttft_ms)),
            (t("fig_col_tpot", lang, q=q), fmt_ms(o.tpot_ms)),
            (t("wep_col_batch", lang), f"{o.batch_per_gpu:.1f}"),
            (t("wep_col_tok", lang), f"{o.output_tok_s_per_gpu:,.0f}"),
            (t("wep_col_a2a", lang), t("wep_a2a_v", lang, a=fmt_ms(o.all_to_all_ms),
                                       s=fmt_ms(o.step_ms))),
            (t("wep_col_prefill", lang), f"{o.prefill_share:.0%}"),
            (t("wep_col_capacity", lang), t("wep_capacity_v", lang,
                                            cap=f"{o.capacity_rate_per_s:.2f}",
                                            rate=f"{o.design_rate_per_s:.2f}")))))
        more = s.options[1:top]
        if more:
            b.append(Para(t("wep_q_others", lang)))
            b.append(Table(
                ("#", t("wep_col_deployment", lang), t("wep_col_gpus", lang),
                 t("fig_month", lang), t("fig_col_mtok", lang), t("fig_col_ttft", lang, q=q),
                 t("fig_col_tpot", lang, q=q), t("wep_col_tok", lang)),
                tuple((str(i), deployment_text(x, lang), str(x.paid_gpus),
                       fmt_money(x.cost_per_month, cur), fmt_money(x.cost_per_mtok, cur),
                       fmt_ms(x.ttft_ms), fmt_ms(x.tpot_ms), f"{x.output_tok_s_per_gpu:,.0f}")
                      for i, x in enumerate(more, 2))))
    b += rejected_blocks(t("wep_rejected", lang, n=len(s.rejected)), s.rejected, lang)
    b.append(Para(t("wep_note", lang, basis=plan_basis_name(inp, lang))))
    return b


def ep_section(cmp: EpComparison) -> Callable[[str], list[Block]]:
    """The quote's section for `cmp` as `capacity.report.quote.quote_blocks` takes it (one of
    its `sections`: a function of the quote's language)."""
    return partial(ep_blocks, cmp)
