"""Wide EP on disaggregated pools in words (issue 27): the verdict of
`capacity.plan.ep_pools_search.compare_pools` in the page's or the quote's language, the chosen pools
as a buyer reads them, and the quote's section (docs/expert-parallel.md, "Prefill and decode
on separate EP pools").

- `pools_reason_text`: `PoolsComparison.reason` in `lang`, from the same figures and branches;
  in English the library's own sentence, word for word (tests/test_ep_pools.py);
- `pools_label`: `EpPoolsOption.label` in `lang` (in English the library's);
- `prefill_text`, `decode_text`, `handover_text`: the two deployments and the KV's link;
- `pools_blocks`: the quote's section (`capacity.report.document` blocks), passed to
  `capacity.report.quote.quote_blocks` as one of its `sections` (`pools_section`).

Every figure is a field or property of `EpPoolsOption`, the one computation the Planner page,
the quote and `capacity size --wide-ep --disaggregated --format json` share. Pure: no
Streamlit.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from capacity.model.expert_parallel import Overlap
from capacity.plan.ep_pools import EpPoolsOption
from capacity.plan.ep_pools_search import PoolsComparison
from capacity.plan.ep_search import LINK_NAMES
from capacity.report.document import Block, Heading, Para, Table
from capacity.report.i18n import t, tn
from capacity.report.money import fmt_money, fmt_ms
from capacity.report.quote import plan_basis_name
from capacity.report.quote_ep import ep_label, rejected_blocks

TOP: int = 5
"""EP-pools options the quote lists (the chosen one and the next ones)."""


def _month(cur: str, v: float, lang: str) -> str:
    return t("dg_month", lang, cur=cur, v=f"{v:,.0f}")


def _gpus(n: int, lang: str) -> str:
    return tn("dg_gpus", n, lang)


def _pool(o: EpPoolsOption, ep: int, attention_tp: int, redundant: int, lang: str) -> str:
    nodes = tn("dg_nodes", -(-ep // o.gpus_per_node), lang, size=min(ep, o.gpus_per_node),
               gpu=o.gpu_name)
    attn = (t("wep_dp_attn", lang) if attention_tp == 1
            else t("wep_tp_attn", lang, tp=attention_tp))
    red = t("wep_redundant", lang, n=redundant) if redundant else ""
    return t("epp_pool", lang, nodes=nodes, ep=ep, attn=attn, red=red)


def prefill_text(o: EpPoolsOption, lang: str) -> str:
    """One prefill deployment: '2 nodes x 8 H100 SXM: EP16, DP attention, 32 redundant
    experts' (`EpPoolsOption.prefill_label`)."""
    return _pool(o, o.prefill_ep, o.prefill_attention_tp, o.prefill_redundant_experts, lang)


def decode_text(o: EpPoolsOption, lang: str) -> str:
    """One decode deployment with its overlap (`EpPoolsOption.decode_label`)."""
    over = t("wep_overlap_" + ("two_batch" if o.decode_overlap == Overlap.TBO.value else "sum"),
             lang)
    return t("epp_decode", lang, pool=_pool(o, o.decode_ep, o.decode_attention_tp,
                                             o.decode_redundant_experts, lang), overlap=over)


def handover_text(o: EpPoolsOption, lang: str) -> str:
    """What carries the KV between the pools: 'NVLink', 'InfiniBand 400 Gb/s'."""
    name = (t("dg_link_" + o.handover_link.replace("-", "_"), lang)
            if o.handover_link in LINK_NAMES else o.handover_link)
    return name if o.handover_link == o.fabric else t(
        "wep_net_out", lang, name=name, gbit=f"{o.scale_out_gbit_s:g}")


def pools_label(o: EpPoolsOption, lang: str) -> str:
    """`EpPoolsOption.label` in `lang`."""
    spare = t("epp_label_spare", lang) if o.spare_gpus else ""
    return t("epp_label", lang, ratio=o.ratio, x=o.prefill_replicas,
             prefill=prefill_text(o, lang), y=o.decode_replicas, decode=decode_text(o, lang),
             weights=o.weights, kv=o.kv_dtype, net=handover_text(o, lang)) + spare


def pools_reason_text(cmp: PoolsComparison, lang: str) -> str:
    """Why the winner wins, in `lang`: the branches and figures of `PoolsComparison.reason`
    (`capacity.plan.ep_pools_search.compare_pools`), said in the language's words."""
    one, two = cmp.ep.best, cmp.pools.best
    inp = cmp.pools.inputs
    pct = f"p{inp.slo.quantile * 100:g}"
    if cmp.winner == "pools" and two is not None:
        head = t("epp_r_head", lang, ratio=two.ratio, gpus=_gpus(two.paid_gpus, lang),
                 money=_month(two.currency, two.cost_per_month, lang), pct=pct,
                 tpot=f"{two.tpot_ms:.1f}", util=f"{two.prefill_utilization:.0%}",
                 xfer=f"{two.transfer_ms:.1f}", net=handover_text(two, lang))
        tail = (t("epp_r_no_one", lang, n=cmp.ep.max_gpus) if one is None else
                t("epp_r_one_needs", lang, gpus=_gpus(one.paid_gpus, lang),
                  money=_month(one.currency, one.cost_per_month, lang),
                  share=f"{one.prefill_share:.0%}", pct=pct, tpot=f"{one.tpot_ms:.1f}"))
        return head + t("list_sep", lang) + tail
    if cmp.winner == "wide-ep" and one is not None:
        if two is None:
            tail = t("epp_r_no_pools", lang, n=cmp.pools.max_gpus)
        elif two.cost_per_month > one.cost_per_month:
            tail = t("epp_r_pools_cost", lang, ratio=two.ratio, gpus=_gpus(two.paid_gpus, lang),
                     money=_month(two.currency, two.cost_per_month, lang))
        else:
            tail = t("epp_r_pools_same", lang, ratio=two.ratio, gpus=_gpus(two.paid_gpus, lang),
                     xfer=f"{two.transfer_ms:.1f}")
        return t("epp_r_one", lang, label=ep_label(one, lang), gpus=_gpus(one.paid_gpus, lang),
                 money=_month(one.currency, one.cost_per_month, lang),
                 share=f"{one.prefill_share:.0%}", pct=pct, tpot=f"{one.tpot_ms:.1f}",
                 tail=tail)
    return t("epp_r_none", lang, ttft=f"{inp.slo.ttft_ms:g}", tpot=f"{inp.slo.tpot_ms:g}",
             n=cmp.pools.max_gpus)


def pools_winner_text(cmp: PoolsComparison, lang: str) -> str:
    """'**EP pools win**: EP pools: 5P+1D ...': the verdict in bold (Markdown) and
    `pools_reason_text`."""
    key = "epp_winner_" + cmp.winner.replace("-", "_")
    return f"**{t(key, lang)}**{t('colon', lang)}{pools_reason_text(cmp, lang)}"


def pools_blocks(cmp: PoolsComparison, lang: str = "en", top: int = TOP) -> list[Block]:
    """The quote's section: the winner and why, the cheapest pools in words with their monthly
    cost, costs per million output tokens, SLO figures, hand-over and per-GPU rates, the next
    ones in a table, the GPUs without pools, and what the figures are."""
    s = cmp.pools
    inp = s.inputs
    cur, q = inp.currency, inp.slo.quantile * 100
    b: list[Block] = [Heading(t("epp_title", lang)),
                      Para(t("epp_q_intro", lang, rate=f"{s.design_rate_per_s:.3g}",
                             n=s.max_gpus)),
                      Para(pools_winner_text(cmp, lang))]
    o = s.best
    if o is None:
        b.append(Para(t("epp_none", lang, n=s.max_gpus)))
    else:
        b.append(Para(t("epp_q_chosen", lang) + t("colon", lang) + pools_label(o, lang)))
        b.append(Table((t("quote_quantity", lang), t("quote_value", lang)), (
            (t("epp_col_prefill", lang), t("epp_reps", lang, n=o.prefill_replicas,
                                           what=prefill_text(o, lang))),
            (t("epp_col_decode", lang), t("epp_reps", lang, n=o.decode_replicas,
                                          what=decode_text(o, lang))),
            (t("wep_col_gpus", lang), str(o.paid_gpus)),
            (t("fig_month", lang), fmt_money(o.cost_per_month, cur)),
            (t("fig_col_mtok_design", lang), fmt_money(o.cost_per_mtok_design, cur)),
            (t("fig_col_mtok", lang), fmt_money(o.cost_per_mtok, cur)),
            (t("fig_col_ttft", lang, q=q), fmt_ms(o.ttft_ms)),
            (t("fig_col_tpot", lang, q=q), fmt_ms(o.tpot_ms)),
            (t("epp_col_handover", lang), t("epp_handover_v", lang, xfer=fmt_ms(o.transfer_ms),
                                            wait=fmt_ms(o.transfer_wait_ms),
                                            net=handover_text(o, lang))),
            (t("epp_col_in", lang), f"{o.input_tok_s_per_prefill_gpu:,.0f}"),
            (t("epp_col_out", lang), f"{o.output_tok_s_per_decode_gpu:,.0f}"),
            (t("wep_col_capacity", lang), t("wep_capacity_v", lang,
                                            cap=f"{o.capacity_rate_per_s:.2f}",
                                            rate=f"{o.design_rate_per_s:.2f}")))))
        more = s.options[1:top]
        if more:
            b.append(Para(t("epp_q_others", lang)))
            b.append(Table(
                ("#", t("epp_col_pools", lang), t("wep_col_gpus", lang), t("fig_month", lang),
                 t("fig_col_mtok", lang), t("fig_col_ttft", lang, q=q),
                 t("fig_col_tpot", lang, q=q)),
                tuple((str(i), pools_label(x, lang), str(x.paid_gpus),
                       fmt_money(x.cost_per_month, cur), fmt_money(x.cost_per_mtok, cur),
                       fmt_ms(x.ttft_ms), fmt_ms(x.tpot_ms))
                      for i, x in enumerate(more, 2))))
    b += rejected_blocks(t("epp_rejected", lang, n=len(s.rejected)), s.rejected, lang)
    b.append(Para(t("epp_note", lang, basis=plan_basis_name(inp, lang))))
    return b


def pools_section(cmp: PoolsComparison) -> Callable[[str], list[Block]]:
    """The quote's section for `cmp` as `capacity.report.quote.quote_blocks` takes it."""
    return partial(pools_blocks, cmp)
