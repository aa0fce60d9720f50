"""The Planner's inputs: the widgets bound to `app.planner_state`'s keys (`planner_*`).

`plan_inputs` draws the demand, workload and target columns and the search space; `mix_inputs`
the added workloads of the mix section. The values live in session state
(`app.planner_state`); the page reads them back with `app.planner_state.from_widgets`.
"""

from __future__ import annotations

import streamlit as st

from app.format import entry_names
from app.planner_state import (
    ACC_KIND,
    ACC_VALUE,
    DRAFT_CHOICES,
    DRAFT_KEYS,
    DRAFT_MODE,
    MIX_N,
    clamp_context,
    clamped_notice,
    mix_key,
)
from app.planner_view import CTX_CHOICES
from app.state import basis_choices
from capacity.catalog.engines import DEFAULT_ENGINE, engine_names
from capacity.catalog.loader import Catalog
from capacity.model.workload import MAX_TURNS
from capacity.plan.mix import MAX_WORKLOADS, MIX_NAME_CHARS
from capacity.report.bases import basis_label
from capacity.report.i18n import engine_label, note_text, t
from capacity.report.planner_url import PLANNER_KV, PLANNER_PCTS
from capacity.report.quote import draft_label


def plan_inputs(catalog: Catalog, lang: str) -> None:
    """The model, demand (daily users or peak concurrency), context and output, targets; and in
    an expander the search space: GPUs, KV cache, TP, spare, engine, currency, basis."""

    def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
        return t(k, lang, **kw)

    variants = catalog.variant_keys()
    c1, c2, c3 = st.columns(3)
    with c1:
        st.selectbox(T("pl_model"), variants, key="planner_model")
        ctx_choices = _context_choices(catalog, "planner_model", "planner_ctx")
        mode = st.radio(T("pl_mode"), ["dau", "conc"], horizontal=True, key="planner_mode",
                        format_func=lambda m: T("pl_mode_" + m))
        if mode == "dau":
            st.number_input(T("pl_dau"), min_value=1, step=50, key="planner_dau")
            st.number_input(T("pl_rpu"), min_value=0.1, key="planner_rpu")
            st.slider(T("pl_share"), 0.05, 1.0, step=0.05, key="planner_share")
            st.number_input(T("pl_hours"), min_value=0.25, max_value=24.0, step=0.25,
                            key="planner_hours")
        else:
            st.number_input(T("pl_conc"), min_value=1, key="planner_conc")
    with c2:
        st.selectbox(T("pl_ctx"), ctx_choices, key="planner_ctx")
        if (clamped := clamped_notice("planner_ctx")) is not None:  # by the model just chosen
            st.warning(T("pl_ctx_clamped") + "\n\n- " + note_text(clamped, lang))
        st.number_input(T("pl_prompt"), min_value=0, max_value=10_000_000, step=256,
                        key="planner_prompt", help=T("help_pl_prompt"))
        st.number_input(T("pl_out"), min_value=1, key="planner_out")
        st.slider(T("pl_headroom"), 0.0, 1.0, step=0.05, key="planner_headroom")
        st.number_input(T("pl_growth"), min_value=0.0, max_value=10.0, step=0.05,
                        key="planner_growth", format="%.2f")
        st.number_input(T("prefix_tokens"), min_value=0, max_value=10_000_000, step=256,
                        key="planner_prefix", help=T("help_prefix"))
        st.slider(T("prefix_share"), min_value=0.0, max_value=1.0, step=0.05,
                  key="planner_prefix_share", disabled=not st.session_state.get("planner_prefix"))
        # conversations: each later turn's history stays in the engine's prefix cache
        st.number_input(T("knob_turns"), min_value=1, max_value=MAX_TURNS, step=1,
                        key="planner_turns", help=T("help_pl_turns"))
        st.number_input(T("knob_turn_tokens"), min_value=0, max_value=10_000_000, step=50,
                        key="planner_turn_tokens", help=T("help_knob_turn_tokens"),
                        disabled=int(st.session_state.get("planner_turns", 1)) <= 1)
    with c3:
        st.number_input(T("pl_ttft"), min_value=10.0, step=100.0, key="planner_ttft")
        st.number_input(T("pl_tpot"), min_value=1.0, step=5.0, key="planner_tpot")
        st.select_slider(T("pl_pct"), list(PLANNER_PCTS), key="planner_pct")
        st.number_input(T("pl_cost_target"), min_value=0.0, step=0.5, key="planner_cost_target")
        st.checkbox(T("dg_toggle"), key="planner_disagg", help=T("help_dg_toggle"))
        # wide EP (issue 27): a MoE model's only; a dense model's box is off, saying why
        model = catalog.variant(st.session_state["planner_model"]).model
        if model.moe is None:
            st.session_state["planner_wide_ep"] = False
        # the label short enough for one line of the column; the tooltip names it in full
        st.checkbox(T("wep_toggle_short"), key="planner_wide_ep", disabled=model.moe is None,
                    help=f"**{T('wep_toggle')}**{T('colon')}" + (
                        T("help_wep_toggle") if model.moe is not None
                        else T("help_wep_toggle_dense", model=model.name)))

    with st.expander(T("pl_space")):
        s1, s2, s3 = st.columns(3)
        gpu_keys = sorted(catalog.gpus)
        with s1:
            st.multiselect(T("pl_gpus"), gpu_keys, key="planner_gpus", placeholder=T("choose_options"),
                           format_func=entry_names(catalog.gpus).__getitem__)
            st.slider(T("pl_maxg"), 1, 16, key="planner_maxg")
        with s2:
            st.multiselect(T("pl_kv"), list(PLANNER_KV), key="planner_kv",
                           placeholder=T("choose_options"))
            st.checkbox(T("pl_tp"), key="planner_tp", help=T("help_pl_tp"))
            st.checkbox(T("pl_spare"), key="planner_spare")
            engine_keys = list(engine_names())  # whose scheduling the load model follows
            if st.session_state.get("planner_engine") not in engine_keys:
                st.session_state["planner_engine"] = DEFAULT_ENGINE
            st.selectbox(T("engine"), engine_keys, key="planner_engine", help=T("pl_help_engine"),
                         format_func=lambda k: engine_label(k, lang))
        with s3:
            st.radio(T("pl_currency"), ["CNY", "USD"], horizontal=True, key="planner_currency")
            st.number_input(T("pl_fx"), min_value=0.01, max_value=1e4, step=0.05, key="planner_fx")
            st.slider(T("pl_util"), 0.5, 1.0, step=0.01, key="planner_util")
            bases = basis_choices()
            if st.session_state.get("planner_cal", "") not in bases:
                st.session_state["planner_cal"] = ""
            st.selectbox(T("prediction"), bases, key="planner_cal",
                         format_func=lambda b: basis_label(b, lang), help=T("help_prediction"))
            st.slider(T("pl_mfu"), 0.05, 1.0, step=0.05, key="planner_mfu",
                      disabled=bool(st.session_state.get("planner_cal")), help=T("help_pl_mfu"))
        draft_inputs(lang)


def draft_inputs(lang: str) -> None:
    """Speculative decoding (F12): no draft, every published depth (auto) or chosen
    kind:depth drafts, and the acceptance (published, or an entered tau or alpha)."""

    def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
        return t(k, lang, **kw)

    d1, d2, d3 = st.columns(3)
    with d1:
        mode = st.radio(T("pl_draft"), ["none", "auto", "pick"], horizontal=True,
                        key=DRAFT_MODE, help=T("help_pl_draft"),
                        format_func=lambda m: T("pl_draft_" + m) if m != "pick"
                        else T("pl_draft_keys"))
    with d2:
        st.multiselect(T("pl_draft_keys"), list(DRAFT_CHOICES), key=DRAFT_KEYS,
                       disabled=mode != "pick", placeholder=T("choose_options"),
                       format_func=lambda k: draft_label(k, lang))
    with d3:
        kind = st.radio(T("pl_acc_kind"), ["published", "length", "rate"], horizontal=True,
                        key=ACC_KIND, disabled=mode == "none", help=T("help_pl_acc"),
                        format_func=lambda k: T("pl_acc_" + k))
        st.number_input(T("pl_acc_value"), min_value=0.0, max_value=17.0, step=0.05,
                        key=ACC_VALUE, disabled=mode == "none" or kind == "published")


def _context_choices(catalog: Catalog, model_key: str, ctx_key: str) -> list[int]:
    """The context lengths to offer for the model chosen under widget key `model_key`: the
    usual choices up to its limit, the limit itself and the current value; a context past the
    limit (a model just chosen with a shorter one) is first clamped to it in session state."""
    limit = clamp_context(catalog, model_key, ctx_key)
    return sorted({*(c for c in CTX_CHOICES if c <= limit), limit,
                   int(st.session_state[ctx_key])})


def mix_inputs(catalog: Catalog, lang: str) -> None:
    """The mix section's added workloads: how many, then one row of inputs each (a workload's
    context offered and clamped up to its model's limit, as the first workload's)."""

    def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
        return t(k, lang, **kw)

    n_more = int(st.number_input(T("mix_n"), min_value=0, max_value=MAX_WORKLOADS - 1,
                                 step=1, key=MIX_N))
    for i in range(n_more):
        c = st.columns([2, 3, 2, 2, 2, 2, 2, 2])
        c[0].text_input(T("mix_workload"), max_chars=MIX_NAME_CHARS, key=mix_key(i, "name"))
        c[1].selectbox(T("pl_model"), catalog.variant_keys(), key=mix_key(i, "model"))
        c[2].number_input(T("pl_dau"), min_value=1, max_value=10**9, step=100,
                          key=mix_key(i, "dau"))
        c[3].number_input(T("pl_rpu"), min_value=0.1, max_value=1e5, key=mix_key(i, "rpu"))
        c[4].selectbox(T("pl_ctx"), _context_choices(catalog, mix_key(i, "model"),
                                                     mix_key(i, "ctx")), key=mix_key(i, "ctx"))
        c[5].number_input(T("pl_out"), min_value=1, max_value=1_000_000, key=mix_key(i, "out"))
        c[6].number_input(T("pl_ttft"), min_value=10.0, max_value=1e7, key=mix_key(i, "ttft"))
        c[7].number_input(T("pl_tpot"), min_value=1.0, max_value=1e6, key=mix_key(i, "tpot"))
    clamped = [f"- {st.session_state[mix_key(i, 'name')]}{T('colon')}{note_text(n, lang)}"
               for i in range(n_more) if (n := clamped_notice(mix_key(i, "ctx"))) is not None]
    if clamped:
        st.warning(T("pl_ctx_clamped") + "\n\n" + "\n".join(clamped))
