"""Disaggregated prefill/decode in words (issue 27): the verdict of `capacity.plan.disagg.compare`
in the page's or the quote's language, the chosen deployment as a buyer reads it, and the
quote's section (docs/disaggregation.md, "On the Planner page and in the quote").

- `reason_text`: `Comparison.reason` in `lang`, built from the same figures and branches; in
  English it is the library's own sentence, word for word (tests/test_planner_disagg.py);
- `deployment_text`: '1 node x 8 H200 SXM: prefill pool of 2 replicas x 2 GPUs, decode pool of
  2 replicas x 2 GPUs, KV over NVLink (450 GB/s per GPU)';
- `pool_text`, `pool_cell`, `link_name`: the table cells of the Planner page and the quote;
- `disagg_blocks`: the quote's section (`capacity.report.document` blocks), passed to
  `capacity.report.quote.quote_blocks` as one of its `sections`.

Every figure is a field of `DisaggOption` or F7 through `DisaggOption.cost_per_mtok` /
`cost_per_mtok_design`, the one computation the Planner page, the quote and
`capacity size --disaggregated --json` share. Pure: no Streamlit.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from capacity.catalog.nodes import node_shape
from capacity.errors import CatalogError
from capacity.plan.disagg import Comparison, DisaggOption, prefill_share
from capacity.report.document import Block, Heading, Para, Table
from capacity.report.i18n import t, tn
from capacity.report.money import fmt_money, fmt_ms
from capacity.report.quote import option_label, rejection_text

TOP: int = 5
"""Disaggregated deployments the quote lists (the chosen one and the next ones)."""


def _pct(cmp: Comparison) -> str:
    return f"p{round(cmp.inputs.slo.quantile * 100)}"


def _month(cur: str, v: float, lang: str) -> str:
    return t("dg_month", lang, cur=cur, v=f"{v:,.0f}")


def _prompts(n: int, lang: str) -> str:
    """'8K prompts' for whole multiples of 1,024 tokens, else '3,000-token prompts'."""
    return (t("dg_prompts_k", lang, k=n // 1024) if n >= 1024 and n % 1024 == 0
            else t("dg_prompts", lang, n=f"{n:,}"))


def link_name(kind: str, lang: str) -> str:
    """The link's name ('NVLink', 'InfiniBand', 'RoCE', 'Ethernet', 'Infinity Fabric')."""
    return t("dg_link_" + kind.replace("-", "_"), lang)


def reason_text(cmp: Comparison, lang: str) -> str:
    """Why the winner wins, in `lang`: the branches and figures of `Comparison.reason`
    (`capacity.plan.disagg`), said in the language's words."""
    inp, agg, dis = cmp.inputs, cmp.best_aggregated, cmp.best_disaggregated
    slo, pct, sep = inp.slo, _pct(cmp), t("list_sep", lang)
    prompts = _prompts(inp.workload.prompt, lang)
    if cmp.winner == "disaggregated" and dis is not None:
        head = t("dg_r_head", lang, ratio=dis.ratio, ptp=dis.prefill_tp, pgpu=dis.prefill_gpu_name,
                 dtp=dis.decode_tp, dgpu=dis.decode_gpu_name, n=dis.n_gpus,
                 money=_month(dis.currency, dis.cost_per_month, lang), slo=f"{slo.tpot_ms:g}",
                 prompts=prompts, pct=pct, tpot=f"{dis.tpot_ms:.1f}",
                 xfer=f"{dis.transfer_ms:.1f}", link=t("dg_kind_" + dis.link.kind.replace(
                     "-", "_"), lang))
        if agg is None:
            why = sep.join(t("dg_r_why", lang, gpu=r.gpu_name,
                             detail=rejection_text(r, slo, lang))
                           for r in cmp.aggregated.rejected[:3])
            return head + sep + t("dg_r_no_agg", lang, n=inp.max_gpus, why=why)
        money = _month(agg.currency, agg.cost_per_month, lang)
        if dis.n_gpus < agg.n_gpus:
            why = t("dg_r_fewer", lang, n=agg.n_gpus, gpu=agg.gpu_name, money=money,
                    share=f"{prefill_share(agg):.0%}", pct=pct, tpot=f"{agg.tpot_ms:.1f}")
        else:
            why = t("dg_r_pools", lang, n=agg.n_gpus, gpu=agg.gpu_name, money=money,
                    pgpu=dis.prefill_gpu_name, dgpu=dis.decode_gpu_name)
        return head + sep + why
    if cmp.winner == "aggregated" and agg is not None:
        cheap = ("" if dis is None else t(
            "dg_r_against", lang, money=_month(dis.currency, dis.cost_per_month, lang),
            ratio=dis.ratio, n=dis.n_gpus))
        tail = (t("dg_r_no_dis", lang, n=inp.max_gpus) if dis is None
                else t("dg_r_costlier", lang, xfer=f"{dis.transfer_ms:.1f}")
                if dis.cost_per_month > agg.cost_per_month
                else t("dg_r_simpler", lang, xfer=f"{dis.transfer_ms:.1f}"))
        return t("dg_r_agg", lang, label=option_label(agg, lang),
                 money=_month(agg.currency, agg.cost_per_month, lang), cheap=cheap,
                 prompts=prompts, share=f"{prefill_share(agg):.0%}", pct=pct,
                 tpot=f"{agg.tpot_ms:.1f}", tail=tail)
    return t("dg_r_none", lang, ttft=f"{slo.ttft_ms:g}", tpot=f"{slo.tpot_ms:g}",
             n=inp.max_gpus)


def _nodes(layout: tuple[int, ...], gpu_name: str, used: int, lang: str) -> str:
    """'1 node x 8 H200 SXM (6 used)', '2 nodes of 8 + 4 B200'."""
    idle = sum(layout) - used
    used_text = t("dg_used", lang, n=used) if idle > 0 else ""
    if len(set(layout)) == 1:
        return tn("dg_nodes", len(layout), lang, size=layout[0], gpu=gpu_name) + used_text
    return t("dg_nodes_mixed", lang, k=len(layout), layout=" + ".join(map(str, layout)),
             gpu=gpu_name) + used_text


def pool_text(replicas: int, tp: int, lang: str) -> str:
    """'2 replicas x 4 GPUs'."""
    return tn("dg_replicas", replicas, lang) + " x " + tn("dg_gpus", tp, lang)


def pool_cell(gpu_name: str, replicas: int, tp: int, lang: str) -> str:
    """A pool in a table cell: 'H200 SXM: 3 replicas x 4 GPUs'."""
    return gpu_name + t("colon", lang) + pool_text(replicas, tp, lang)


def shared_node(d: DisaggOption) -> int | None:
    """The node size that holds both pools (and the spare) when the KV stays in one NVLink /
    Infinity Fabric domain: the smallest offered size with room for all their GPUs; None when
    the pools hand the KV over the scale-out network (each pool on its own nodes)."""
    if not d.link.scale_up:
        return None
    total = d.n_gpus + d.spare_gpus
    sizes = [s for s in node_shape(d.prefill_gpu).gpus_per_node if s >= total]
    return min(sizes) if sizes else None


def deployment_text(d: DisaggOption, lang: str) -> str:
    """The deployment as a buyer reads it: the nodes, each pool's replicas x GPUs, and the
    link the KV crosses with its bandwidth per GPU (line rate, one way)."""
    bw = f"{min(d.link.send_gb_s, d.link.recv_gb_s):.3g}"
    link = link_name(d.link.kind, lang)
    spare = t("dg_spare", lang, n=d.spare_gpus) if d.spare_gpus else ""
    pre, dec = pool_text(d.prefill_replicas, d.prefill_tp, lang), pool_text(
        d.decode_replicas, d.decode_tp, lang)
    size = shared_node(d)
    if size is not None:
        nodes = _nodes((size,), d.prefill_gpu_name, d.n_gpus + d.spare_gpus, lang)
        return t("dg_deploy_shared", lang, nodes=nodes, prefill=pre, decode=dec, link=link,
                 bw=bw) + spare
    try:
        p_nodes = node_shape(d.prefill_gpu).layout(d.prefill_replicas * d.prefill_tp,
                                                   d.prefill_tp)
        d_nodes = node_shape(d.decode_gpu).layout(d.decode_replicas * d.decode_tp, d.decode_tp)
    except CatalogError:  # a pool no offered node holds: its GPUs, unplaced
        p_nodes, d_nodes = (d.prefill_replicas * d.prefill_tp,), (d.decode_replicas * d.decode_tp,)
    return t("dg_deploy_split", lang, prefill=pre, decode=dec, link=link, bw=bw,
             pnodes=_nodes(p_nodes, d.prefill_gpu_name, d.prefill_replicas * d.prefill_tp,
                           lang),
             dnodes=_nodes(d_nodes, d.decode_gpu_name, d.decode_replicas * d.decode_tp,
                           lang)) + spare


def winner_text(cmp: Comparison, lang: str) -> str:
    """'**Disaggregated wins**: disaggregated: 1P+1D (...)...': the verdict in bold (Markdown,
    as the page and the quote show it) and `reason_text`."""
    return f"**{t('dg_winner_' + cmp.winner, lang)}**{t('colon', lang)}{reason_text(cmp, lang)}"


def disagg_blocks(cmp: Comparison, lang: str = "en", top: int = TOP) -> list[Block]:
    """The quote's section: the winner and why, the cheapest disaggregated deployment in words
    with its monthly cost, costs per million output tokens and SLO figures, the next ones in a
    table, and the hand-over's assumptions."""
    inp = cmp.inputs
    cur, out = inp.currency, inp.workload.output_tokens
    q = inp.slo.quantile * 100
    b: list[Block] = [Heading(t("dg_title", lang)),
                      Para(t("dg_q_intro", lang, rate=f"{cmp.disaggregated[0].design_rate_per_s:.3g}"
                             if cmp.disaggregated else "-")),
                      Para(winner_text(cmp, lang))]
    d = cmp.best_disaggregated
    if d is None:
        b.append(Para(t("dg_none", lang, n=inp.max_gpus)))
        return b
    b.append(Para(t("dg_q_chosen", lang) + t("colon", lang) + deployment_text(d, lang)))
    b.append(Table((t("quote_quantity", lang), t("quote_value", lang)), (
        (t("dg_col_ratio", lang), f"{d.ratio}, {d.weights}, {d.kv_dtype} KV"),
        (t("dg_col_gpus", lang), str(d.n_gpus + d.spare_gpus)),
        (t("fig_month", lang), fmt_money(d.cost_per_month, cur)),
        (t("fig_col_mtok_design", lang), fmt_money(d.cost_per_mtok_design(out), cur)),
        (t("fig_col_mtok", lang), fmt_money(d.cost_per_mtok(out), cur)),
        (t("fig_col_ttft", lang, q=q), fmt_ms(d.ttft_ms)),
        (t("fig_col_tpot", lang, q=q), fmt_ms(d.tpot_ms)),
        (t("dg_col_handover", lang), t("dg_handover_v", lang, x=fmt_ms(d.transfer_ms),
                                       w=fmt_ms(d.transfer_wait_ms), q=q)),
        (t("dg_col_capacity", lang), t("dg_capacity_v", lang, p=f"{d.prefill_capacity_per_s:.2f}",
                                       d=f"{d.decode_capacity_per_s:.2f}",
                                       rate=f"{d.design_rate_per_s:.2f}")))))
    more = cmp.disaggregated[1:top]
    if more:
        b.append(Para(t("dg_q_others", lang)))
        b.append(Table(
            ("#", t("dg_col_ratio", lang), t("dg_col_prefill", lang), t("dg_col_decode", lang),
             t("dg_col_link", lang), t("dg_col_handover", lang), t("fig_col_ttft", lang, q=q),
             t("fig_col_tpot", lang, q=q), t("dg_col_gpus", lang), t("fig_month", lang),
             t("fig_col_mtok", lang)),
            tuple((str(i), o.ratio,
                   pool_cell(o.prefill_gpu_name, o.prefill_replicas, o.prefill_tp, lang),
                   pool_cell(o.decode_gpu_name, o.decode_replicas, o.decode_tp, lang),
                   link_name(o.link.kind, lang), fmt_ms(o.transfer_ms), fmt_ms(o.ttft_ms),
                   fmt_ms(o.tpot_ms), str(o.n_gpus + o.spare_gpus),
                   fmt_money(o.cost_per_month, cur), fmt_money(o.cost_per_mtok(out), cur))
                  for i, o in enumerate(more, 2))))
    b.append(Para(t("dg_note", lang, eta=f"{d.link.efficiency:.0%}",
                    lat=f"{d.link.latency_ms:g}")))
    return b


def disagg_section(cmp: Comparison) -> Callable[[str], list[Block]]:
    """The quote's section for `cmp` as `capacity.report.quote.quote_blocks` takes it (one of
    its `sections`: a function of the quote's language)."""
    return partial(disagg_blocks, cmp)
