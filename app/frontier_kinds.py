"""The deployment kinds on the pages' buyer's chart (issue 27, docs/frontier.md "On the pages"):
a box that adds the disaggregated prefill/decode points and one that adds a MoE model's wide
expert-parallel points to the frontier of the Explorer and of the Planner.

Both are off by default (the page then computes and draws exactly the aggregated chart) and
travel in the page's link as `fr_disagg` and `fr_wide_ep` (`ExplorerState`, `PlannerState`);
the wide-EP box is disabled, with the reason, for a dense model. Ticked, the chart's
`FrontierInputs` get `disaggregated` / `wide_ep`, and the disaggregated points hold the page's
TTFT SLO at its percentile (`FrontierInputs.ttft_ms`, `quantile`). Only vLLM and SGLang run
either kind (`DISAGG_ENGINES`, `EP_ENGINES`): where the chart's engines hold neither (the
chapter's engine, llama.cpp), `KIND_ENGINE` joins them and the caption says so.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from capacity.catalog.engines import engine_profile
from capacity.catalog.loader import Catalog
from capacity.fit.frontier import DISAGGREGATED, EP_POOLS, WIDE_EP, Frontier, FrontierInputs
from capacity.fit.frontier_disagg import DISAGG_ENGINES
from capacity.fit.frontier_ep import EP_ENGINES
from capacity.report.i18n import engine_label, t

DISAGG_FIELD = "fr_disagg"
"""The URL parameter (and state field) of the disaggregated box: 1 ticked, 0 not."""
WIDE_EP_FIELD = "fr_wide_ep"
"""The URL parameter (and state field) of the wide-EP box: 1 ticked, 0 not."""
KIND_ENGINE = "vllm"
"""The engine added to the chart's engines when none of them runs the kinds ticked."""


def is_moe(catalog: Catalog, model: str) -> bool:
    """Whether catalog model (or model-format) `model` is a mixture of experts."""
    return catalog.variant(model).model.moe is not None


def kinds_control(lang: str, *, moe: bool, model_name: str, disagg_key: str,
                  ep_key: str) -> tuple[bool, bool]:
    """The two boxes, their values in `st.session_state[disagg_key]` and `[ep_key]` (the
    page's state keys, 0/1 or bool); the wide-EP one disabled and off for a dense model.
    Returns (disaggregated, wide EP)."""
    ss = st.session_state
    ss[disagg_key] = bool(ss.get(disagg_key, False))
    ss[ep_key] = bool(ss.get(ep_key, False)) and moe
    c1, c2 = st.columns(2)
    dis = c1.toggle(t("frk_disagg", lang), key=disagg_key, help=t("help_frk_disagg", lang))
    ep = c2.toggle(t("frk_wide_ep", lang), key=ep_key, disabled=not moe,
                   help=t("help_frk_wide_ep" if moe else "help_frk_wide_ep_dense", lang,
                          model=model_name))
    return bool(dis), bool(ep) and moe


def kind_inputs(inp: FrontierInputs, *, disaggregated: bool, wide_ep: bool, ttft_ms: float,
                quantile: float) -> tuple[FrontierInputs, bool]:
    """`inp` with the kinds ticked: `disaggregated` with the page's TTFT SLO (ms) at its
    `quantile` (0..1) as the points' TTFT budget, `wide_ep`, and KIND_ENGINE among the engines
    where none of them runs a kind ticked. `inp` itself when none is ticked. Also whether
    KIND_ENGINE was added."""
    if not (disaggregated or wide_ep):
        return inp, False
    runs = set(DISAGG_ENGINES if disaggregated else ()) | set(EP_ENGINES if wide_ep else ())
    added = not runs & {engine_profile(e).key for e in inp.engines}
    out = replace(inp, disaggregated=disaggregated, wide_ep=wide_ep,
                  engines=(*inp.engines, KIND_ENGINE) if added else inp.engines)
    if disaggregated:
        out = replace(out, ttft_ms=float(ttft_ms), quantile=float(quantile))
    return out, added


def kinds_note(fr: Frontier, lang: str, *, added: bool) -> str:
    """The caption under the chart for the kinds ticked: the fronts of each kind (dashed in
    the legend's style), the TTFT budget the disaggregated points hold, a kind with no point
    (none fits, or none meets the budget), and the engine added. '' when none is ticked."""
    inp = fr.inputs
    parts = []
    for ticked, kind, key in ((inp.disaggregated, DISAGGREGATED, "frk_note_disagg"),
                              (inp.wide_ep, WIDE_EP, "frk_note_wide_ep"),
                              (inp.disaggregated and inp.wide_ep, EP_POOLS,
                               "frk_note_ep_pools")):
        if not ticked:
            continue
        n = sum(g.deployment == kind for g in fr.groups)
        parts.append(t(key, lang, n=n, ttft=f"{inp.ttft_ms:,.0f}", q=f"{inp.quantile * 100:g}")
                     if n else t(key + "_none", lang, ttft=f"{inp.ttft_ms:,.0f}",
                                 q=f"{inp.quantile * 100:g}"))
    if parts and added:
        parts.append(t("frk_note_engine", lang, engine=engine_label(KIND_ENGINE, lang)))
    return " ".join(parts)


def deployment_label(kind: str, lang: str) -> str:
    """A deployment kind ('aggregated', 'disaggregated', 'wide-ep', 'ep-pools') in `lang`."""
    return t("fr_dep_" + kind.replace("-", "_"), lang)
