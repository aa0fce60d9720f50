"""The Results page's state: which measured points it shows and fits, and the choices it keeps
across reruns (the runs picked, the model and GPU to predict with, the calibration and its name).

The stored runs are read through `app.measure_state` (cached, keyed by the run files' times);
the points come from `capacity.fit.overlay`. `pages/results.py` draws the widgets and shows what
these return.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from app import measure_state as ms
from capacity.access import AccessDenied, User, may_see_run, may_share_run, run_access
from capacity.bench.engine_info import check_real_time, engine_profile_of
from capacity.bench.storage import run_warnings as bench_run_warnings
from capacity.bench.storage import set_shared
from capacity.catalog.engines import DEFAULT_ENGINE, engine_names
from capacity.errors import InputError
from capacity.fit import calibration as calib
from capacity.fit import calibration_store as cal_store
from capacity.fit.measured import MeasuredPoint
from capacity.fit.overlay import measured_frame, points_from_summary
from capacity.fit.reference import ReferenceSweep
from capacity.model.scenario import DEFAULT_GPU, DEFAULT_MODEL

PICK = "r_pick"
"""The runs chosen (their ids, the multiselect's key)."""
FITTED_CHOICE = "__fitted__"
"""The calibration choice that names the calibration just fitted (not saved yet)."""
CAL_PENDING = "r_cal_pending"
"""A calibration choice to select on the next run (set before a rerun: the selectbox is drawn)."""
FITTED_SAVED = "r_fitted_saved"
"""The name the calibration just fitted was last saved under (none: not saved since the fit)."""


@dataclass
class Measured:
    """The measured points the page overlays and fits, and where they come from."""

    points: list[MeasuredPoint] = field(default_factory=list)
    series: str = ""
    """Their name in the charts."""
    inputs_desc: str = ""
    """Their source, as a calibration records it."""
    cal_default: str = "calibration"
    """The name a calibration fitted on them gets by default."""
    model: str = DEFAULT_MODEL
    gpu: str = DEFAULT_GPU
    """The model and GPU to predict them with, unless the user picks others."""
    failures: pd.DataFrame | None = None
    """The first run's levels, failed requests included."""
    compare: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    """Every chosen run's levels, by its name in the charts."""
    fit_points: list[MeasuredPoint] | None = None
    """What Fit uses: every chosen run's points (None: `points`)."""
    fit_desc: str = ""
    find_max: dict[str, object] | None = None
    """A find-max run's answer (its meta.json)."""
    fit_batch1: bool = False
    """The run's engine decodes one sequence through other kernels (llama.cpp)."""
    run_warnings: list[str] = field(default_factory=list)
    """The first run's warnings (client-bound levels, prefix-cache hits, one-burst levels...)."""
    engine: str = DEFAULT_ENGINE
    """The scheduling profile its levels are predicted under load with: the run's engine
    (`engine_info.engine_profile_of`: vLLM, SGLang, llama.cpp, the simulator's own profile),
    else the chapter's (an import, or an engine the run did not name)."""
    no_levels: bool = False
    """The first run measured no level."""
    levels_left_out: int = 0
    """Summary rows of the chosen runs without a concurrency, left out (`ms.level_rows`)."""
    fit_refused: str = ""
    """Why Fit may not fit these points ('' : it may): a chosen run measured a sped-up
    simulator (`check_fittable`)."""


def run_engine(meta: Mapping[str, Any]) -> str:
    """The profile a run's levels are predicted with (`engine_profile_of`), where
    data/engines.toml has it; the chapter's else."""
    profile = engine_profile_of(meta)
    return profile if profile in engine_names() else DEFAULT_ENGINE


def date_range(days: object) -> tuple[str | None, str | None]:
    """The date filter's value as an inclusive ISO range (None: no bound)."""
    if isinstance(days, tuple | list) and len(days) >= 1:
        return days[0].isoformat(), (days[1] if len(days) > 1 else days[0]).isoformat()
    if isinstance(days, dt.date):
        return days.isoformat(), days.isoformat()
    return None, None


def run_names(shown: pd.DataFrame) -> dict[str, str]:
    """Each run's name: 'label · 11-30 01:03:20', short enough for a chart legend at 1000 px;
    where two runs of one label started in the same second, 'label · run id' (unique: the
    run's folder). The names must differ: Streamlit's pickers (1.67) hold a choice by its
    shown text, so of two runs shown alike only the first could ever be picked (two users who
    started measuring in the same second each saw one run where two were theirs to see)."""
    short = {r.run_id: f"{r.label} · {str(r.started_at)[5:19].replace('T', ' ')}"
             for r in shown.itertuples()}
    count = Counter(short.values())
    return {r.run_id: short[r.run_id] if count[short[r.run_id]] == 1 else
            f"{r.label} · {r.run_id}" for r in shown.itertuples()}


def keep_picks(ids: list[str]) -> None:
    """Before the run picker is drawn: keep the chosen runs still listed; the newest run on a
    first visit, or when a filter hid every chosen run. A choice the user emptied stays empty
    (none is a valid state: nothing is shown or fitted)."""
    before = st.session_state.get(PICK)
    kept = [i for i in before or [] if i in ids]
    st.session_state[PICK] = kept or (ids[:1] if before is None or before else [])


def check_visible(user: User, shown: pd.DataFrame, chosen: Sequence[str]) -> None:
    """The check at the action, whatever the picker held: AccessDenied unless every chosen run
    is listed and its meta.json, read again now, lets `user` see it (`may_see_run`)."""
    listed = dict(zip(shown["run_id"], shown["dir"], strict=True))
    for run_id in chosen:
        if run_id not in listed or not may_see_run(
                user, run_access(ms.run_meta(str(listed[run_id])))):
            raise AccessDenied(f"run {str(run_id)[:80]} is another user's and not shared")


def from_runs(shown: pd.DataFrame, chosen: Sequence[str], names: dict[str, str],
              variants: Sequence[str], gpus: Sequence[str], user: User) -> Measured:
    """The chosen stored runs' points: the first run's are shown, every run's are fitted and
    compared; the model and GPU to predict with are the first run's (when the catalog has
    them). AccessDenied for a run `user` may not see (`check_visible`)."""
    check_visible(user, shown, chosen)
    row = shown[shown["run_id"] == chosen[0]].iloc[0]
    meta = ms.run_meta(str(row["dir"]))
    args = meta.get("args") or {}
    pm = args.get("predict_model") or row["model"]
    model = pm if pm in variants else DEFAULT_MODEL
    gpu = args.get("gpu") if args.get("gpu") in gpus else DEFAULT_GPU
    rows = {i: ms.level_rows(i) for i in dict.fromkeys(chosen)}
    summ = rows[chosen[0]][0]
    picked = shown.set_index("run_id").loc[list(chosen)]
    # in charts a run is its label, with its start time only where two chosen runs share a
    # label (a legend of long names was cut at the chart's edge)
    shared = {lb for lb in picked["label"] if list(picked["label"]).count(lb) > 1}
    short = {i: names[i] if lb in shared else str(lb)
             for i, lb in zip(chosen, picked["label"], strict=True)}
    points = points_from_summary(summ, model=model, gpu=gpu, source=chosen[0])
    return Measured(
        points=points, series=short[chosen[0]],
        inputs_desc="bench run " + ", ".join(
            f"{lb}/{i}" for i, lb in zip(chosen, picked["label"], strict=True)),
        # the name follows the choice: its labels, each once, in the order chosen
        cal_default="_".join(dict.fromkeys(str(lb) for lb in picked["label"]))[:80],
        model=model, gpu=gpu, failures=summ,
        compare=[(short[i], rows[i][0]) for i in chosen],
        fit_points=[*points, *[p for i in chosen[1:] for p in points_from_summary(
            rows[i][0], model=model, gpu=gpu, source=i)]],
        fit_desc="; ".join(names.get(i, i) for i in chosen),
        find_max=meta.get("find_max") if isinstance(meta.get("find_max"), dict) else None,
        fit_batch1=calib.batch1_for_run(meta), run_warnings=bench_run_warnings(meta),
        engine=run_engine(meta),
        no_levels=summ.empty, levels_left_out=sum(n for _, n in rows.values()),
        fit_refused=_not_real_time(shown, chosen))


def _not_real_time(shown: pd.DataFrame, chosen: Sequence[str]) -> str:
    """Why the chosen runs may not be fitted ('' : they may): the first that measured a
    simulator at a speed-up other than 1 (`engine_info.check_real_time`, what `capacity
    calibrate --label` refuses; its times are that many times shorter than the GPU's)."""
    dirs = dict(zip(shown["run_id"], shown["dir"], strict=True))
    labels = dict(zip(shown["run_id"], shown["label"], strict=True))
    for run_id in chosen:
        try:
            check_real_time(ms.run_meta(str(dirs[run_id])),
                            f"bench run '{labels[run_id]}' ({run_id})")
        except InputError as exc:
            return str(exc)
    return ""


def check_fittable(m: Measured) -> None:
    """InputError where Fit may not fit `m`'s points (`Measured.fit_refused`)."""
    if m.fit_refused:
        raise InputError(m.fit_refused)


def from_upload(name: str, points: list[MeasuredPoint]) -> Measured:
    """An imported file's points, named after the file."""
    return Measured(points=points, series=name, inputs_desc=f"import {name}",
                    cal_default="".join(c if c.isalnum() or c in "-_." else "-"
                                        for c in Path(name).stem) or "import")


def from_reference(sweep: ReferenceSweep, series: str) -> Measured:
    """A published sweep's points, when nothing measured is chosen."""
    return Measured(points=list(sweep.points), series=series,
                    inputs_desc="data/reference/published.csv", cal_default="published")


def reset_for_source(series: str, model: str, gpu: str) -> None:
    """A new source of points brings its own model and GPU to predict with."""
    if st.session_state.get("r_model_for") != series:
        st.session_state["r_model_for"] = series
        st.session_state["r_model"] = model
        st.session_state["r_gpu"] = gpu


def calibration_options(fitted: calib.Calibration | None) -> list[str]:
    """The calibrations to predict with: none, every saved one, and the one just fitted until
    it is saved (then its saved entry stands for it, `save_fitted`); a choice made before the
    last rerun (`CAL_PENDING`) is selected."""
    options = ["", *ms.saved_calibrations()]
    saved = st.session_state.get(FITTED_SAVED)
    if fitted is not None and not (saved == fitted.name and saved in options):
        options.append(FITTED_CHOICE)
    if (pending := st.session_state.pop(CAL_PENDING, None)) in options:
        st.session_state["r_calibration"] = pending
    return options


def chosen_calibration(choice: str, fitted: calib.Calibration | None) -> calib.Calibration | None:
    """The calibration chosen: the one just fitted, a saved one by name (CapacityError when it
    cannot be read), or none."""
    if choice == FITTED_CHOICE:
        return fitted
    return cal_store.load_named(choice) if choice else None


def reset_calibration_name(default: str) -> None:
    """A new choice of points names its calibration anew."""
    if st.session_state.get("r_cal_name_for") != default:
        st.session_state["r_cal_name_for"] = default
        st.session_state["r_cal_name"] = default


SAVED_TO = "r_saved_to"
"""Where the last Save wrote, shown once after the rerun that follows it."""
SAVE_PENDING = "r_save_pending"
"""The name a Save asked for while a file of that name exists: waits for Overwrite or Cancel."""


def save_fitted(fitted: calib.Calibration, name: str, folder: Path, *,
                overwrite: bool = False) -> Path | None:
    """Save the fitted calibration under `name` (the name field as it reads now, not the one
    it was fitted under: a renamed calibration saves under its new name). When `folder`
    already holds NAME.toml and `overwrite` is not given, nothing is written: the name waits
    in `SAVE_PENDING` for the page to ask, and None is returned; so too where a bundled
    calibration has that name (saved, this one would hide it). CapacityError for a name
    that is not a name (`check_name`). Once saved, the saved entry replaces the unsaved one in
    the calibration choice (`calibration_options`), selected where that one was."""
    path = cal_store.named_path(name, folder, for_writing=True)
    # a bundled calibration of that name counts too: saving hides it for everyone (the
    # workspace's folder is read first), so the page asks as it does for its own files
    if (path.exists() or cal_store.named_path(name).is_file()) and not overwrite:
        st.session_state[SAVE_PENDING] = name
        return None
    st.session_state.pop(SAVE_PENDING, None)
    renamed = fitted if fitted.name == name else dataclasses.replace(fitted, name=name)
    st.session_state[ms.FITTED] = renamed
    path = cal_store.save_named(renamed, name, folder)
    st.session_state[FITTED_SAVED] = name
    if st.session_state.get("r_calibration") in (FITTED_CHOICE, None):
        st.session_state[CAL_PENDING] = name
    return path


def keep_fitted(cal: calib.Calibration) -> None:
    """A calibration was fitted: keep it, and choose it to predict with after the rerun."""
    st.session_state[ms.FITTED] = cal
    st.session_state.pop(FITTED_SAVED, None)
    st.session_state[CAL_PENDING] = FITTED_CHOICE


def extra_series(published: Sequence[tuple[str, Sequence[MeasuredPoint]]],
                 compare: Sequence[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """The other measured series on the charts (`measured_frame`, long form): the published
    sweeps chosen, by their names, and every chosen run after the first."""
    extra = pd.concat([measured_frame(points, name) for name, points in published]
                      or [pd.DataFrame()], ignore_index=True)
    if len(compare) > 1:
        extra = pd.concat([extra, *[measured_frame(points_from_summary(df), name)
                                    for name, df in compare[1:]]], ignore_index=True)
    return extra


SHARE_SEEN = "r_share_seen_"
"""Per run (`SHARE_SEEN` + run id): its `shared` as the page last drew it, so that a change
made elsewhere (another tab, an admin) resets the switch."""


def share_switch_value(run_id: str, shared: bool) -> str:
    """Before a run's share switch is drawn: its session key, set to the run's `shared` on a
    first draw or when meta.json changed since the last."""
    key = f"r_share_{run_id}"
    if st.session_state.get(SHARE_SEEN + run_id) != shared:
        st.session_state[SHARE_SEEN + run_id] = shared
        st.session_state[key] = shared
    return key


def share_run(user: User, run_dir: str, shared: bool) -> None:
    """Switch a run's `shared` in its meta.json (atomically), after checking again, on the file
    as it is now, that `user` may (`may_share_run`: its owner while an editor, or an admin);
    AccessDenied otherwise, and nothing is written."""
    if not may_share_run(user, run_access(ms.run_meta(run_dir))):
        raise AccessDenied("only the run's owner or an admin may share it")
    set_shared(run_dir, shared)
