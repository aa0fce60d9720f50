"""The buyer's chart for a plan (issue 26): the frontier of the customer's model and request
over the GPUs the planner searched, the recommended option marked on it, and the quote's section
about it (docs/frontier.md).

- `plan_frontier_inputs`: the `FrontierInputs` of a plan (its model, request lengths, GPUs,
  engine, basis, weight formats, KV precisions, TP limit and currency);
- `recommended_mark`: where the recommendation sits on the chart: interactivity 1000 / its mean
  TPOT at the design load, and the output tokens per second per GPU paid at the design rate
  (design rate x output tokens / GPUs paid: serving, spare and whole nodes);
- `slo_interactivity`: the SLO's TPOT as an interactivity, 1000 / TPOT (the chart's rule);
- `front_around`, `gpu_fronts_at`: the rows of the two tables (the recommendation's own front
  around its mark; each GPU's most productive front point at the SLO's interactivity);
- `frontier_blocks`: the quote's section as document blocks (`capacity.report.document`:
  heading, paragraphs, tables), so it renders to Markdown and PDF with the rest of the quote.
  The quote has no images, so the chart itself is left to the Planner page; its numbers are here.

Pure: no Streamlit. Costs are F7 at the plan's own price per GPU-hour (entered, offer or
catalog: `PlanInputs.price_of`).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

from capacity.catalog.engines import engine_profile
from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import CapacityError
from capacity.fit.frontier import Frontier, FrontierInputs, FrontPoint, Group, frontier
from capacity.model.basis import BasisKind, knobs_of
from capacity.model.cost import cost_per_mtok
from capacity.model.pipeline import copy_layout
from capacity.plan.options import Option, Plan, PlanInputs
from capacity.report.document import Block, Heading, Para, Table
from capacity.report.i18n import engine_label, t
from capacity.report.money import fmt_money

AROUND: int = 3
"""Front points listed on each side of the recommendation's mark in the quote's table."""


def entered_knobs(inp: PlanInputs) -> tuple[tuple[str, Any], ...]:
    """`inp`'s efficiency knobs when they are entered by hand (no named basis), for
    `FrontierInputs.knobs`; () on a named basis."""
    return tuple(knobs_of(inp).items()) if inp.basis == BasisKind.ENTERED else ()


def plan_frontier_inputs(inp: PlanInputs, catalog: Catalog | None = None) -> FrontierInputs:
    """The chart's inputs for a plan: its model and request (prompt, output, KV context), the
    GPUs it searched (its list, else the whole catalog, as `search.plan`), its engine and basis
    (`PlanInputs.basis_string`; entered knobs that are no named basis travel as `knobs`, so
    the chart rests on the plan's own figures), weight formats, KV precisions, TP limit and
    currency. InputError where the chart cannot be drawn
    (an output of one token: interactivity needs two). A conversation's turns and a shared
    prefix travel."""
    cat = catalog or default_catalog()
    wl = inp.workload
    return FrontierInputs(
        model=inp.model, prompt_tokens=wl.prompt, output_tokens=wl.output_tokens,
        context_tokens=max(wl.context_tokens, wl.prompt),
        gpus=inp.gpus if inp.gpus is not None else tuple(sorted(cat.gpus)),
        engines=(engine_profile(inp.engine).key,), basis=inp.basis_string, knobs=entered_knobs(inp),
        formats=inp.formats,
        kv_dtypes=inp.kv_dtypes, max_gpus=inp.max_gpus, currency=inp.currency,
        cny_per_usd=inp.cny_per_usd, turns=wl.turns, turn_tokens=wl.turn_tokens,
        prefix_tokens=inp.prefix_tokens, prefix_share=inp.prefix_share)


@dataclass(frozen=True, kw_only=True)
class Mark:
    """The recommendation on the chart."""

    interactivity_tok_s_per_user: float
    """1000 / the option's mean TPOT at the design load."""
    throughput_tok_s_per_gpu: float
    """Output tok/s at the design rate over the GPUs paid."""
    design_rate_per_s: float
    paid_gpus: int


def recommended_mark(o: Option, inp: PlanInputs) -> Mark:
    """Where option `o` sits on the chart at its design load (module docstring)."""
    thr = o.design_rate_per_s * inp.workload.output_tokens / max(o.paid_gpus, 1)
    x = 1e3 / o.tpot_mean_ms if o.tpot_mean_ms > 0 else math.nan
    return Mark(interactivity_tok_s_per_user=x, throughput_tok_s_per_gpu=thr,
                design_rate_per_s=o.design_rate_per_s, paid_gpus=o.paid_gpus)


def slo_interactivity(inp: PlanInputs) -> float:
    """The SLO's TPOT as an interactivity: 1000 / TPOT (tok/s per user)."""
    return 1e3 / inp.slo.tpot_ms


def recommended_group(fr: Frontier, o: Option) -> Group | None:
    """The chart's line of the recommendation: its GPU, engine, weights and KV, no draft."""
    engine = fr.variants[0].engine if fr.variants else ""
    return next((g for g in fr.groups
                 if (g.gpu, g.engine, g.weights, g.kv_dtype, g.draft)
                 == (o.gpu, engine, o.weights, o.kv_dtype, None)), None)


def front_around(group: Group, mark: Mark, n: int = AROUND) -> tuple[FrontPoint, ...]:
    """The `n` front points on each side of the mark's interactivity (ascending)."""
    xs = [p.interactivity_tok_s_per_user for p in group.front]
    i = bisect.bisect_left(xs, mark.interactivity_tok_s_per_user)
    return group.front[max(i - n, 0):i + n]


def around_with_mark(group: Group, mark: Mark, n: int = AROUND) -> list[FrontPoint | None]:
    """`front_around` with None where the mark falls among them (by interactivity): the rows of
    the table around the recommendation."""
    near: list[FrontPoint | None] = list(front_around(group, mark, n))
    at = bisect.bisect_left([p.interactivity_tok_s_per_user for p in near if p is not None],
                            mark.interactivity_tok_s_per_user)
    near.insert(at, None)
    return near


def gpu_fronts_at(fr: Frontier, interactivity: float) -> dict[str, FrontPoint | None]:
    """Each GPU's most productive front point that serves a user at least `interactivity`
    tok/s (its front is ascending in interactivity, descending in throughput: the first one at
    or above it); None where its front does not reach it."""
    return {g: next((p for p in front if p.interactivity_tok_s_per_user >= interactivity), None)
            for g, front in fr.gpu_fronts.items()}


def point_cost(inp: PlanInputs, p: FrontPoint, catalog: Catalog | None = None) -> float:
    """F7 at the plan's price of the point's GPU: cost per million output tokens."""
    price = inp.price_of((catalog or default_catalog()).gpu(p.gpu)).per_gpu_hour
    return float(cost_per_mtok(price, 1, p.throughput_tok_s_per_gpu))


def point_config(p: FrontPoint, lang: str = "en") -> str:
    """'H100 SXM, TP=2, fp8, fp8 KV' (the point's configuration, one replica; its engine is the
    plan's, said once), in `lang`'s comma ('H100 SXM，TP=2，fp8，fp8 KV' in Chinese)."""
    par = copy_layout(p.tp, p.pp)
    return t("comma", lang).join([p.gpu_name, *([par] if par else []), p.weights,
                                  f"{p.kv_dtype} KV"])


def group_config(gpu_name: str, weights: str, kv_dtype: str, lang: str = "en") -> str:
    """A front's configuration, 'RTX 5090, awq, fp8 KV', in `lang`'s comma."""
    return t("comma", lang).join([gpu_name, weights, f"{kv_dtype} KV"])


def frontier_blocks(plan: Plan, *, lang: str = "en", catalog: Catalog | None = None,
                    fr: Frontier | None = None) -> list[Block]:
    """The quote's section on the buyer's chart: where the recommendation sits (its mark at the
    design load), the front of its own configuration around it, and each GPU's most productive
    front point at the SLO's interactivity, priced at the plan's prices. `fr`: the frontier
    already computed for `plan_frontier_inputs(plan.inputs)` (else computed here, about a
    second). Empty without a recommendation, or where the chart cannot be drawn."""
    o, inp = plan.best, plan.inputs
    if o is None:
        return []
    cat = catalog or default_catalog()
    try:
        fr = fr or frontier(plan_frontier_inputs(inp, cat), cat)
    except CapacityError:
        return []
    cur = inp.currency
    mark = recommended_mark(o, inp)
    x_slo = slo_interactivity(inp)
    b: list[Block] = [Heading(t("frv_q_title", lang)), Para(t(
        "frv_q_intro", lang, p=f"{inp.workload.prompt:,}", o=f"{inp.workload.output_tokens:,}",
        engine=engine_label(fr.variants[0].engine, lang) if fr.variants else inp.engine))]
    wl = inp.workload
    if wl.turns > 1:  # the chart's requests are the conversation's turns
        b.append(Para(t("quote_turns", lang) + t("colon", lang) + t(
            "quote_turns_v", lang, n=wl.turns, new=f"{wl.turn_tokens:,}",
            last=f"{wl.last_context_tokens:,}")))
    if inp.prefix_tokens > 0 and inp.prefix_share > 0:  # and share a prefix, as the plan's
        b.append(Para(t("frv_q_prefix", lang, p=f"{inp.prefix_tokens:,}",
                        share=f"{inp.prefix_share:.0%}")))
    b.append(Para(t("frv_q_mark", lang, x=f"{mark.interactivity_tok_s_per_user:,.1f}",
                    tpot=f"{o.tpot_mean_ms:,.1f}", y=f"{mark.throughput_tok_s_per_gpu:,.0f}",
                    rate=f"{mark.design_rate_per_s:.3g}", n=mark.paid_gpus)))
    group = recommended_group(fr, o)
    heads = (t("frv_col_config", lang), t("fr_concurrency", lang), t("fr_x", lang),
             t("fr_y", lang), t("fr_ttft", lang), t("frv_col_cost", lang, cur=cur))
    if group is not None and group.front:
        rows: list[tuple[str, ...]] = [
            (t("frv_q_rec", lang), f"{o.design_concurrency / max(o.copies, 1):,.1f}",
             f"{mark.interactivity_tok_s_per_user:,.1f}",
             f"{mark.throughput_tok_s_per_gpu:,.0f}", f"{o.ttft_mean_ms:,.0f}",
             fmt_money(o.cost_per_mtok_design, cur)) if p is None else
            (point_config(p, lang), f"{p.concurrency:,}", f"{p.interactivity_tok_s_per_user:,.1f}",
             f"{p.throughput_tok_s_per_gpu:,.0f}", f"{p.ttft_ms:,.0f}",
             fmt_money(point_cost(inp, p, cat), cur))
            for p in around_with_mark(group, mark)]
        b.append(Para(t("frv_q_front", lang, config=group_config(
            group.gpu_name, group.weights, group.kv_dtype, lang))))
        b.append(Table(heads, tuple(rows)))
    b.append(Para(t("frv_q_slo", lang, x=f"{x_slo:,.1f}", tpot=f"{inp.slo.tpot_ms:g}")))
    best_at = gpu_fronts_at(fr, x_slo)
    reach = sorted(((g, p) for g, p in best_at.items() if p is not None),
                   key=lambda gp: point_cost(inp, gp[1], cat))
    if reach:
        b.append(Table(heads, tuple(
            (point_config(p, lang), f"{p.concurrency:,}",
             f"{p.interactivity_tok_s_per_user:,.1f}", f"{p.throughput_tok_s_per_gpu:,.0f}",
             f"{p.ttft_ms:,.0f}", fmt_money(point_cost(inp, p, cat), cur))
            for _, p in reach)))
    short = [fr.gpu_fronts[g][0].gpu_name for g, p in best_at.items()
             if p is None and fr.gpu_fronts[g]]
    if short:
        b.append(Para(t("frv_q_short", lang, gpus=t("comma", lang).join(short))))
    b.append(Para(t("frv_q_note", lang)))
    return b
