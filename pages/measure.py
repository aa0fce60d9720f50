"""Measure: run `capacity bench` against an endpoint in the background, or against the simulator.

Draws only: the form, the job and the simulator, the connect check and the guard are
`capacity.bench.form`, `.job`, `.connect` and `.guard`; the form's state and presets are
`app.measure_form`, the job's and the simulators' `app.measure_state`.
"""

from __future__ import annotations

import streamlit as st

from app import auth, cache
from app import measure_form as form
from app import measure_jobs as jobs
from app import measure_state as ms
from app.bootstrap import ensure_navigation
from app.format import distinct_names, markdown_plain, plain_error
from app.state import init_lang
from capacity.access import AccessDenied, Right
from capacity.bench.config import MAX_PASSES
from capacity.bench.connect import connect_check
from capacity.bench.form import PAGE_LIMITS
from capacity.bench.guard import measure_guard
from capacity.bench.storage import model_name
from capacity.errors import CapacityError
from capacity.model.cost import CURRENCIES
from capacity.model.traffic import load_presets
from capacity.report.i18n import t

ensure_navigation()
lang = init_lang()


def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
    return t(k, lang, **kw)


cat = cache.catalog()
variants = cat.variant_keys()
gpus = sorted(cat.gpus)

st.title(T("m_title"))
st.caption(T("m_intro"))

guard = measure_guard()
if not guard.enabled:
    st.warning(T("m_disabled", reason=guard.reason))
    st.stop()
if guard.allow_hosts:
    st.info(T("m_allow", hosts=", ".join(sorted(guard.allow_hosts))))
elif guard.allow_hosts is not None:
    st.caption(T("m_loopback_only"))

form.init_form(cat)
# with sign-in: a user sees and stops only what they started (an admin everything), and only an
# editor measures; the buttons are disabled for a viewer and the action checks again
user = auth.current()
can = user.may(Right.MEASURE)
auth.read_only_note(Right.MEASURE, lang)
try:  # a simulator the form is being pointed at, until a run has drawn the form with it
    form.settle_sim(cat, user)
except CapacityError as exc:
    st.error(T("m_error", msg=plain_error(exc, lang)))

# -- No GPU at hand? ------------------------------------------------------------------------
# keyed, so the browser keeps it as the user left it: without a key its identity is its label,
# its `expanded` and its place, and a rerun that shifts or reopens it (a sim started or ended,
# a message drawn above it) made a new element drawn closed, the Stop button hidden in it
with st.expander(T("m_sim_title"), expanded=ms.sim(user.id) is not None, key="m_sim_box"):
    st.caption(T("m_sim_help"))
    c1, c2, c3 = st.columns([3, 2, 1])
    c1.selectbox(T("m_sim_model"), variants, key="m_sim_model")
    c2.selectbox(T("m_sim_gpu"), gpus, key="m_sim_gpu")
    c3.number_input(T("m_sim_speedup"), min_value=0.1, max_value=100.0, step=1.0,
                    key="m_sim_speedup", help=T("m_sim_speedup_help"))
    running_sim = ms.sim(user.id)
    if running_sim is not None and st.session_state.pop("measure_sim_reattached", False):
        form.use_sim(running_sim, cat, user)  # a tab opened after the one that started it: carry on
        st.info(T("m_sim_reattached", url=running_sim.base_url))
    if running_sim is None:
        if (st.button(T("m_sim_start"), key="m_sim_start", type="primary", disabled=not can)
                and not auth.refused(Right.MEASURE, lang)):
            # the request first (one write), then the start: a run stopped while it starts
            # it (a field typed meanwhile) leaves the rest to the next (`form.SimSwitch`)
            form.ask_sim(config=(str(st.session_state["m_sim_model"]),
                                 str(st.session_state["m_sim_gpu"]),
                                 float(st.session_state["m_sim_speedup"])))
            try:
                form.settle_sim(cat, user)
            except CapacityError as exc:
                st.error(T("m_error", msg=plain_error(exc, lang)))
            else:
                st.rerun()
    else:
        st.success(T("m_sim_running", url=running_sim.base_url, model=running_sim.model,
                     gpu=running_sim.gpu, speedup=running_sim.speedup))
        if kept := form.kept_note(lang):
            st.warning(kept)
        if (st.button(T("m_sim_stop"), key="m_sim_stop", disabled=not can)
                and not auth.refused(Right.MEASURE, lang)):
            try:
                ms.SIMS.stop(running_sim.proc.pid, scope=user.scope)
            except AccessDenied:
                st.error(T("auth_not_yours"))
            else:
                running_sim.stop()
                form.forget_sim()
                st.rerun()
    others = [s for s in ms.SIMS.running(user.scope) if s is not running_sim]
    if others:  # started by this app from other tabs (or earlier): use one, or stop it
        st.markdown(f"**{T('m_sims')}**")
        for s in others:
            pid = s.proc.pid
            r1, r2, r3 = st.columns([6, 1, 1])
            r1.caption(T("m_sim_row", model=s.model, gpu=s.gpu, url=s.base_url,
                         speedup=s.speedup, pid=pid))
            if r2.button(T("m_sim_use"), key=f"m_sim_use_{pid}", disabled=not can):
                form.use_sim(s, cat, user, rerun=True)
            if (r3.button(T("m_sim_stop_one"), key=f"m_sim_stop_{pid}", disabled=not can)
                    and not auth.refused(Right.MEASURE, lang)):
                try:
                    ms.SIMS.stop(pid, scope=user.scope)
                except AccessDenied:
                    st.error(T("auth_not_yours"))
                else:
                    st.rerun()

# the simulators this app started that this user may measure (with sign-in: their own; another
# user's is refused at Connect and at the start: `ms.check_endpoint`, `ms.start_job`)
sim_urls = [s.base_url for s in ms.SIMS.running(user.scope)]

# -- the endpoint ---------------------------------------------------------------------------
st.subheader(T("m_endpoint"))
c1, c2 = st.columns([3, 2])
c1.text_input(T("m_base_url"), key="m_base_url", help=T("m_base_url_help"))
c2.text_input(T("m_api_key"), key="m_api_key", type="password", help=T("m_api_key_help"))
if st.button(T("m_connect"), key="m_connect", disabled=not can) and not auth.refused(
        Right.MEASURE, lang):
    try:
        ms.check_endpoint(user, st.session_state["m_base_url"])  # another user's simulator
        report = connect_check(st.session_state["m_base_url"],
                               st.session_state.get("m_api_key") or None, timeout_s=10.0,
                               guard=guard, simulator_urls=sim_urls)
    except AccessDenied:
        st.session_state.pop(ms.CONNECT, None)
        st.error(T("m_sim_not_yours"))
    except CapacityError as exc:
        st.session_state.pop(ms.CONNECT, None)
        st.error(T("m_error", msg=plain_error(exc, lang)))
    else:
        form.keep_report(report)
rep = form.connect_report()  # None when it was for another URL
if rep is not None:
    for col, (label, value) in zip(st.columns(4), form.report_words(rep, lang), strict=True):
        col.metric(label, value)
    (st.success if rep.ok else st.warning)(markdown_plain(rep.message))  # the server's words

models = list(rep.models) if rep is not None and rep.models else []
if models:
    # a model id that is a file path (llama.cpp: the .gguf it loaded) is shown by its name;
    # the id itself is what the run requests
    st.selectbox(T("m_model"), models, key="m_model",
                 format_func=distinct_names({m: model_name(m) for m in models}).__getitem__)
else:
    st.text_input(T("m_model"), key="m_model", help=T("m_model_help"))

# -- the sweep ------------------------------------------------------------------------------
st.subheader(T("m_sweep"))
st.button(T("m_preset_calib"), key="m_preset_calib", on_click=form.fill_calibration_sweep,
          args=(cat, lang), help=T("m_preset_plan_help"))
if info := st.session_state.get(form.PRESET_INFO):
    st.caption(info)
form.draw_plan_sweeps(lang)  # the preset's runs: each prompt length with its own levels
c1, c2, c3, c4, c5 = st.columns([3, 2, 2, 3, 2])
c1.text_input(T("m_levels"), key="m_levels", help=T("m_levels_help"))
c2.number_input(T("m_requests"), min_value=1, max_value=PAGE_LIMITS.requests, step=1,
                key="m_requests", help=T("m_requests_help"))
c3.number_input(T("m_passes"), min_value=1, max_value=MAX_PASSES, step=1, key="m_passes",
                help=T("m_passes_help"))
c4.text_input(T("m_prompt_list"), key="m_prompts", help=T("m_prompt_list_help"))
c5.number_input(T("m_max_tokens"), min_value=1, max_value=PAGE_LIMITS.max_tokens, step=16,
                key="m_max_tokens")
c1, c2, c3, c4 = st.columns(4)
c1.text_input(T("m_label"), key="m_label", help=T("m_label_help"))
c2.number_input(T("m_rate"), min_value=0.0, max_value=PAGE_LIMITS.request_rate_rps, step=1.0,
                key="m_rate", help=T("m_rate_help"))
c3.number_input(T("m_slo_ttft"), min_value=0.0, step=100.0, key="m_slo_ttft",
                help=T("m_slo_help"))
c4.number_input(T("m_slo_tpot"), min_value=0.0, step=5.0, key="m_slo_tpot",
                help=T("m_slo_help"))
st.subheader(T("m_hardware"))
# two rows: five fields in one row left the currency one letter wide at 1000 px
c1, c2, c3, c4 = st.columns([3, 2, 2, 2])
c1.selectbox(T("m_gpu"), gpus, key="m_gpu")
c2.number_input(T("m_gpus"), min_value=1, max_value=PAGE_LIMITS.gpus, step=1, key="m_gpus")
c3.number_input(T("m_price"), min_value=0.0, step=0.5, key="m_price")
c4.selectbox(T("m_currency"), list(CURRENCIES), key="m_currency")
c5, c6 = st.columns([3, 2])
c5.selectbox(T("m_predict"), variants, key="m_predict", help=T("m_predict_help"))
c6.selectbox(T("m_workload"), ["", *sorted(load_presets())], key="m_workload",
             format_func=lambda k: form.workload_label(k, lang), help=T("m_workload_help"))
form.form_drawn()  # the simulator's values are the browser's now (`form.SimSwitch`)


current = ms.job()
busy = current is not None and current.running
if (st.button(T("m_start"), key="m_start", type="primary", disabled=busy or not can)
        and not auth.refused(Right.MEASURE, lang)):
    try:  # the guard and another user's simulator are checked again at the start
        st.session_state[ms.JOB] = ms.start_job(user, form.forms(),
                                                st.session_state.get("m_api_key") or None, guard)
    except AccessDenied:
        st.error(T("m_sim_not_yours"))
    except CapacityError as exc:
        st.error(T("m_error", msg=plain_error(exc, lang)))
    else:
        st.rerun()


# -- progress: every measurement this user may see, from any tab ---------------------------
@st.fragment(run_every=1.0)
def progress() -> None:
    jobs.draw(user, can, lang)


progress()
