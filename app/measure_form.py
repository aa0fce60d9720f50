"""The Measure page's form: its session-state keys (`m_*`) with their defaults, the presets that
fill them (a simulated endpoint, the calibration sweep), the connect check's words, and the form
read back as the job's `capacity bench` runs (`capacity.bench.form.MeasureForm`).

The job and the simulators themselves are `app.measure_state`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from app import measure_state as ms
from app.format import plain_error
from capacity.access import User
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
from capacity.report.i18n import MESSAGES, t

PRESET_INFO = "m_preset_info"
"""What the last preset filled in (a caption under its button)."""
PLAN = "m_plan_sweeps"
"""The calibration preset's sweeps (`PlanSweeps`): the job runs them while the prompt lengths
and levels are as the preset filled them in."""
SWITCH = "m_sim_switch"
"""The simulated endpoint the form is being pointed at (`SimSwitch`), until a run has drawn the
form with its values (`form_drawn`)."""
KEPT = "m_sim_kept"
"""The fields the user changed while the form was pointed at a simulator: (field key, what they
typed, the simulator's value), their text kept (`kept_note`)."""
SIM_FIELDS = ("m_base_url", "m_model", "m_gpu", "m_predict", "m_price", "m_currency", "m_label")
"""The form's fields a simulated endpoint fills in (`sim_values`)."""


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


@dataclass(frozen=True, kw_only=True)
class SimSwitch:
    """The form being pointed at a simulated endpoint: the running one with this `pid`, or the
    user's of this `config` (model, GPU, speed-up: found, else started), and the values each
    field may hold that the user did not type (`untyped`: the field when they asked).

    Why it is kept in the session until a run has drawn the form (`settle_sim`, `form_drawn`):
    every read and write of the session state is a point where Streamlit stops a run for the
    browser's next request, and that request carries each field as the browser last drew it.
    A field typed while the simulator started began a new run at once (Streamlit's fast
    reruns) while the old one was still starting it: the simulator ran but the session lost
    it, the form at port 8000 and the label 'measure' (CI, 2026-12-07), or the values of a
    rerun stopped before it drew the form were replaced by the browser's, or the label typed
    meanwhile was overwritten by the simulator's."""

    pid: int | None = None
    config: tuple[str, str, float] | None = None
    untyped: tuple[tuple[str, tuple[object, ...]], ...]


def ask_sim(*, pid: int | None = None, config: tuple[str, str, float] | None = None) -> None:
    """Point the form at a simulator (`SimSwitch`, one write; `settle_sim` applies it). A switch
    not yet drawn passes on what it had as untyped: the browser may still show that."""
    g = st.session_state
    prev = g.get(SWITCH)
    before = dict(prev.untyped) if isinstance(prev, SimSwitch) else {}
    untyped = tuple((k, (*before.get(k, ()), g.get(k))) for k in SIM_FIELDS)
    g[SWITCH] = SimSwitch(pid=pid, config=config, untyped=untyped)


def sim_values(s: SimServer, catalog: Catalog) -> dict[str, object]:
    """The form's fields for a simulated endpoint: its URL, model, GPU, price and a label."""
    g = catalog.gpu(s.gpu)
    return {"m_base_url": s.base_url, "m_model": s.model, "m_gpu": s.gpu,
            "m_predict": s.model, "m_price": g.price_per_hour, "m_currency": g.currency,
            "m_label": f"sim-{s.gpu}"}


def merge_sim_values(current: Mapping[str, object], values: Mapping[str, object],
                     untyped: Mapping[str, tuple[object, ...]]
                     ) -> tuple[dict[str, object], tuple[tuple[str, object, object], ...]]:
    """The simulator's `values` over the form's `current` ones: (the fields to set, the ones
    the user typed meanwhile: (key, typed, the simulator's), kept). A field is set while it
    still holds a value the user did not type (`untyped`)."""
    updates: dict[str, object] = {}
    kept: list[tuple[str, object, object]] = []
    for k, v in values.items():
        cur = current.get(k)
        if cur == v:
            continue
        if cur in untyped.get(k, ()):
            updates[k] = v
        else:
            kept.append((k, cur, v))
    return updates, tuple(kept)


def settle_sim(catalog: Catalog, user: User) -> None:
    """Apply the switch to a simulator (`SimSwitch`), at the top of every run until one has
    drawn the form: the simulator (one of `config` found or started: a run stopped while it
    started it leaves it to this one, the registry's start lock between them) is the
    session's, and its values go in the fields the user has not typed into since; what they
    typed is kept and said (`KEPT`). CapacityError when it cannot start (the switch dropped);
    one no longer running: the switch is dropped."""
    g = st.session_state
    sw = g.get(SWITCH)
    if not isinstance(sw, SimSwitch):
        return
    try:
        s = (ms.start_sim(user, *sw.config) if sw.config is not None else
             next((x for x in ms.SIMS.running(user.scope) if x.proc.pid == sw.pid), None))
    except CapacityError:
        g.pop(SWITCH, None)
        raise
    if s is None:
        g.pop(SWITCH, None)
        return
    g[ms.SIM] = s
    updates, kept = merge_sim_values({k: g.get(k) for k in SIM_FIELDS}, sim_values(s, catalog),
                                     dict(sw.untyped))
    for k, v in updates.items():
        g[k] = v
    g[KEPT] = kept
    if "m_base_url" in updates:
        g.pop(ms.CONNECT, None)


def use_sim(s: SimServer, catalog: Catalog, user: User, *, rerun: bool = False) -> None:
    """Point the form at a running simulated endpoint (its URL, model, GPU, price and a label:
    `SimSwitch`); `rerun`: then rerun the page."""
    ask_sim(pid=s.proc.pid)
    settle_sim(catalog, user)
    if rerun:
        st.rerun()


def form_drawn() -> None:
    """The form's fields are drawn with the switch's values: it is done (`SimSwitch`)."""
    st.session_state.pop(SWITCH, None)


def forget_sim() -> None:
    """The session's simulator stopped: no switch to it, nothing kept to say."""
    for k in (ms.SIM, SWITCH, KEPT):
        st.session_state.pop(k, None)


def kept_note(lang: str) -> str | None:
    """What the user typed while the form was pointed at the simulator, kept, while the field
    still holds it (None: nothing)."""
    g = st.session_state
    kept = [(k, typed, sim) for k, typed, sim in g.get(KEPT) or () if g.get(k) == typed]
    if not kept:
        return None
    fields = "; ".join(t("m_sim_kept_field", lang, field=t(k, lang), typed=typed, sim=sim)
                       for k, typed, sim in kept)
    return t("m_sim_kept", lang, fields=fields)


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
        g[PRESET_INFO] = t("m_error", lang, msg=plain_error(exc, lang))
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
