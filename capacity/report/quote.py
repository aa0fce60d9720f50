"""The quote: a Markdown and a PDF document for the chosen option, in English or Chinese.

Contents: the customer's inputs, the recommendation and the runner-up, the capacity table, cost
per month and per million tokens, the assumptions (prices with their dates, efficiencies,
headroom, the queueing model), the GPU families that were ruled out and why, and the sentence
that these are estimates to be confirmed by measurement; and, when asked for, more `sections` after
the ranked options (disaggregated prefill/decode: `capacity.report.quote_disagg`).

One list of blocks (heading, paragraph, table; `capacity.report.document`) renders to both formats.
Chinese needs a CJK font (Debian `fonts-noto-cjk`), looked up in `CAPACITY_CJK_FONT`, then in the
usual font folders; without one, the PDF falls back to English and says so."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from capacity.catalog.engines import engine_profile
from capacity.catalog.loader import Catalog, Model, default_catalog
from capacity.catalog.nodes import node_shape
from capacity.catalog.offers import Offer
from capacity.errors import InputError
from capacity.model.fixes import Fix, FixKind
from capacity.model.pipeline import copy_layout
from capacity.model.prefix import TOKEN_GRAIN, prefix_capacity_table, prefix_effect
from capacity.model.roofline import Bound
from capacity.model.scenario import TableRow, capacity_table
from capacity.model.speculative import parse_draft
from capacity.plan.alternatives import Alternative, Relax
from capacity.plan.detail import design_concurrency_total, option_scenario, prefix_c_vram
from capacity.plan.drafting import MAX_BREAKEVEN_BATCH, DraftNote, DraftOutcome, draft_note
from capacity.plan.mix import MixPlan
from capacity.plan.options import GpuBand, Option, Plan, PlanInputs, Reason, Rejection, Slo
from capacity.plan.pricing import PriceKind
from capacity.plan.search import runs_out_month
from capacity.report.bases import band_text, basis_name, knobs_text
from capacity.report.check import miss_text
from capacity.report.document import Block, Heading, Para, Table, blocks_pdf, render_markdown
from capacity.report.i18n import LANGS, engine_label, t, tn
from capacity.report.money import fmt_money, fmt_ms, fmt_price
from capacity.units import GB

if TYPE_CHECKING:  # in annotations only: the event model loads when an option is simulated
    from capacity.plan.events import QueueResult

Sections = Sequence[Callable[[str], list[Block]]]
"""More sections of a quote, each a function of the quote's language (`quote_blocks`)."""


def _zh(lang: str) -> bool:
    return lang == "zh"


def option_label(o: Option, lang: str) -> str:
    """The option's label in `lang` ('2 x RTX 4090 (TP=2), awq, fp16 KV' in English)."""
    if not _zh(lang):
        return o.label
    one = copy_layout(o.tp, o.pp)
    if o.n_gpus == 1:
        par = ""
    elif o.copies == 1:
        par = f"（{one}）"
    else:
        par = "（" + t("lbl_replicas", lang, r=o.copies) + (f" x {one}" if one else "") + "）"
    spare = t("lbl_spare", lang, n=o.spare_gpus) if o.spare_gpus else ""
    k = o.paid_gpus // o.node_gpus if o.node_gpus else 0
    whole = (tn("lbl_whole_nodes", k, lang, k=k, g=o.node_gpus,
                used=o.n_gpus + o.spare_gpus) if o.node_gpus and o.idle_gpus else "")
    draft = "，" + draft_label(o.draft, lang) if o.draft else ""
    return f"{o.n_gpus} x {o.gpu_name}{par}{spare}，{o.weights}，{o.kv_dtype} KV{draft}{whole}"


def draft_label(key: str, lang: str) -> str:
    """A draft key in `lang`: 'eagle:3' -> 'EAGLE k=3' (`Option.draft_suffix`'s words)."""
    kind, depth = parse_draft(key)
    return t("pl_draft_opt", lang, kind=t("pl_draft_kind_" + kind, lang), k=depth)


def _tau_source(src: str, lang: str) -> str:
    """Where tau comes from, in `lang`: the published row's source, with the depth whose rate
    `make_draft` carried over, or the value entered."""
    if src == "entered":
        return t("dr_entered", lang)
    if m := re.fullmatch(r"(.*) \(depth (\d+)\)", src):
        return t("dr_src_near", lang, src=m.group(1), d=m.group(2))
    return src


def draft_text(o: Option, lang: str) -> str:
    """The draft an option runs, with its tau and where tau comes from ('EAGLE k=3, tau 2.74
    from https://...'); '' without a draft."""
    if not o.draft:
        return ""
    return t("dr_draft", lang, label=draft_label(o.draft, lang),
             tau=f"{o.draft_acceptance_length:.2f}", src=_tau_source(o.draft_source, lang))


def draft_note_text(n: DraftNote, lang: str) -> str:
    """What the searched draft did for the recommended option (`capacity.plan.drafting`), in
    `lang`: where it stops paying and whether the design load is past it, or why no draft
    was chosen. `capacity size`, the Planner page and the quote show this sentence."""
    values = {"draft": t("dr_draft", lang, label=draft_label(n.draft, lang),
                         tau=f"{n.acceptance_length:.2f}", src=_tau_source(n.source, lang)),
              "c": n.design_batch, "even": n.breakeven_batch or MAX_BREAKEVEN_BATCH,
              "t1": fmt_ms(n.draft_tpot_ms), "t0": fmt_ms(n.plain_tpot_ms)}
    if n.outcome == DraftOutcome.PAYS:
        return t("dr_pays" if n.breakeven_batch else "dr_pays_always", lang, **values)
    if n.outcome == DraftOutcome.PAST:
        return t("dr_past", lang, **values)
    if n.outcome == DraftOutcome.SLOWER:
        why = (t("dr_why_compute", lang, k1=n.depth + 1, **values)
               if n.verify_bound == Bound.COMPUTE
               else t("dr_why_draft", lang, tau=f"{n.acceptance_length:.2f}"))
        return t("dr_slower", lang, why=why, **values)
    if n.outcome == DraftOutcome.MEMORY:
        return t("dr_memory", lang, n=n.slots_per_replica, **values)
    if n.outcome == DraftOutcome.CAPACITY:
        return t("dr_capacity", lang, r1=f"{n.capacity_rate_per_s:.3g}",
                 r0=f"{n.plain_capacity_rate_per_s:.3g}", **values)
    sep = "、" if _zh(lang) else ", "
    return t("dr_fails", lang, reasons=sep.join(t("quote_reason_" + x, lang)
                                                for x in n.failures) or "-", **values)


def fix_text(f: Fix, tp: int, lang: str) -> str:
    """One memory fix in `lang` (`Fix.description` in English: the same words, the same
    layout): `tp` is the deployment's before the fix."""
    if not _zh(lang):
        return f.description
    if f.kind == FixKind.GPUS:
        return (t("fix_gpus", lang, n=f.value, r=int(f.value) // f.tp) if f.pp == 1
                and f.tp in (1, tp) else t("fix_gpus_at", lang, n=f.value, layout=copy_layout(f.tp, f.pp)))
    if f.kind == FixKind.TP:
        return t("fix_tp", lang, tp=f.value, n=f.n_gpus)
    if f.kind == FixKind.WEIGHTS:
        return t("fix_weights", lang,   # the format's name, as the English says it
                 w=getattr(default_catalog().formats.get(str(f.value)), "name", f.value))
    if f.kind == FixKind.KV_DTYPE:
        return t("fix_kv", lang, d=str(f.value).upper())
    if f.kind == FixKind.CONTEXT:
        ctx = int(f.value)
        return t("fix_ctx", lang, ctx=f"{ctx // 1024}K" if ctx >= 1024 else str(ctx))
    return t("fix_conc", lang, c=f.value)


def rejection_text(r: Rejection, slo: Slo, lang: str) -> str:
    """Why a GPU family is ruled out, in `lang` (`Rejection.detail` in English)."""
    c = r.closest
    if not _zh(lang) or c is None:
        return r.detail
    if r.never_fits:
        return t("rej_never", lang, n=r.most_gpus, w=c.weights, kv=c.kv_dtype)
    sep = "、"
    text = t("rej_closest", lang, label=option_label(c, lang),
             reasons=sep.join(t("quote_reason_" + x, lang) for x in c.failures))
    if Reason.TTFT in c.failures:
        pre_s, slo_s = c.prefill_ms / 1e3, slo.ttft_ms / 1e3
        text += (t("rej_prefill", lang, pre=pre_s, slo=slo_s) if c.prefill_ms > slo.ttft_ms
                 else t("rej_latency", lang, pre=pre_s, ms=r.latency_ms, slo=slo_s)
                 if c.prefill_ms + r.latency_ms > slo.ttft_ms
                 else t("rej_queue", lang, pre=pre_s, q=slo.quantile * 100, slo=slo_s))
    return text


def source_text(text: str, lang: str) -> str:
    """A catalog price source in `lang`: the known default sources have a translation
    (`src_` messages); any other source is the data's own text."""
    for key in ("src_cloud", "src_rental", "src_chapter"):
        if t(key, "en") == text:
            return t(key, lang)
    return text


def offer_text(offer: Offer, lang: str) -> str:
    """An offer as the quote names it: provider, kind, price per GPU- or node-hour, date and
    source ('RunPod, spot, USD 0.34 per GPU-hour, as of 2026-03 (https://...)'); English is
    `Offer.description`."""
    english = lang != "zh"
    if english:
        return offer.description
    unit = (t("offer_per_node", lang, n=offer.gpus_per_node) if offer.per == "node"
            else t("offer_per_gpu", lang))
    parts = [x for x in (offer.provider, t("offer_kind_" + offer.kind, lang)) if x]
    text = t("comma", lang).join([*parts, f"{unit} {offer.currency} {offer.price:g}"])
    if offer.as_of:
        text += t("offer_as_of", lang, date=offer.as_of)
    return text + (t("offer_source", lang, src=offer.source) if offer.source else "")


_money, _ms = fmt_money, fmt_ms


def quote_file_name(plan: Plan, lang: str) -> str:
    """The quote's file name without its suffix: the model, the date and the language
    ('capacity-quote-qwen3.5-9b-awq-2026-12-01-zh'), so two languages never share one."""
    safe = "".join(c if c.isalnum() or c in "-._" else "-" for c in plan.inputs.model)
    return f"capacity-quote-{safe}-{dt.date.today().isoformat()}-{lang}"


def plan_basis_name(inp: PlanInputs, lang: str) -> str:
    """The basis of a plan's speed figures in words (`basis_name`)."""
    return basis_name(inp.basis, inp.calibration or inp.typical, lang)


def basis_text(inp: PlanInputs, lang: str) -> str:
    """Which basis each figure uses: speed (TTFT, TPOT, capacity, cost per M tokens) the plan's;
    memory the catalog's, or the driver's (`PlanInputs.runtime_memory`); cost the prices."""
    memory = t("quote_memory_driver" if inp.runtime_memory else "quote_memory_catalog", lang)
    return t("quote_basis_per_figure", lang, speed=plan_basis_name(inp, lang), memory=memory)


def price_source(inp: PlanInputs, gpu: str, lang: str, catalog: Catalog | None = None) -> str:
    """Where a plan's price of `gpu` comes from, short ('on-demand offer, Vultr, as of
    2026-05-18'; 'catalog price, as of 2026-11'; 'entered'): `PlanInputs.price_of`'s source."""
    g = (catalog or default_catalog()).gpu(gpu)
    pr = inp.price_of(g)
    if pr.kind == PriceKind.ENTERED:
        return t("fig_price_entered", lang)
    if pr.offer is not None:
        provider = (t("comma", lang) + pr.offer.provider) if pr.offer.provider else ""
        return t("fig_price_offer", lang, kind=t("offer_kind_" + pr.offer.kind, lang),
                 provider=provider, date=pr.offer.as_of or "-")
    if pr.missing_kind:
        return t("fig_price_missing", lang, kind=t("offer_kind_" + pr.missing_kind, lang))
    return t("fig_price_catalog", lang, date=g.price_as_of)


def gpus_text(o: Option, lang: str) -> str:
    """What the GPUs an option is paid for do: '2 serving + 1 spare', with the idle GPUs of
    whole nodes."""
    text = (t("fig_gpus_v", lang, n=o.n_gpus, spare=o.spare_gpus)
            if o.spare_gpus or o.idle_gpus else t("fig_gpus_v1", lang))
    return text + (t("fig_gpus_idle", lang, idle=o.idle_gpus) if o.idle_gpus else "")


def figure_rows(inp: PlanInputs, o: Option, lang: str, catalog: Catalog | None = None
                ) -> list[tuple[str, str]]:
    """A deployment's figures, labelled, as every surface shows them (`Option`, one definition
    each): the GPUs paid for, the price per GPU-hour with its source, cost per month, cost per
    M output tokens at the design load and at the SLO-feasible capacity (F7: the fleet's cost
    per hour over the output tokens per hour at that load), and TTFT and TPOT at the SLO
    percentile at the design load. The Planner page, the quote and the Explorer show these
    labels and strings."""
    q = inp.slo.quantile * 100
    cur = inp.currency
    return [
        (t("fig_gpus", lang) + _paren(gpus_text(o, lang), lang), str(o.paid_gpus)),
        (t("fig_price", lang) + _paren(price_source(inp, o.gpu, lang, catalog), lang),
         fmt_price(o.price_per_hour, cur)),
        (t("fig_month", lang), fmt_money(o.cost_per_month, cur)),
        (t("fig_mtok_design", lang, rate=f"{o.design_rate_per_s:.3g}"),
         fmt_money(o.cost_per_mtok_design, cur)),
        (t("fig_mtok", lang, rate=f"{o.capacity_rate_per_s:.3g}"),
         fmt_money(o.cost_per_mtok, cur)),
        (t("fig_ttft", lang, q=q), fmt_ms(o.ttft_ms)),
        (t("fig_tpot", lang, q=q), fmt_ms(o.tpot_ms)),
    ]


def _paren(text: str, lang: str) -> str:
    return f"（{text}）" if lang == "zh" else f" ({text})"


def headline_rows(plan: Plan, o: Option, lang: str) -> list[tuple[str, str]]:
    """The option's headline figures, labelled (`figure_rows` of the plan's inputs)."""
    return figure_rows(plan.inputs, o, lang)


def variants_text(o: Option, lang: str) -> str:
    """The twins folded into an option ('int8 weights, fp16 KV'; a summary past three)."""
    if not o.variants:
        return ""
    if len(o.variants) <= 3:
        sep = "；" if lang == "zh" else "; "
        return sep.join(t("quote_variant", lang, w=w, kv=kv) for w, kv in o.variants)
    ws = "/".join(dict.fromkeys(w for w, _ in o.variants))
    kvs = "/".join(dict.fromkeys(kv for _, kv in o.variants))
    return t("quote_variants_many", lang, n=len(o.variants), w=ws, kv=kvs)


def nodes_text(o: Option, lang: str) -> str:
    """'3 nodes of 2 + 1 GPUs (SXM, NVLink domain of 8 GPUs)'; the link is the GPU's own
    (NVLink, Infinity Fabric, or PCIe only: data/nodes.toml)."""
    if not o.nodes:
        return ""
    shape = node_shape(o.gpu)
    link = (t("quote_link_" + shape.fabric.replace("-", "_"), lang, n=shape.nvlink_domain)
            if shape.nvlink_domain > 1 else t("quote_link_pcie", lang))
    sep = "、" if lang == "zh" else " + "
    form = t("quote_form_" + shape.form_factor, lang)
    if len(o.nodes) == 1:  # 'one node of 1 GPU': the GPU count's plural
        return tn("quote_nodes_v1", o.nodes[0], lang, layout=str(o.nodes[0]), form=form,
                  link=link)
    return t("quote_nodes_v", lang, n=len(o.nodes), layout=sep.join(map(str, o.nodes)),
             form=form, link=link)


def _option_rows(plan: Plan, o: Option, lang: str) -> list[tuple[str, str]]:
    extra = [(t("quote_nodes", lang), nodes_text(o, lang))] if o.nodes else []
    if o.draft:
        extra.append((t("dr_title", lang), draft_text(o, lang)))
    if o.variants:
        extra.append((t("quote_variants", lang), variants_text(o, lang)))
    return [
        (t("quote_config", lang), option_label(o, lang)),
        *extra,
        *figure_rows(plan.inputs, o, lang),
        (t("quote_concurrency", lang), f"{o.peak_concurrency:.1f} / {o.design_concurrency:.1f}"),
        (t("quote_capacity", lang), f"{o.capacity_rate_per_s:.2f} req/s"),
        *_prefix_rows(plan, o, lang),
        (t("quote_verdict" if o.pp == 1 else "quote_verdict_pp", lang, pp=o.pp),
         f"{t('quote_verdict_' + (o.memory_verdict or ''), lang)} / {o.slots_per_replica}"),
        (t("quote_binding", lang), t("pl_binding_value", lang,
                                     reason=t("quote_reason_" + o.binding, lang),
                                     share=f"{o.binding_ratio:.0%}")),
    ]


def _prefix_rows(plan: Plan, o: Option, lang: str) -> list[tuple[str, str]]:
    """The prefix the engine's cache serves, its share, prefill and C_vram with and without it."""
    inp = plan.inputs
    if inp.prefix_tokens <= 0 or inp.prefix_share <= 0:
        return []
    scen = option_scenario(inp, o)
    grain = inp.prefix_grain_on(scen.model, scen.gpu, o.kv_dtype, o.tp)
    pe = prefix_effect(scen, inp.prefix_tokens, inp.prefix_share, grain)
    c0, c1 = prefix_c_vram(inp, o)   # as the plan holds requests, not the chapter's context
    asked, served = TOKEN_GRAIN.shared(inp.prefix_tokens, scen.prompt), f"{pe.prefix_tokens:,}"
    served = served if pe.prefix_tokens >= asked else t(
        "quote_prefix_served", lang, served=served, asked=f"{asked:,}")
    return [(t("quote_prefix", lang),
             t("quote_prefix_v", lang, p=served, share=f"{pe.share:.0%}",
               t0=f"{pe.ttft_s[0]:.2f}", t1=f"{pe.ttft_s[1]:.2f}",
               c0=f"{c0:,}", c1=f"{c1:,}"))]


def model_text(inp: PlanInputs, lang: str, catalog: Catalog | None = None) -> str:
    """The model as a customer reads it: its name, and its weight format when the plan fixes
    one ('Qwen3.5-9B, AWQ 4-bit (group 128)'), never the catalog key alone."""
    cat = catalog or default_catalog()
    v = cat.variant(inp.model)
    fixed = v.model.key != inp.model.strip().lower() or (inp.formats is not None
                                                          and len(inp.formats) == 1)
    return v.model.name + (t("comma", lang) + v.format.name if fixed else "")


def alternative_text(a: Alternative, inp: PlanInputs, lang: str) -> str:
    """What would make a ruled-out, cheaper GPU family feasible: 'with prompts of at most
    2,931 tokens, 8 x RTX 4090 (8 replicas) + 1 spare, awq, fp16 KV at CNY 27,988 a month; or
    ...'."""
    parts = []
    for r in a.relaxations:
        if r.kind == Relax.TTFT:
            what = t("alt_ttft", lang, v=fmt_ms(r.value), q=inp.slo.quantile * 100)
        elif r.kind == Relax.TPOT:
            what = t("alt_tpot", lang, v=fmt_ms(r.value), q=inp.slo.quantile * 100)
        elif r.kind == Relax.PROMPT:
            what = t("alt_prompt", lang, v=f"{int(r.value):,}")
        else:
            what = t("alt_users", lang, v=f"{int(r.value):,}")
        parts.append(t("alt_item", lang, what=what, label=option_label(r.option, lang),
                       cost=fmt_money(r.option.cost_per_month, inp.currency)))
    return t("alt_or", lang).join(parts)


def capacity_rows(plan: Plan, o: Option, catalog: Catalog | None = None) -> list[TableRow]:
    """The quote's capacity table for one option (F8 on the option's Scenario, the Explorer's
    view): the deployment's concurrency at the peak, at the design load (the concurrency the
    'Open in Explorer' link carries) and at the slot limit; memory per GPU. With prefix
    caching planned, the prefix's KV is held once and TTFT at no load is the mean with the
    cache (`model.prefix.prefix_capacity_table`)."""
    inp = plan.inputs
    wl = inp.workload
    scen = option_scenario(inp, o, catalog)
    cs = sorted({max(1, math.ceil(o.peak_concurrency)),
                 max(1, design_concurrency_total(inp, o)),
                 o.slots_per_replica * o.replicas})
    rows = [(c, wl.context_tokens) for c in cs]
    if inp.prefix_tokens > 0 and inp.prefix_share > 0:
        return prefix_capacity_table(scen, rows, inp.prefix_tokens, inp.prefix_share,
                                     inp.prefix_grain_on(scen.model, scen.gpu, o.kv_dtype, o.tp))
    return capacity_table(scen, rows)


def quote_blocks(plan: Plan, *, lang: str = "en", simulation: QueueResult | None = None,
                 catalog: Catalog | None = None, today: dt.date | None = None,
                 top: int = 5, link: str | None = None,
                 band: GpuBand | None = None,
                 cheaper: Sequence[Alternative] = (), sections: Sections = ()) -> list[Block]:
    """The quote as a list of blocks (shared by the Markdown and the PDF). `link`: the Planner
    address that reproduces the plan (`capacity.report.planner_url.planner_url`); `band`: the
    fewest serving GPUs of the recommended configuration at the fast and the slow edge of the
    uncertainty band, and why (`capacity.fit.planning.gpu_band`, `bases.band_text`);
    `cheaper`: the ruled-out cheaper options and what would make them feasible
    (`capacity.plan.alternatives.alternatives`); `sections`: more sections after the ranked
    options, each made in the quote's language (`capacity.report.quote_disagg.disagg_section`:
    disaggregated prefill/decode beside them)."""
    if lang not in LANGS:
        raise InputError(f"quote language must be one of {', '.join(LANGS)}, got '{lang}'")
    cat = catalog or default_catalog()
    inp, wl, slo = plan.inputs, plan.inputs.workload, plan.inputs.slo
    date = (today or dt.date.today()).isoformat()
    b: list[Block] = [Heading(t("quote_title", lang) + t("colon", lang) + plan.model_name),
                      Para(t("quote_prepared", lang, date=date))]
    if link:
        b.append(Para(t("quote_link", lang, url=link)))
    b.append(Heading(t("quote_inputs", lang)))
    rows: list[tuple[str, str]] = [(t("quote_model", lang), model_text(inp, lang, cat))]
    if wl.daily_active_users is not None:
        rows += [(t("quote_dau", lang), f"{wl.daily_active_users:,.0f}"),
                 (t("quote_rpu", lang), f"{wl.requests_per_user_per_day:g}"),
                 (t("quote_peak", lang), t("quote_peak_v", lang, share=wl.peak_share,
                                           hours=wl.peak_hours)),
                 (t("quote_rate", lang), f"{plan.peak_rate_per_s or 0:.3f} req/s")]
    elif wl.rate_per_s is not None:
        rows.append((t("quote_rate", lang), f"{wl.rate_per_s:.3f} req/s"))
    else:
        rows.append((t("quote_conc", lang), f"{wl.peak_concurrency:g}"))
    over = wl.tokens_over_context
    rows += [(t("quote_tokens", lang),
              f"{wl.context_tokens:,} / {wl.prompt:,} / {wl.output_tokens:,}"
              + (t("list_sep", lang) + t("warn_tokens_over", lang, total=f"{over:,}",
                                          ctx=f"{wl.context_tokens:,}")
                 if over else ""))]
    if wl.turns > 1:
        rows.append((t("quote_turns", lang), t("quote_turns_v", lang, n=wl.turns,
                                                new=f"{wl.turn_tokens:,}",
                                                last=f"{wl.last_context_tokens:,}")))
    rows += [(t("quote_slo", lang), t("quote_slo_v", lang, ttft=slo.ttft_ms, tpot=slo.tpot_ms,
                                      q=slo.quantile * 100))]
    if slo.cost_per_mtok > 0:
        rows.append((t("quote_cost_target", lang), _money(slo.cost_per_mtok, inp.currency)))
    b.append(Table((t("quote_quantity", lang), t("quote_value", lang)), tuple(rows)))
    b.append(Heading(t("quote_rec", lang)))
    best = plan.best
    if best is None:
        b.append(Para(t("quote_none", lang)))
    else:
        rec = _option_rows(plan, best, lang)
        rec.insert(1, (t("quote_basis", lang), basis_text(inp, lang)))
        if band is not None:
            rec.insert(2, (t("quote_band", lang), band_text(best, band, inp.max_gpus, lang)))
        if inp.growth_per_month > 0:
            month = runs_out_month(inp, best)
            rec.append((t("quote_growth", lang, g=inp.growth_per_month),
                        t("quote_growth_v", lang, m=month) if month is not None
                        else t("quote_growth_never", lang)))
        b.append(Table((t("quote_quantity", lang), t("quote_value", lang)), tuple(rec)))
        note = draft_note(plan, cat)
        if note is not None:
            b.append(Para(t("dr_title", lang) + t("colon", lang) + draft_note_text(note, lang)))
        if simulation is not None:
            s = simulation
            b.append(Para(t("quote_sim", lang) + t("colon", lang) + t(
                "quote_sim_v", lang, a=s.ttft_ms[0.5], b=s.ttft_ms[0.9], c=s.ttft_ms[0.99],
                d=s.tpot_ms[0.5], e=s.tpot_ms[0.9], f=s.tpot_ms[0.99], ok=s.slo_met_share)))
            if (miss := miss_text(s, slo, lang)) is not None:
                b.append(Para(miss))
        b.append(Heading(t("quote_table", lang) + t("colon", lang) + option_label(best, lang)))
        tab = dict(r=best.replicas, pp=best.pp, layout=copy_layout(best.tp, best.pp),
                   q=slo.quantile * 100)
        b.append(Para(tn("quote_table_note", best.replicas, lang, **tab) if best.pp == 1
                      else t("quote_table_note_pp", lang, **tab)))
        table = capacity_rows(plan, best, cat)
        b.append(Table(
            (t("quote_c", lang), t("quote_c_rep" if best.pp == 1 else "quote_c_stream", lang),
             t("quote_kv", lang),
             t("quote_sub", lang), t("quote_fit", lang), t("quote_ttft0", lang),
             t("quote_tpot0", lang)),
            tuple((str(r.concurrency), str(math.ceil(r.concurrency / best.replicas)),
                   f"{r.kv_total_bytes / GB:.1f}",
                   f"{r.vram_subtotal_bytes / GB:.1f} / {r.usable_bytes / GB:.1f}",
                   t("quote_verdict_" + r.verdict, lang), f"{r.ttft_s:.2f} s",
                   f"{r.tpot_ms:.1f} ms")
                  for r in table)))
        runner = plan.runner_up
        if runner is not None:
            b.append(Heading(t("quote_runner", lang)))
            b.append(Table((t("quote_quantity", lang), t("quote_value", lang)),
                           tuple(_option_rows(plan, runner, lang))))
        others = plan.options[2:top + 2]  # #1 and the runner-up (#2) are above
        if others:
            b.append(Heading(t("quote_others", lang)))
            b.append(Table(
                ("#", t("quote_config", lang), t("fig_month", lang), t("fig_col_mtok", lang),
                 t("fig_col_ttft", lang, q=slo.quantile * 100),
                 t("fig_col_tpot", lang, q=slo.quantile * 100), t("quote_binding", lang)),
                tuple((str(i + 3), option_label(o, lang), _money(o.cost_per_month, inp.currency),
                       _money(o.cost_per_mtok, inp.currency), _ms(o.ttft_ms), _ms(o.tpot_ms),
                       t("quote_reason_" + o.binding, lang))
                      for i, o in enumerate(others))))
    for make in sections:
        b += make(lang)
    if plan.rejected:
        b.append(Heading(t("quote_rejected", lang)))
        b.append(Table(("GPU", t("quote_binding", lang), t("quote_why", lang)), tuple(
            (r.gpu_name, ("、" if lang == "zh" else ", ").join(
                t("quote_reason_" + x, lang) for x in r.reasons),
             rejection_text(r, slo, lang))
            for r in plan.rejected)))
    if cheaper:
        b.append(Heading(t("alt_title", lang)))
        b.append(Table(("GPU", t("alt_col", lang)), tuple(
            (a.gpu_name, alternative_text(a, inp, lang)) for a in cheaper)))
    if plan.near_misses:
        b.append(Heading(t("quote_fixes", lang)))
        b.append(Table((t("quote_config", lang), t("quote_fix_col", lang)), tuple(
            (option_label(m.option, lang),
             t("list_sep", lang).join(fix_text(f, m.option.tp, lang) for f in m.fixes))
            for m in plan.near_misses)))
    # the buyer's chart, as tables; its module (the frontier's whole search) loads only for a
    # quote, not for every command that formats a plan's text with this module
    from capacity.report.quote_frontier import frontier_blocks

    b += frontier_blocks(plan, lang=lang, catalog=cat)
    b.append(Heading(t("quote_assumptions", lang)))
    shown = [plan.best, plan.runner_up] if plan.best else []
    for key in dict.fromkeys(o.gpu for o in shown if o is not None):
        g = cat.gpu(key)
        o = next(x for x in shown if x is not None and x.gpu == key)
        offer = next((x for x in inp.offers if x.gpu == key), None)
        if key in dict(inp.price_overrides):
            b.append(Para(t("quote_price_entered", lang, gpu=g.name, cur=inp.currency,
                            price=o.price_per_hour)))
        elif offer is not None:
            b.append(Para(t("quote_price_offer", lang, gpu=g.name, cur=inp.currency,
                            price=o.price_per_hour, offer=offer_text(offer, lang))))
        elif inp.offer_kind:
            # a kind was asked for and this GPU has none: say so, never fall back silently
            b.append(Para(t("quote_price_no_offer", lang, gpu=g.name, cur=inp.currency,
                            price=o.price_per_hour, kind=t("offer_kind_" + inp.offer_kind, lang),
                            src=source_text(g.price_source, lang), date=g.price_as_of)))
        else:
            b.append(Para(t("quote_price", lang, gpu=g.name, cur=inp.currency,
                            price=o.price_per_hour, src=source_text(g.price_source, lang),
                            date=g.price_as_of)))
    best = plan.best
    seqs = (inp.seqs_for(best.gpu, cat.gpu(best.gpu).memory_gb) if best is not None
            else engine_profile(inp.engine).with_max_seqs(inp.max_num_seqs).max_seqs)
    b += [Para(t("quote_fx", lang, rate=inp.cny_per_usd)),
          Para(t("quote_engine", lang, engine=engine_label(inp.engine, lang), util=inp.util,
                 ovh=inp.overhead_gb, seqs=seqs)),
          Para(_eff_text(inp, lang, cat.variant(inp.model).model,
                         best is not None and best.pp > 1)),
          Para(t("quote_headroom", lang, h=wl.headroom, m=inp.memory_headroom)),
          Para(t("quote_queue", lang)), Para(t("quote_searched", lang, n=plan.evaluated)),
          Para("**" + t("quote_estimate", lang) + "**")]
    return b


def _eff_text(inp: PlanInputs, lang: str, model: Model, piped: bool = False) -> str:
    return t("quote_eff", lang, basis=plan_basis_name(inp, lang), knobs=knobs_text(
        inp, lang, model.layers_of("linear"), piped, model.moe is not None))


def quote_markdown(plan: Plan, *, lang: str = "en", simulation: QueueResult | None = None,
                   catalog: Catalog | None = None, today: dt.date | None = None,
                   link: str | None = None,
                   band: GpuBand | None = None,
                   cheaper: Sequence[Alternative] = (), sections: Sections = ()) -> str:
    """The quote as Markdown."""
    return render_markdown(quote_blocks(plan, lang=lang, simulation=simulation,
                                        catalog=catalog, today=today, link=link, band=band,
                                        cheaper=cheaper, sections=sections))


def quote_pdf(plan: Plan, *, lang: str = "en", simulation: QueueResult | None = None,
              catalog: Catalog | None = None, today: dt.date | None = None,
              cjk_font: tuple[Path, int] | None | bool = True, link: str | None = None,
              band: GpuBand | None = None,
              cheaper: Sequence[Alternative] = (), sections: Sections = ()) -> bytes:
    """The quote as PDF bytes (fpdf2). Chinese needs a CJK font: `cjk_font=True` looks one up,
    a (path, index) pair uses it, None/False forces the fallback. Without a CJK font a Chinese
    quote falls back to English with a note; English uses the core Helvetica font (catalog
    names are ASCII)."""
    return blocks_pdf(lambda lg: quote_blocks(plan, lang=lg, simulation=simulation,
                                              catalog=catalog, today=today, link=link,
                                              band=band, cheaper=cheaper,
                                              sections=sections),
                      lang=lang, cjk_font=cjk_font)


def check_quote_path(path: str | Path) -> Path:
    """`path` as a quote's file: `.md`/`.markdown` or `.pdf` in an existing folder, else
    InputError saying so (checked before any work, so a bad name costs nothing)."""
    p = Path(path)
    if p.suffix.lower() not in (".md", ".markdown", ".pdf"):
        raise InputError(f"quote file '{p.name}' must end in .md or .pdf")
    if not p.parent.exists():
        raise InputError(f"folder '{p.parent}' does not exist; create it or choose another path")
    return p


def write_quote(path: str | Path, plan: Plan, *, lang: str = "en",
                simulation: QueueResult | None = None, catalog: Catalog | None = None,
                link: str | None = None,
                band: GpuBand | None = None,
                cheaper: Sequence[Alternative] = (), sections: Sections = ()) -> Path:
    """Write the quote to `path`: `.md` for Markdown, `.pdf` for PDF."""
    p = check_quote_path(path)
    if p.suffix.lower() == ".pdf":
        p.write_bytes(quote_pdf(plan, lang=lang, simulation=simulation, catalog=catalog,
                                link=link, band=band, cheaper=cheaper, sections=sections))
    else:
        p.write_text(quote_markdown(plan, lang=lang, simulation=simulation, catalog=catalog,
                                    link=link, band=band, cheaper=cheaper, sections=sections),
                     encoding="utf-8")
    return p


def mix_quote_blocks(mix: MixPlan, *, lang: str = "en", catalog: Catalog | None = None,
                     today: dt.date | None = None, link: str | None = None) -> list[Block]:
    """The quote of a mix (`capacity.plan.mix`): the recommended fleet with each workload's
    deployment and share of its cost, then each workload's own quote on the fleet's GPU
    (inputs, recommendation, capacity table, assumptions). `link`: the Planner address that
    reproduces the mix (`capacity.report.planner_url.planner_mix_state`)."""
    if lang not in LANGS:
        raise InputError(f"quote language must be one of {', '.join(LANGS)}, got '{lang}'")
    date = (today or dt.date.today()).isoformat()
    cat = catalog or default_catalog()
    b: list[Block] = [Heading(t("mix_title", lang, n=len(mix.workloads))),
                      Para(t("quote_prepared", lang, date=date))]
    if link:
        b.append(Para(t("quote_link", lang, url=link)))
    b.append(Para(t("mix_rule", lang)))
    fleet = mix.best
    if fleet is None:
        b.append(Para(t("mix_none", lang)))
        b += [Para(t("mix_short", lang, gpu=cat.gpu(g).name, names=t("comma", lang).join(n)))
              for g, n in mix.short]
        return b
    cur = fleet.parts[0].plan.inputs.currency
    b.append(Heading(t("mix_fleet", lang, gpu=fleet.gpu_name, n=fleet.paid_gpus,
                       cost=fmt_money(fleet.cost_per_month, cur))))
    q = {p.plan.inputs.slo.quantile * 100 for p in fleet.parts}
    # one percentile for every workload (the usual case) goes in the header; else each row's
    head_q = next(iter(q)) if len(q) == 1 else None
    rows = tuple(
        (p.name, p.plan.model_name, option_label(p.option, lang), str(p.option.paid_gpus),
         fmt_money(p.option.cost_per_month, cur), f"{fleet.share(p):.0%}",
         fmt_money(p.option.cost_per_mtok, cur),
         *(fmt_ms(ms) if head_q else t("mix_lat_q", lang, v=fmt_ms(ms),
                                       q=p.plan.inputs.slo.quantile * 100)
           for ms in (p.option.ttft_ms, p.option.tpot_ms)))
        for p in fleet.parts)
    total = (t("mix_total", lang), "", "", str(fleet.paid_gpus),
             fmt_money(fleet.cost_per_month, cur), "100%", "", "", "")
    b.append(Table((t("mix_workload", lang), t("quote_model", lang), t("quote_config", lang),
                    t("mix_gpus", lang), t("fig_month", lang), t("mix_share", lang),
                    t("fig_mtok", lang),
                    t("fig_col_ttft", lang, q=head_q) if head_q else t("metric_ttft", lang),
                    t("fig_col_tpot", lang, q=head_q) if head_q else t("metric_tpot", lang)),
                   (*rows, total)))
    others = mix.fleets[1:4]
    if others:
        b.append(Heading(t("mix_others", lang)))
        b.append(Table((t("mix_gpu", lang), t("mix_gpus", lang), t("fig_month", lang)), tuple(
            (f.gpu_name, str(f.paid_gpus), fmt_money(f.cost_per_month, cur)) for f in others)))
    for g, names in mix.short:
        b.append(Para(t("mix_short", lang, gpu=cat.gpu(g).name, names=t("comma", lang).join(names))))
    for p in fleet.parts:
        b.append(Heading(t("mix_part", lang, name=p.name)))
        b += quote_blocks(p.plan, lang=lang, catalog=cat, today=today)[2:]
    return b


def write_mix_quote(path: str | Path, mix: MixPlan, *, lang: str = "en",
                    catalog: Catalog | None = None, today: dt.date | None = None,
                    link: str | None = None) -> Path:
    """Write a mix's quote to `path`: `.md` for Markdown, `.pdf` for PDF."""
    p = check_quote_path(path)
    if p.suffix.lower() == ".pdf":
        p.write_bytes(blocks_pdf(lambda lg: mix_quote_blocks(mix, lang=lg, catalog=catalog,
                                                             today=today, link=link),
                                 lang=lang))
    else:
        p.write_text(render_markdown(mix_quote_blocks(mix, lang=lang, catalog=catalog,
                                                      today=today, link=link)),
                     encoding="utf-8")
    return p
