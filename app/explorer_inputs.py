"""The Explorer's inputs: the widgets bound to `app.state`'s keys (`ex_<field>`).

`main_inputs` draws the model, GPU, concurrency and context rows at the top of the page;
`sidebar_inputs` the rest (workload, prefix, targets, cost, efficiency) in the sidebar;
`engine_knob_inputs` the engine's scheduler knobs in the load view. The values live in session
state (`app.state`); the page reads them back with `app.state.from_widgets`.
"""

from __future__ import annotations

import streamlit as st

from app.explorer_view import context_options, draft_source
from app.format import entry_names, tokens_label
from app.state import (
    DRAFT_CHOICES,
    MAX_CONCURRENCY,
    MAX_CONTEXT,
    PROMPT_FOLLOWS,
    basis_choices,
    fit_draft_tau,
    fit_pp,
    fit_tp,
    from_mirror,
    from_widgets,
    key,
    mirror_inputs,
    on_basis_change,
    on_currency_change,
    on_gpu_change,
    on_model_change,
    show_basis_knobs,
    sync_prompt,
    valid_pps,
    valid_tps,
)
from capacity.catalog.engines import DEFAULT_ENGINE, engine_names, engine_profile
from capacity.catalog.loader import Catalog, Model
from capacity.model.cost import CURRENCIES
from capacity.model.forward_pass import eager_pass_ms
from capacity.model.kv import align_block_tokens
from capacity.model.prefix import ALIGN_PROFILE
from capacity.model.scenario import Scenario
from capacity.model.speculative import MAX_DEPTH
from capacity.report.bases import basis_label
from capacity.report.i18n import engine_label, t
from capacity.report.planner_url import PLANNER_PCTS
from capacity.report.urlstate import (
    ACCEPT_MODES,
    KNOBS,
    MAX_BATCHED_TOKENS,
    MAX_KV_PAGE,
    MAX_NUM_SEQS,
    MAX_OFFLOAD_GIB,
    MAX_TURNS,
    STEP_METHODS,
    ExplorerState,
)
from capacity.units import KV_DTYPES


def main_inputs(catalog: Catalog, lang: str) -> tuple[Model, tuple[int, int] | None]:
    """The rows at the top: model, weights, GPU; GPUs, TP, KV cache; concurrency and context
    (each a slider with an exact number beside it). Returns the chosen model and, when the TP
    size had to move to one the GPU count allows, (old, new) for the page to say so."""

    def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
        return t(k, lang, **kw)

    ctx_now = int(st.session_state[key("ctx")])
    models = sorted(catalog.models)
    gpus = sorted(catalog.gpus)
    gpu_names = entry_names(catalog.gpus)
    row1 = st.columns([3, 2, 3])
    row1[0].selectbox(T("model"), models, key=key("model"),
                      format_func=entry_names(catalog.models).__getitem__,
                      on_change=on_model_change, args=(catalog,))
    model = catalog.models[st.session_state[key("model")]]
    formats = [f.key for f in catalog.formats_for(model)]
    if st.session_state[key("weights")] not in formats:
        on_model_change(catalog)
    row1[1].selectbox(T("weights"), formats, key=key("weights"),
                      format_func=entry_names(catalog.formats).__getitem__)
    row1[2].selectbox(T("gpu"), gpus, key=key("gpu"), format_func=gpu_names.__getitem__,
                      on_change=on_gpu_change, args=(catalog,))
    row2 = st.columns([3, 1, 1, 3])
    row2[0].number_input(T("gpus"), min_value=1, max_value=64, step=1, key=key("gpus"))
    tp_moved = fit_tp(catalog)
    tp_sizes = valid_tps(catalog)
    row2[1].selectbox(T("tp_short"), tp_sizes, key=key("tp"), help=T("help_tp"))
    fit_pp(catalog)
    row2[2].selectbox(T("pp_short"), valid_pps(catalog), key=key("pp"), help=T("help_pp"))
    row2[3].selectbox(T("kv"), list(KV_DTYPES), key=key("kv"))
    row3 = st.columns([3, 1, 3, 1], vertical_alignment="bottom")
    mirror_inputs()
    row3[0].slider(T("c"), min_value=1, max_value=int(st.session_state["ex_c_max"]), step=1,
                   key=key("c"))
    row3[1].number_input(T("c_exact"), min_value=1, max_value=MAX_CONCURRENCY, step=1,
                         key=key("c_in"), on_change=from_mirror, args=("c",),
                         help=T("help_exact"), label_visibility="collapsed")
    row3[2].select_slider(T("ctx"), options=context_options(model, ctx_now), key=key("ctx"),
                          format_func=tokens_label)
    row3[3].number_input(T("ctx_exact"), min_value=1, max_value=MAX_CONTEXT, step=1024,
                         key=key("ctx_in"), on_change=from_mirror, args=("ctx",),
                         help=T("help_exact"), label_visibility="collapsed")
    return model, tp_moved


def draft_inputs(catalog: Catalog, lang: str) -> None:
    """Speculative decoding (F12), in the sidebar: the draft's kind and depth, and where its
    acceptance comes from (published, or entered as a length or a rate), with the tau it gives
    and its source, or why there is none (`app.explorer_view.draft_source`)."""

    def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
        return t(k, lang, **kw)

    with st.expander(T("sec_draft"), expanded=bool(st.session_state[key("draft")])):
        st.selectbox(T("draft"), DRAFT_CHOICES, key=key("draft"),
                     format_func=lambda k: T("draft_kind_" + (k or "none")), help=T("help_draft"))
        if not st.session_state[key("draft")]:
            return
        st.number_input(T("draft_k"), min_value=1, max_value=MAX_DEPTH, step=1,
                        key=key("draft_k"), help=T("help_draft_k"))
        st.radio(T("draft_accept"), list(ACCEPT_MODES), key=key("draft_accept"),
                 format_func=lambda m: T("draft_accept_" + m), horizontal=True,
                 help=T("help_draft_accept"))
        mode = st.session_state[key("draft_accept")]
        if mode == "length":
            fit_draft_tau()
            st.number_input(T("draft_tau"), min_value=1.0,
                            max_value=float(st.session_state[key("draft_k")]) + 1.0, step=0.1,
                            key=key("draft_tau"), help=T("help_draft_tau"))
        elif mode == "rate":
            st.number_input(T("draft_alpha"), min_value=0.0, max_value=1.0, step=0.05,
                            key=key("draft_alpha"), help=T("help_draft_alpha"))
        text, ok = draft_source(from_widgets(lang), catalog, lang)
        if ok:
            st.caption(text)
        else:  # the page says why beside the figures; here, what to do
            st.warning(T("draft_enter"), icon=":material/edit:")


def sidebar_inputs(catalog: Catalog, lang: str) -> None:
    """The sidebar's inputs: workload, shared prefix, targets, cost and the prediction's basis
    with its efficiency knobs (a named basis sets every knob: the sliders show its values)."""

    def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
        return t(k, lang, **kw)

    with st.sidebar:
        with st.expander(T("sec_workload"), expanded=False):
            st.toggle(T("prompt_follows"), key=key(PROMPT_FOLLOWS), on_change=sync_prompt,
                      help=T("help_prompt_follows"))
            st.number_input(T("prompt"), min_value=1, max_value=10_000_000, step=512,
                            key=key("prompt"), disabled=bool(st.session_state[key(PROMPT_FOLLOWS)]))
            st.number_input(T("out_tokens"), min_value=1, max_value=1_000_000, step=64,
                            key=key("out"), help=T("help_out_tokens"))
            st.slider(T("util"), min_value=0.05, max_value=1.0, step=0.01, key=key("util"),
                      help=T("help_util"))
            st.number_input(T("overhead"), min_value=0.0, max_value=1000.0, step=0.1,
                            key=key("overhead"))
            st.slider(T("headroom"), min_value=0.0, max_value=1.0, step=0.05, key=key("headroom"))
            engines = list(engine_names())
            if st.session_state[key("engine")] not in engines:
                st.session_state[key("engine")] = DEFAULT_ENGINE
            st.selectbox(T("engine"), engines, key=key("engine"),
                         format_func=lambda k: engine_label(k, lang), help=T("help_engine"))
        draft_inputs(catalog, lang)
        with st.expander(T("sec_prefix"), expanded=False):
            st.number_input(T("prefix_tokens"), min_value=0, max_value=10_000_000, step=256,
                            key=key("prefix"), help=T("help_prefix"))
            st.slider(T("prefix_share"), min_value=0.0, max_value=1.0, step=0.05,
                      key=key("prefix_share"))
        with st.expander(T("sec_slo"), expanded=True):
            st.number_input(T("slo_ttft_ms"), min_value=1.0, max_value=1e7, step=100.0,
                            key=key("slo_ttft_ms"))
            st.number_input(T("slo_tpot_ms"), min_value=0.1, max_value=1e6, step=5.0,
                            key=key("slo_tpot_ms"))
            st.number_input(T("slo_cost"), min_value=0.0, max_value=1e6, step=0.1,
                            key=key("slo_cost"), format="%.3f")
            st.select_slider(T("pl_pct"), sorted({*PLANNER_PCTS, int(st.session_state[key("pct")])}),
                             key=key("pct"), help=T("help_ex_pct"))
        with st.expander(T("sec_cost"), expanded=True):
            st.segmented_control(T("currency"), list(CURRENCIES), key=key("currency"),
                                 required=True, on_change=on_currency_change)
            st.number_input(T("price"), min_value=0.0, max_value=1e5, step=0.1, key=key("price"),
                            format="%.3f")
            st.number_input(T("rate"), min_value=0.01, max_value=1e4, step=0.05, key=key("rate"))
            st.session_state[key("spare")] = bool(st.session_state[key("spare")])
            st.checkbox(T("ex_spare"), key=key("spare"), help=T("help_ex_spare"))
        with st.expander(T("sec_eff"), expanded=bool(st.session_state[key("calibration")])):
            bases = basis_choices()
            if st.session_state[key("calibration")] not in bases:
                st.session_state[key("calibration")] = ""
            st.selectbox(T("prediction"), bases, key=key("calibration"),
                         format_func=lambda b: basis_label(b, lang), help=T("help_prediction"),
                         on_change=on_basis_change, args=(catalog,))
            calibrated = bool(st.session_state[key("calibration")])
            if calibrated:  # a named basis sets every knob: the sliders show its values
                show_basis_knobs(catalog)
            st.slider(T("eff"), min_value=0.01, max_value=1.0, step=0.01, key=key("eff"),
                      help=T("help_eff"), disabled=calibrated)
            st.slider(T("mfu"), min_value=0.01, max_value=1.0, step=0.01, key=key("mfu"),
                      disabled=calibrated)
            # the rest of a basis' knobs (a Planner option on a typical-engine basis carries them;
            # 1.0 and 0 ms are the chapter's spec sheet)
            st.slider(T("eta_bw"), min_value=0.01, max_value=1.0, step=0.01, key=key("eta_bw"),
                      help=T("help_eta_bw"), disabled=calibrated)
            st.number_input(T("step_oh_ms"), min_value=0.0, max_value=1000.0, step=0.5,
                            key=key("step_oh_ms"), disabled=calibrated)
            st.number_input(T("prefill_oh_ms"), min_value=0.0, max_value=100_000.0, step=1.0,
                            key=key("prefill_oh_ms"), disabled=calibrated)
            # a segmented control, as the language switch: the first screen then needs no
            # radio's code in the browser before the headline (issue 30, docs/benchmarks.md)
            st.segmented_control(T("step_method"), list(STEP_METHODS), key=key("step"),
                                 required=True, format_func=lambda m: T("step_method_" + m),
                                 help=T("help_step_method"), disabled=calibrated)


KNOB_WIDGET = "exw_"
"""The prefix of the engine knobs' widget keys: a blank widget (None) is the knob's 0 (the
engine's default) in `ex_<knob>`, which `app.state` keeps and the URL carries."""


def _knob_changed(name: str) -> None:
    """A knob's widget was edited: its value, blank as 0, becomes the input."""
    value = st.session_state.get(KNOB_WIDGET + name)
    st.session_state[key(name)] = (0.0 if name == "offload" else 0) if value is None else value


def engine_knob_inputs(state: ExplorerState, scenario: Scenario, lang: str) -> None:
    """The load view's engine knobs (`ExplorerState.load_knobs`, `capacity plan`'s flags):
    max_num_seqs, the token budget, the KV page and the CPU offload, each blank for the
    profile's default on this GPU (shown in the box), each within the CLI's bounds; the GPU
    memory utilisation is the workload's `util` (said under them)."""

    def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
        return t(k, lang, **kw)

    prof = engine_profile(state.engine).for_gpu(scenario.gpu.key, scenario.vram_gb)
    for name in KNOBS:  # the input (0: blank) into its widget, before the widget is drawn
        st.session_state[KNOB_WIDGET + name] = getattr(state, name) or None
    default = {"seqs": T("knob_default", v=f"{prof.max_seqs:,}"),
               "budget": T("knob_default", v=f"{prof.token_budget_tokens:,}")
               if prof.chunked else T("knob_whole"),
               "kvblk": T("knob_default", v=f"{prof.kv_block_tokens:,}"),
               "offload": T("knob_none")}
    bounds: dict[str, tuple[int | float, int | float, int | float]] = {
        "seqs": (1, MAX_NUM_SEQS, 1), "budget": (1, MAX_BATCHED_TOKENS, 256),
        "kvblk": (1, MAX_KV_PAGE, 1), "offload": (0.0, float(MAX_OFFLOAD_GIB), 0.5)}
    cols = st.columns(len(KNOBS))
    for col, name in zip(cols, KNOBS, strict=True):
        lo, hi, step = bounds[name]
        col.number_input(T("knob_" + name), min_value=lo, max_value=hi, step=step,
                         key=KNOB_WIDGET + name, placeholder=default[name],
                         help=T("help_knob_" + name), on_change=_knob_changed, args=(name,))
    # prefix caching: vLLM's align mode on a hybrid model (`ExplorerState.pcache`)
    ss = st.session_state
    ss[key("pcache")] = bool(ss.get(key("pcache"), 0))
    block = align_block_tokens(scenario.model, scenario.kv_dtype, scenario.tp,
                               state.kvblk or prof.kv_block_tokens)
    if not block:
        what = T("knob_pcache_none")
    elif prof.key != ALIGN_PROFILE:
        what = T("knob_pcache_engine")
    else:
        what = T("knob_pcache_hybrid", block=f"{block:,}")
    st.toggle(T("knob_pcache"), key=key("pcache"),
              help=T("help_knob_pcache", model=scenario.model.name, what=what))
    # no CUDA graphs: the profile's per-layer eager cost (`ExplorerState.eager`)
    ss[key("eager")] = bool(ss.get(key("eager"), 0))
    eager = (T("knob_eager_adds", ms=f"{eager_pass_ms(scenario.model, prof):.2f}",
               layers=scenario.model.layers, per=f"{prof.eager_layer_ms:g}")
             if prof.eager_layer_ms > 0 else T("knob_eager_none", engine=prof.name))
    if prof.eager_layer_ms > 0 and prof.prefill_eager_layer_ms > 0:
        eager += T("knob_eager_prefill", layers=scenario.model.layers,
                   ms=f"{scenario.model.layers * prof.prefill_eager_layer_ms:.2f}",
                   per=f"{prof.prefill_eager_layer_ms:g}")
    st.toggle(T("knob_eager"), key=key("eager"), help=T("help_knob_eager", what=eager))
    # conversations: turns and each later turn's new message (`ExplorerState.turns`)
    c1, c2, _ = st.columns(3)
    c1.number_input(T("knob_turns"), min_value=1, max_value=MAX_TURNS, step=1, key=key("turns"),
                    help=T("help_knob_turns"))
    c2.number_input(T("knob_turn_tokens"), min_value=0, max_value=10_000_000, step=50,
                    key=key("turn_tokens"), help=T("help_knob_turn_tokens"),
                    disabled=state.turns <= 1)
    st.caption(T("knob_util", util=f"{state.util:g}"))
