"""The buyer's chart on the Explorer and the Planner (issue 26): throughput per GPU against
interactivity, the fronts, the what-if or the recommendation marked, measured points on top,
and the cost read off at a chosen interactivity (docs/frontier.md).

Each page calls one function near its end: `explorer_frontier` (the body of the Explorer's
section, which the page opens with `app.layout.section`, importing this module only once it
is open) and `planner_frontier` (its own expander). Both run only while open
(`on_change="rerun"`: a closed one costs the page nothing). The numbers come from
`capacity.fit.frontier` (the frontier, `cost_read_off`), `capacity.report.quote_frontier` (the
plan's inputs and the recommendation's mark) and `capacity.report.frontier_chart` (the chart's
spec), cached in `app.frontier_cache`, keyed by their inputs and the workspace's data version.
Each section's boxes for the disaggregated and wide-EP points (issue 27, default off, in the
page's link) are `app.frontier_kinds`'.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from app import cache
from app.explorer_view import FRONTIER_SECTION
from app.format import entry_names
from app.frontier_cache import Point, chart_spec, frontier_of, published, read_off, run_points
from app.frontier_kinds import (
    DISAGG_FIELD,
    WIDE_EP_FIELD,
    deployment_label,
    is_moe,
    kind_inputs,
    kinds_control,
    kinds_note,
)
from app.planner_state import WIDGETS as PLANNER_WIDGETS
from app.state import key as explorer_key
from capacity.catalog.loader import Catalog
from capacity.errors import CapacityError, InputError
from capacity.fit.frontier import (
    AGGREGATED,
    DEFAULT_ENGINES,
    PRICE_KINDS,
    CostReadOff,
    FrontierInputs,
    datacenter_gpus,
)
from capacity.model.scenario import Scenario
from capacity.model.workload import single_requests
from capacity.plan.options import Plan, PlanInputs
from capacity.report.bases import basis_label
from capacity.report.i18n import engine_label, engine_short, error_text, t
from capacity.report.quote import plan_basis_name
from capacity.report.quote_frontier import (
    around_with_mark,
    entered_knobs,
    group_config,
    plan_frontier_inputs,
    point_config,
    point_cost,
    recommended_group,
    recommended_mark,
    slo_interactivity,
)
from capacity.report.urlstate import ExplorerState

EXPLORER_KEY = FRONTIER_SECTION
"""The Explorer's section (its open state in `st.session_state`)."""
PLANNER_KEY = "frv_pl"
ENGINE_CHOICES: tuple[str, ...] = ("chapter", *DEFAULT_ENGINES)
CHART_HEIGHT = 560

# ---- tables ----------------------------------------------------------------------------------
def kind_label(kind: str, lang: str) -> str:
    return t("pl_offer_catalog", lang) if kind == "catalog" else t("offer_kind_" + kind, lang)


def _config_at(config: str, provider: str, lang: str) -> str:
    """A configuration and the provider whose offer prices it, in `lang`'s punctuation
    ('MI300X，awq，fp16 KV，本章引擎（Vultr）' in Chinese)."""
    return t("with_paren", lang, what=config, detail=provider) if provider else config


def read_off_frame(rows: Sequence[CostReadOff], lang: str, *,
                   kinds: bool = False) -> pd.DataFrame:
    """Per price kind, the group with the lowest cost per M output tokens at the target (and
    its input and total costs); a kind no group reaches or prices: a row of dashes. `kinds`
    (disaggregated or wide-EP points drawn): a column names the group's deployment kind."""
    out = []
    for kind in PRICE_KINDS:
        priced = [r for r in rows if r.kind == kind and r.output_per_mtok is not None]
        best = min(priced, key=lambda r: r.output_per_mtok or math.inf, default=None)
        g = None if best is None else best.group
        out.append({
            t("frv_col_kind", lang): kind_label(kind, lang),
            t("frv_col_config", lang): "-" if g is None else _config_at(
                t("comma", lang).join([group_config(g.gpu_name, g.weights, g.kv_dtype, lang),
                                       engine_short(g.engine, lang)]),
                best.provider if best else "", lang),
            **({t("fr_deployment", lang): "-" if g is None else deployment_label(
                g.deployment, lang)} if kinds else {}),
            t("fr_y", lang): None if best is None else best.throughput_tok_s_per_gpu,
            t("frv_col_price", lang): None if best is None else best.price_per_gpu_hour,
            t("frv_col_out", lang): None if best is None else best.output_per_mtok,
            t("frv_col_in", lang): None if best is None else best.input_per_mtok,
            t("frv_col_total", lang): None if best is None else best.total_per_mtok})
    return pd.DataFrame(out)


def _formats(frame: pd.DataFrame) -> dict[str, Any]:
    """Throughput whole, the price to the cent, costs to three decimals (`read_off_frame`'s
    last five columns)."""
    fmts = ("%,.0f", "%.2f", "%.3f", "%.3f", "%.3f")
    return {c: st.column_config.NumberColumn(format=f)
            for c, f in zip(frame.columns[-len(fmts):], fmts, strict=True)}


def _draw(spec: Mapping[str, Any], key: str) -> None:
    st.vega_lite_chart(spec=dict(spec), width="stretch", height=CHART_HEIGHT, key=key)


# ---- the Explorer ----------------------------------------------------------------------------
def explorer_current(state: ExplorerState, scenario: Scenario, catalog: Catalog,
                     lang: str) -> Point:
    """The what-if's point in the chart's own terms: its C users in the steady closed loop the
    curves are drawn from, every prompt prefilled (`frontier_loop.deployment_point` of the
    load view's replica: the Explorer's engine and its knobs), 1000 / that loop's TPOT and its
    output tok/s over the GPUs paid."""
    from capacity.fit.frontier_loop import deployment_point
    from capacity.plan.service_build import service_from_scenario

    svc = service_from_scenario(scenario, output_tokens=state.out, engine=state.engine,
                                **state.load_knobs(scenario))
    x, y = deployment_point(svc, concurrency=state.concurrency, replicas=scenario.replicas,
                            paid_gpus=max(scenario.paid_gpus, 1))
    return (x, y, t("frv_current_point", lang, c=f"{state.c:,}", n=scenario.paid_gpus,
                    gpu=catalog.gpus[state.gpu].name))


def single_kinds(dis: bool, ep: bool, inp: PlanInputs, lang: str) -> tuple[bool, bool]:
    """The kinds ticked that the plan's requests keep: none for a conversation or a shared
    prefix (the disaggregated and wide-EP points plan single requests with nothing cached,
    `single_requests`), each ticked one saying so under the toggles."""
    kept = []
    for ticked, what in ((dis, "disagg"), (ep, "ep")):
        try:
            if ticked:
                single_requests(inp.workload, what, prefix_tokens=inp.prefix_tokens,
                                prefix_share=inp.prefix_share)
            kept.append(ticked)
        except InputError as exc:
            st.caption(error_text(exc, lang))
            kept.append(False)
    return kept[0], kept[1]


def explorer_frontier(box: DeltaGenerator, state: ExplorerState, scenario: Scenario,
                      figures: Mapping[str, Any], lang: str) -> None:
    """The Explorer's section, drawn into its open expander `box`: the frontier of its model
    and request over the chosen GPUs and engines, the what-if marked, measured points, and the
    cost read-off at a target."""
    catalog = cache.catalog()
    with box:
        st.caption(t("frv_ex_help", lang))
        c1, c2, c3 = st.columns([3, 2, 1])
        st.session_state.setdefault("frv_ex_gpus", [g for g in datacenter_gpus(catalog)
                                                    if g != state.gpu])
        others = c1.multiselect(t("frv_gpus", lang, gpu=catalog.gpus[state.gpu].name),
                                [g for g in sorted(catalog.gpus) if g != state.gpu],
                                key="frv_ex_gpus", format_func=entry_names(catalog.gpus).__getitem__,
                                placeholder=t("choose_options", lang))
        st.session_state.setdefault("frv_ex_engines", [state.engine])
        engines = c2.multiselect(t("frv_engines", lang), ENGINE_CHOICES, key="frv_ex_engines",
                                 format_func=lambda e: engine_label(e, lang),
                                 placeholder=t("choose_options", lang)) or [state.engine]
        every = c3.toggle(t("frv_all_prec", lang), key="frv_ex_all", help=t("help_frv_all", lang))
        dis, ep = kinds_control(lang, moe=is_moe(catalog, state.model),
                                model_name=catalog.models[state.model].name,
                                disagg_key=explorer_key(DISAGG_FIELD),
                                ep_key=explorer_key(WIDE_EP_FIELD))
        gpus = (state.gpu, *(g for g in others if g != state.gpu))
        pinp = state.plan_inputs(catalog)   # its basis, and the conversation the load view runs
        basis, wl, knobs = pinp.basis_string, pinp.workload, entered_knobs(pinp)
        dis, ep = single_kinds(dis, ep, pinp, lang)
        try:
            inp, added = kind_inputs(FrontierInputs(
                model=state.model, prompt_tokens=state.prompt_tokens,
                output_tokens=max(state.out, 2), context_tokens=max(state.ctx, state.prompt_tokens),
                gpus=gpus, engines=tuple(engines), basis=basis, knobs=knobs,
                formats=None if every else (state.weights,),
                kv_dtypes=("fp16", "fp8") if every else (state.kv,),
                currency="USD" if state.currency == "USD" else "CNY", cny_per_usd=state.rate,
                turns=wl.turns, turn_tokens=wl.turn_tokens, prefix_tokens=pinp.prefix_tokens,
                prefix_share=pinp.prefix_share),
                disaggregated=dis, wide_ep=ep, ttft_ms=state.slo_ttft_ms,
                quantile=state.pct / 100.0)
            fr = frontier_of(inp)
        except CapacityError as exc:
            st.warning(t("frv_error", lang, msg=error_text(exc, lang)))
            return
        st.session_state.setdefault("frv_ex_target",
                                    min(round(1e3 / state.slo_tpot_ms, 1), 10_000.0))
        target = st.number_input(t("frv_target", lang), min_value=0.1, max_value=10_000.0,
                                 step=5.0, key="frv_ex_target", help=t("help_frv_target", lang))
        current = explorer_current(state, scenario, catalog, lang)
        runs, n_runs, n_skipped = run_points(state.model, gpus, lang)
        pub = published(state.model, gpus, lang)
        _draw(chart_spec(inp, lang, float(target), current, tuple(runs + pub)), "frv_ex_chart")
        st.caption(t("frv_ex_caption", lang, n=f"{fr.evaluated:,}", groups=len(fr.groups),
                     basis=t("basis_entered", lang) if knobs else basis_label(basis, lang),
                     x=f"{current[0]:,.1f}", y=f"{current[1]:,.0f}",
                     x0=f"{1e3 / float(figures['step_ms']):,.1f}",
                     y0=f"{float(figures['aggregate_tok_s']) / max(scenario.paid_gpus, 1):,.0f}"))
        if note := kinds_note(fr, lang, added=added):
            st.caption(note)
        st.caption(t("frv_measured_note", lang, runs=n_runs, skipped=n_skipped, pub=len(pub)))
        st.markdown("**" + t("frv_readoff", lang, x=f"{float(target):g}",
                             tpot=f"{1e3 / float(target):.1f}") + "**")
        frame = read_off_frame(read_off(inp, float(target)), lang, kinds=dis or ep)
        st.dataframe(frame, hide_index=True, width="stretch", key="frv_ex_costs",
                     column_config=_formats(frame))
        st.caption(t("frv_readoff_note", lang, cur=inp.currency))


# ---- the Planner -----------------------------------------------------------------------------
def planner_frontier(inputs: PlanInputs, plan: Plan, lang: str) -> None:
    """The Planner's section: the frontier of the customer's model and request over the GPUs it
    searched, the SLO's TPOT as a rule, the recommendation marked at its design load, and the
    front of its configuration around it."""
    o = plan.best
    if o is None:
        return
    box = st.expander(t("frv_pl_title", lang), key=PLANNER_KEY, on_change="rerun",
                      icon=":material/scatter_plot:")
    if not box.open:
        return
    catalog = cache.catalog()
    with box:
        dis, ep = kinds_control(lang, moe=is_moe(catalog, inputs.model),
                                model_name=catalog.variant(inputs.model).model.name,
                                disagg_key=PLANNER_WIDGETS[DISAGG_FIELD],
                                ep_key=PLANNER_WIDGETS[WIDE_EP_FIELD])
        dis, ep = single_kinds(dis, ep, inputs, lang)
        try:
            inp, added = kind_inputs(plan_frontier_inputs(inputs, catalog), disaggregated=dis,
                                     wide_ep=ep, ttft_ms=inputs.slo.ttft_ms,
                                     quantile=inputs.slo.quantile)
            fr = frontier_of(inp)
        except CapacityError as exc:
            st.warning(t("frv_error", lang, msg=error_text(exc, lang)))
            return
        mark = recommended_mark(o, inputs)
        x_slo = slo_interactivity(inputs)
        point = (mark.interactivity_tok_s_per_user, mark.throughput_tok_s_per_gpu,
                 t("frv_rec_point", lang, config=o.label))
        _draw(chart_spec(inp, lang, x_slo, point, ()), "frv_pl_chart")
        st.caption(t("frv_pl_caption", lang, basis=plan_basis_name(inputs, lang),
                     x=f"{point[0]:,.1f}", tpot=f"{o.tpot_mean_ms:,.1f}",
                     y=f"{point[1]:,.0f}", rate=f"{mark.design_rate_per_s:.3g}",
                     n=mark.paid_gpus, slo=f"{inputs.slo.tpot_ms:g}", xs=f"{x_slo:,.1f}",
                     q=f"{inputs.slo.quantile * 100:g}"))
        if note := kinds_note(fr, lang, added=added):
            st.caption(note)
        if o.draft:
            st.caption(t("frv_pl_draft", lang, draft=o.draft))
        # the recommendation's own line: aggregated, as the option is
        group = recommended_group(replace(fr, groups=tuple(
            g for g in fr.groups if g.deployment == AGGREGATED)), o)
        if group is None or not group.front:
            return
        st.markdown("**" + t("frv_q_front", lang, config=group_config(
            group.gpu_name, group.weights, group.kv_dtype, lang)) + "**")
        cur = inputs.currency
        cols = (t("frv_col_config", lang), t("fr_concurrency", lang), t("fr_x", lang),
                t("fr_y", lang), t("fr_ttft", lang), t("frv_col_cost", lang, cur=cur))
        rec = (t("frv_q_rec", lang), o.design_concurrency / max(o.copies, 1), point[0],
               point[1], o.ttft_mean_ms, o.cost_per_mtok_design)
        rows = [dict(zip(cols, rec if p is None else (
            point_config(p, lang), p.concurrency, p.interactivity_tok_s_per_user,
            p.throughput_tok_s_per_gpu, p.ttft_ms, point_cost(inputs, p, catalog)), strict=True))
                for p in around_with_mark(group, mark)]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="frv_pl_front",
                     column_config={c: st.column_config.NumberColumn(format=f) for c, f in zip(
                         cols[1:], ("%.1f", "%.1f", "%,.0f", "%,.0f", "%.3f"), strict=True)})
