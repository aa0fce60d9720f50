"""The Measure page's form: its session-state keys (`m_*`) with their defaults, the presets that
fill them (a simulated endpoint, the calibration sweep), the connect check's words, and the form
read back as the job's `capacity bench` runs (`capacity.bench.form.MeasureForm`).

The job and the simulators themselves are `app.measure_state`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from app import measure_state as ms
from capacity.bench.connect import ConnectReport
from capacity.bench.form import (
    MeasureForm,
    parse_levels,
    parse_prompt_chars,
    per_prompt,
    per_sweep,
)
from capacity.bench.job import SimServer
from capacity.catalog.loader import Catalog
from capacity.errors import CapacityError
from capacity.fit.sweep import CALIBRATION_PASSES, CHARS_PER_TOKEN, OUTPUT_TOKENS, measurement_plan
from capacity.model.scenario import DEFAULT_GPU, DEFAULT_MODEL, make_scenario
from capacity.model.traffic import load_presets
from capacity.report.i18n import MESSAGES, error_text, t

PRESET_INFO = "m_preset_info"
"""What the last preset filled in (a caption under its button)."""
PLAN = "m_plan_sweeps"
"""The calibration preset's sweeps (`PlanSweeps`): the job runs them while the prompt lengths
and levels are as the preset filled them in."""
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


@dataclass(frozen=True, kw_only=True)
class PlanSweeps:
    """A calibration plan's sweeps as the preset put them in the form: (prompt characters, that
    length's own levels), one `capacity bench` run each (`capacity.fit.sweep`), and the text it
    wrote in the prompt-lengths and levels fields (their union of levels)."""

    sweeps: tuple[tuple[int, tuple[int, ...]], ...]
    prompts_text: str
    levels_text: str

    @property
    def cells(self) -> int:
        """(prompt length, level) cells the sweeps measure."""
        return sum(len(levels) for _, levels in self.sweeps)

    def table(self, lang: str) -> pd.DataFrame:
        """Prompt length (tokens and characters) -> its levels, one row per run."""
        return pd.DataFrame(
            [(c // CHARS_PER_TOKEN, c, ", ".join(map(str, levels))) for c, levels in self.sweeps],
            columns=[t("m_plan_col_tokens", lang), t("m_plan_col_chars", lang),
                     t("m_plan_col_levels", lang)])


def plan_sweeps() -> PlanSweeps | None:
    """The preset's sweeps while they still apply: the prompt lengths and levels as it filled
    them in and no workload (a workload draws the lengths: one run). None: the form's plain
    product, every level at every prompt length."""
    g = st.session_state
    p = g.get(PLAN)
    if not isinstance(p, PlanSweeps) or g.get("m_workload"):
        return None
    same = (str(g.get("m_prompts", "")).strip(), str(g.get("m_levels", "")).strip()) == (
        p.prompts_text, p.levels_text)
    return p if same else None


def fill_calibration_sweep(catalog: Catalog, lang: str) -> None:
    """The "calibration sweep" preset: the cells of `capacity calibrate --plan` for the model
    to predict with on the chosen GPU, each prompt length with its own levels (`PLAN`; runs
    before the widgets)."""
    from capacity.bench.client import BURST_FACTOR  # the bench's rule (its import: on click)

    g = st.session_state
    try:
        plan = measurement_plan(make_scenario(str(g["m_predict"]), str(g["m_gpu"]),
                                              catalog=catalog))
    except CapacityError as exc:
        g[PRESET_INFO] = t("m_error", lang, msg=error_text(exc, lang))
        g.pop(PLAN, None)
        return
    if not plan.cells:
        g[PRESET_INFO] = t("m_preset_plan_empty", lang, model=plan.model, gpu=plan.gpu)
        g.pop(PLAN, None)
        return
    sweeps = tuple((p * CHARS_PER_TOKEN, levels) for p, levels in plan.sweeps())
    levels = sorted({c.concurrency for c in plan.cells})
    preset = PlanSweeps(sweeps=sweeps, prompts_text=",".join(str(c) for c, _ in sweeps),
                        levels_text=",".join(map(str, levels)))
    g["m_prompts"], g["m_levels"] = preset.prompts_text, preset.levels_text
    g["m_max_tokens"] = OUTPUT_TOKENS
    g["m_passes"] = CALIBRATION_PASSES
    g["m_label"] = "calibration"
    g["m_workload"] = ""  # the plan's lengths, not a workload's draws
    g[PLAN] = preset
    top = max(levels, default=1)
    g[PRESET_INFO] = t("m_preset_plan_done", lang, model=plan.model, gpu=plan.gpu,
                       n=preset.cells, runs=len(sweeps), tokens=OUTPUT_TOKENS,
                       passes=CALIBRATION_PASSES, top=top, need=f"{BURST_FACTOR * top:,}")


def draw_plan_sweeps(lang: str) -> None:
    """Under the preset's caption: its sweeps as a table while they apply, else (the fields
    edited by hand) that the job runs the plain product."""
    p = st.session_state.get(PLAN)
    if not isinstance(p, PlanSweeps):
        return
    if plan_sweeps() is not None:
        st.table(p.table(lang))
        return
    try:
        n = sum(len(f.concurrency) for f in forms())  # the cells the job would run
    except CapacityError:
        n = 0
    st.caption(t("m_preset_plan_edited", lang, n=n, plan=p.cells))


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
    """The job: the calibration preset's sweeps while they apply (`plan_sweeps`: each prompt
    length with its own levels, `per_sweep`), else one `capacity bench` run per prompt length
    with every level (`per_prompt`)."""
    g = st.session_state
    base = MeasureForm(
        base_url=str(g["m_base_url"]).strip(), model=str(g["m_model"]).strip() or None,
        concurrency=parse_levels(str(g["m_levels"])), requests=int(g["m_requests"]),
        passes=int(g["m_passes"]),
        max_tokens=int(g["m_max_tokens"]), request_rate=float(g["m_rate"]) or None,
        label=str(g["m_label"]).strip(), slo_ttft_ms=float(g["m_slo_ttft"]) or None,
        slo_tpot_ms=float(g["m_slo_tpot"]) or None, gpu=str(g["m_gpu"]), gpus=int(g["m_gpus"]),
        gpu_price=float(g["m_price"]), currency=str(g["m_currency"]),
        predict_model=str(g["m_predict"]), out_dir=str(ms.bench_root()),
        workload=str(g["m_workload"]) or None)
    if (preset := plan_sweeps()) is not None:
        return per_sweep(base, preset.sweeps)
    # a workload draws each prompt's length: one run, not one per prompt length
    return per_prompt(base, parse_prompt_chars(str(g["m_prompts"]))[:1 if g["m_workload"]
                                                                   else None])
