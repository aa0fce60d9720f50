"""The Measure page's form: its session-state keys (`m_*`) with their defaults, the presets that
fill them (a simulated endpoint, the calibration sweep), the connect check's words, and the form
read back as the job's `capacity bench` runs (`capacity.bench.form.MeasureForm`).

The job and the simulators themselves are `app.measure_state`'s.
"""

from __future__ import annotations

import streamlit as st

from app import measure_state as ms
from capacity.bench.connect import ConnectReport
from capacity.bench.form import MeasureForm, parse_levels, parse_prompt_chars, per_prompt
from capacity.bench.job import SimServer
from capacity.catalog.loader import Catalog
from capacity.errors import CapacityError
from capacity.fit.sweep import CALIBRATION_PASSES, CHARS_PER_TOKEN, OUTPUT_TOKENS, measurement_plan
from capacity.model.scenario import DEFAULT_GPU, DEFAULT_MODEL, make_scenario
from capacity.model.traffic import load_presets
from capacity.report.i18n import MESSAGES, error_text, t

PRESET_INFO = "m_preset_info"
"""What the last preset filled in (a caption under its button)."""
PENDING = "m_pending_form"
"""Form values a button set just before `st.rerun()`, applied again at the top of the next
run: Streamlit drops the state of widgets that an interrupted run never drew, and the widgets
then came back with their defaults (the simulator's URL lost, Connect checking port 8000)."""


def init_form(catalog: Catalog) -> None:
    """Give every input of the form its default on the session's first visit."""
    gpu = catalog.gpu(DEFAULT_GPU)
    defaults = {"m_base_url": "http://127.0.0.1:8000/v1", "m_model": "", "m_levels": "1,4,16",
                "m_requests": 32, "m_passes": 1, "m_prompts": "2000", "m_rate": 0.0,
                "m_max_tokens": 64, "m_label": "measure",
                "m_slo_ttft": 0.0, "m_slo_tpot": 0.0, "m_gpu": DEFAULT_GPU, "m_gpus": 1,
                "m_price": gpu.price_per_hour, "m_currency": gpu.currency,
                "m_predict": DEFAULT_MODEL, "m_workload": "",
                "m_sim_model": DEFAULT_MODEL, "m_sim_gpu": DEFAULT_GPU, "m_sim_speedup": 1.0}
    for k, v in defaults.items():
        st.session_state.setdefault(k, v)
    st.session_state.update(st.session_state.pop(PENDING, {}))


def use_sim(s: SimServer, catalog: Catalog, *, rerun: bool = False) -> None:
    """Point the form at a simulated endpoint (its URL, model, GPU and price); `rerun`: then
    rerun the page, the values carried over to the next run (`PENDING`)."""
    st.session_state[ms.SIM] = s
    g = catalog.gpu(s.gpu)
    values = {"m_base_url": s.base_url, "m_model": s.model, "m_gpu": s.gpu,
              "m_predict": s.model, "m_price": g.price_per_hour, "m_currency": g.currency,
              "m_label": f"sim-{s.gpu}"}
    st.session_state.update(values)  # this run's widgets, drawn below
    st.session_state.pop(ms.CONNECT, None)
    if rerun:
        st.session_state[PENDING] = values
        st.rerun()


def fill_calibration_sweep(catalog: Catalog, lang: str) -> None:
    """The "calibration sweep" preset: the prompt lengths and levels of `capacity calibrate
    --plan` for the model to predict with on the chosen GPU (runs before the widgets)."""
    g = st.session_state
    try:
        plan = measurement_plan(make_scenario(str(g["m_predict"]), str(g["m_gpu"]),
                                              catalog=catalog))
    except CapacityError as exc:
        g[PRESET_INFO] = t("m_error", lang, msg=error_text(exc, lang))
        return
    prompts = [p for p, _ in plan.sweeps()]
    levels = sorted({c.concurrency for c in plan.cells})
    g["m_prompts"] = ",".join(str(p * CHARS_PER_TOKEN) for p in prompts)
    g["m_levels"] = ",".join(map(str, levels))
    g["m_max_tokens"] = OUTPUT_TOKENS
    g["m_passes"] = CALIBRATION_PASSES
    g["m_label"] = "calibration"
    g[PRESET_INFO] = t("m_preset_calib_done", lang, model=plan.model, gpu=plan.gpu,
                       n=len(plan.cells), prompts=", ".join(map(str, prompts)),
                       levels=", ".join(map(str, levels)), tokens=OUTPUT_TOKENS,
                       passes=CALIBRATION_PASSES)


def connect_report() -> ConnectReport | None:
    """The last connect check, while the URL is still the one it checked."""
    rep = st.session_state.get(ms.CONNECT)
    if st.session_state.get("m_connected_url") != st.session_state["m_base_url"]:
        return None  # the report was for another URL
    return rep if isinstance(rep, ConnectReport) else None


def keep_report(report: ConnectReport) -> None:
    """A connect check passed: keep its report, and choose a model the endpoint serves."""
    st.session_state[ms.CONNECT] = report
    st.session_state["m_connected_url"] = st.session_state["m_base_url"]
    if report.models and st.session_state.get("m_model") not in report.models:
        st.session_state["m_model"] = report.models[0]


def report_words(rep: ConnectReport, lang: str) -> list[tuple[str, str]]:
    """The connect check's figures: reachable, auth, models, streams."""

    def yn(v: bool | None) -> str:
        return "-" if v is None else t("m_yes" if v else "m_no", lang)

    return [(t("m_reachable", lang), yn(rep.reachable)), (t("m_auth", lang), yn(rep.auth_ok)),
            (t("m_models", lang), str(len(rep.models))), (t("m_streams", lang), yn(rep.streams))]


def workload_label(k: str, lang: str) -> str:
    """A workload preset's name in the page's language ('' is none)."""
    if k == "":
        return t("m_workload_none", lang)
    return (t("workload_preset_" + k, lang) if "workload_preset_" + k in MESSAGES
            else load_presets()[k].name)


def forms() -> tuple[MeasureForm, ...]:
    """The job: one `capacity bench` run per prompt length (`per_prompt`)."""
    g = st.session_state
    return per_prompt(MeasureForm(
        base_url=str(g["m_base_url"]).strip(), model=str(g["m_model"]).strip() or None,
        concurrency=parse_levels(str(g["m_levels"])), requests=int(g["m_requests"]),
        passes=int(g["m_passes"]),
        max_tokens=int(g["m_max_tokens"]), request_rate=float(g["m_rate"]) or None,
        label=str(g["m_label"]).strip(), slo_ttft_ms=float(g["m_slo_ttft"]) or None,
        slo_tpot_ms=float(g["m_slo_tpot"]) or None, gpu=str(g["m_gpu"]), gpus=int(g["m_gpus"]),
        gpu_price=float(g["m_price"]), currency=str(g["m_currency"]),
        predict_model=str(g["m_predict"]), out_dir=str(ms.bench_root()),
        workload=str(g["m_workload"]) or None),
        # a workload draws each prompt's length: one run, not one per prompt length
        parse_prompt_chars(str(g["m_prompts"]))[:1 if g["m_workload"] else None])
