"""App-layer state and caching for the Measure and Results pages.

The background bench job and the simulated endpoint live in `st.session_state` (a process
handle per browser session); the stored runs are read through `capacity.bench.store` with
`st.cache_data`, keyed by the run files' stamp (`app.cache.files_stamp`) so a finished run shows
at once; the overlay views are also keyed by the catalog's (`app.cache.cached`).
The folders are the workspace's (`capacity.workspace`, docs/configuration.md): runs under
CAPACITY_BENCH_DIR (default `<workspace>/bench`, which starts with the bundled sample run),
calibrations under CAPACITY_CALIBRATIONS_DIR (default `<workspace>/calibrations`) besides the
bundled ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

import capacity
from app import auth, cache
from capacity import workspace
from capacity.access import RunAccess, User, may_see_run, run_access
from capacity.bench.form import MeasureForm
from capacity.bench.guard import Guard, check_not_foreign
from capacity.bench.job import (
    MAX_JOBS_PER_USER,
    MAX_SIMULATORS_PER_USER,
    BenchJob,
    JobRegistry,
    SimRegistry,
    SimServer,
)
from capacity.bench.storage import read_run_meta
from capacity.bench.store import RunStore
from capacity.catalog.engines import DEFAULT_ENGINE
from capacity.fit import calibration as calib
from capacity.fit import calibration_store
from capacity.fit.findmax import FindMaxOverlay, find_max_overlay
from capacity.fit.measured import MeasuredPoint, run_scenario
from capacity.fit.overlay import (
    METRICS,
    Overlay,
    build_overlay,
    complete_levels,
    typical_lengths,
)
from capacity.fit.reference import ReferenceSweep, load_reference
from capacity.fit.validate_predict import spec_sheet
from capacity.report.overlay_charts import find_max_chart, overlay_chart, ratio_chart

JOB = "measure_job"
SIM = "measure_sim"
CONNECT = "measure_connect"
FITTED = "results_fitted_calibration"
SIMS = SimRegistry()
"""The simulated endpoints this app started, each with the user who started it, shared by every
browser session of the process: a tab opened after another closed reattaches to a running one
of its user's instead of starting a second (with sign-in, a user sees only their own: an admin
every one, `capacity.access.User.scope`)."""
JOBS = JobRegistry()
"""The measurements this app runs, each with its user: bounded (`capacity.bench.job.MAX_JOBS`),
and listed, running and recently ended, with their progress to every tab of their user (a
reloaded or new one too) and to an admin, to be followed and stopped (`app.measure_jobs`)."""
REPO_ROOT = Path(capacity.__file__).resolve().parent.parent
"""The working folder of the background runs: where `python -m capacity` imports this package."""


def bench_root() -> Path:
    """The workspace's bench folder (with the sample run on first use)."""
    return workspace.prepare_bench_dir()


def calibrations_dir() -> Path:
    """Where the Results page saves calibrations (the workspace's folder)."""
    return workspace.calibrations_dir()


def job() -> BenchJob | None:
    j = st.session_state.get(JOB)
    return j if isinstance(j, BenchJob) else None


def per_user(user: User, limit: int) -> int | None:
    """A per-user limit for a signed-in user; None (the process' limit alone) for the local
    user, as before sign-in existed."""
    return limit if user.signed_in else None


def start_sim(user: User, model: str, gpu: str, speedup: float) -> SimServer:
    """The user's simulated endpoint of this configuration, started when they run none yet
    (bounded: `SimRegistry.find_or_start`)."""
    return SIMS.find_or_start(model, gpu, speedup, lambda: SimServer.start(
        model, gpu, speedup=speedup, cwd=REPO_ROOT), owner=user.id,
        per_owner=per_user(user, MAX_SIMULATORS_PER_USER))


def start_job(user: User, forms: Sequence[MeasureForm], api_key: str | None, guard: Guard
              ) -> BenchJob:
    """A measurement started as the user's (bounded: `JobRegistry.start`), its runs' meta.json
    naming them as the owner (`started_by`, '' without sign-in). The endpoint is checked here,
    at the start, against the registry as it is now: the guard (`check_url`, with the user's
    own simulators) and another user's simulator refused (`check_not_foreign`: AccessDenied),
    whatever the form showed."""
    sim_urls = [s.base_url for s in SIMS.running(user.scope)]
    foreign = SIMS.foreign_ports(user.scope)
    return JOBS.start(user.id, lambda: BenchJob.start(
        forms, api_key, cwd=REPO_ROOT, guard=guard, simulator_urls=sim_urls,
        started_by=user.id, foreign_ports=foreign), per_owner=per_user(user, MAX_JOBS_PER_USER))


def check_endpoint(user: User, base_url: str) -> None:
    """AccessDenied when `base_url` reaches a simulator another user started (Connect's check
    before it connects; `start_job` checks again at the start)."""
    check_not_foreign(base_url, SIMS.foreign_ports(user.scope))


def sim(owner: str = "") -> SimServer | None:
    """This session's simulated endpoint; on a session's first look, the one this app started
    most recently for `owner` (the user: an admin too reattaches only to their own) and still
    runs (reattached: the tab that started it may be gone)."""
    s = st.session_state.get(SIM)
    if isinstance(s, SimServer) and s.running:
        return s
    if "measure_sim_looked" not in st.session_state:
        st.session_state["measure_sim_looked"] = True
        found = SIMS.latest(owner)
        if found is not None:
            st.session_state[SIM] = found
            st.session_state["measure_sim_reattached"] = True
            return found
    return None


def _stamp(root: Path) -> str:
    """The stamp of every run file (`app.cache.files_stamp`): the cache key that changes when a
    run does."""
    if not root.is_dir():
        return ""
    return cache.files_stamp(p for p in root.glob("*/*/*")
                             if p.name in ("summary.csv", "meta.json", "requests.csv"))


ACCESS_COLUMNS = ("started_by", "shared", "access_malformed")
"""The columns `runs` adds from each run's meta.json (`capacity.access.run_access`)."""


@st.cache_data(max_entries=8, show_spinner=False)
def _runs(root: str, stamp: str) -> tuple[pd.DataFrame, tuple[str, ...]]:
    del stamp
    with RunStore(root) as s:
        listed, warns = s.list_runs(), tuple(s.warnings)
    found = [run_access(run_meta(str(d))) for d in listed["dir"]]
    return listed.assign(started_by=[a.started_by for a in found],
                         shared=[a.shared for a in found],
                         access_malformed=[a.malformed for a in found]), warns


def access_of(row: pd.Series) -> RunAccess:
    """A listed run's `RunAccess` (the columns `runs` added)."""
    return RunAccess(started_by=str(row["started_by"]), shared=bool(row["shared"]),
                     malformed=bool(row["access_malformed"]))


def runs(user: User | None = None) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """The stored runs `user` may see (`capacity.access.may_see_run`; default: this session's
    user, none when nobody has signed in), newest first, with their owner and `shared`
    (`ACCESS_COLUMNS`), and the store's warnings. Every page that lists runs reads them here."""
    who = auth.user() if user is None else user
    root = bench_root()
    listed, warns = _runs(str(root), _stamp(root))
    if who is None:
        return listed.iloc[0:0], warns
    keep = pd.Series([may_see_run(who, access_of(r)) for _, r in listed.iterrows()],
                     index=listed.index, dtype=bool)
    return listed.loc[keep].reset_index(drop=True), warns


@st.cache_data(max_entries=32, show_spinner=False)
def _summary(root: str, run_id: str, stamp: str) -> pd.DataFrame:
    del stamp
    with RunStore(root) as s:
        return s.summary(run_id)


def summary(run_id: str) -> pd.DataFrame:
    root = bench_root()
    return _summary(str(root), run_id, _stamp(root))


@st.cache_data(max_entries=32, show_spinner=False)
def _requests(root: str, run_id: str, stamp: str) -> pd.DataFrame:
    del stamp
    with RunStore(root) as s:
        return s.requests(run_id)


def levels(run_id: str) -> pd.DataFrame:
    """Per-level rows of a run: its summary, plus levels a stopped run measured in part
    (computed from its requests)."""
    return level_rows(run_id)[0]


def level_rows(run_id: str) -> tuple[pd.DataFrame, int]:
    """`levels`, and how many summary rows it left out for want of a concurrency (a whole
    number >= 1; a cell emptied or edited by hand, which the store reads as empty): such a row
    is no level (one drawn at 'NA' broke the page), and its level is computed from its
    requests instead, where the run has them."""
    root = bench_root()
    stamp = _stamp(root)
    summ = _summary(str(root), run_id, stamp)
    if "concurrency" in summ:
        c = pd.to_numeric(summ["concurrency"], errors="coerce")
        ok = (c.notna() & (c >= 1)).to_numpy(dtype=bool)
        summ, left_out = summ[ok].reset_index(drop=True), int((~ok).sum())
    else:
        left_out = 0
    return complete_levels(summ, _requests(str(root), run_id, stamp)), left_out


def run_meta(run_dir: str) -> dict[str, Any]:
    """A run's meta.json (empty when unreadable): `storage.read_run_meta`, bounded."""
    return read_run_meta(run_dir)


@st.cache_data(max_entries=1, show_spinner=False)
def reference_sweeps() -> list[ReferenceSweep]:
    """The published sweeps (no arguments: one entry)."""
    return load_reference()


def saved_calibrations() -> list[str]:
    """The workspace's and the bundled calibrations, by name."""
    return calibration_store.saved_calibrations()


@cache.cached(max_entries=16)
def overlay_view(version: str, points: tuple[MeasuredPoint, ...], model: str, gpu: str,
                 n_gpus: int, calibration: calib.Calibration | None,
                 failures: pd.DataFrame | None, extra: pd.DataFrame | None, series: str,
                 labels: dict[str, str], find_max_concurrency: float | None = None,
                 engine: str = DEFAULT_ENGINE
                 ) -> tuple[Overlay, dict[str, dict[str, Any]], dict[str, Any]]:
    """The overlay and its Vega-Lite specs (four metrics, the ratios), built once per input
    and catalog (`app.cache.cached`): Altair's validation costs about 40 ms a chart, too much
    for every rerun."""
    del version  # part of the key only
    prompt, output = typical_lengths(points)
    scenario = run_scenario(model, gpu, prompt_tokens=prompt, output_tokens=output,
                            n_gpus=n_gpus, catalog=cache.catalog())
    # the dashed "spec-sheet" curve is the spec sheet, every efficiency at its peak, as in the
    # page's accuracy table below it (capacity.model.basis): one spec sheet per page
    # under load with the run's engine's scheduling where the run says which it was
    ov = build_overlay(points, spec_sheet(scenario), series=series,
                       calibration=calibration, failures=failures, engine=engine)
    more = extra if extra is not None and not extra.empty else None
    specs = {m: overlay_chart(ov, m, labels, extra_measured=more,
                              find_max_concurrency=find_max_concurrency).to_dict()
             for m in METRICS}
    return ov, specs, ratio_chart(ov.ratios, labels).to_dict()


@cache.cached(max_entries=16)
def find_max_view(version: str, entry_json: str, model: str, gpu: str, n_gpus: int,
                  prompt_tokens: int, output_tokens: int, speedup: float, labels: dict[str, str]
                  ) -> tuple[FindMaxOverlay, dict[str, Any]]:
    """A find-max run's measured maximum beside the event model's for the same model, GPU and
    targets (`capacity.fit.findmax.find_max_overlay`), and its Vega-Lite spec; once per input
    and catalog (the prediction runs the event model a few dozen times)."""
    del version  # part of the key only
    scenario = run_scenario(model, gpu, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                            n_gpus=n_gpus, catalog=cache.catalog())
    ov = find_max_overlay(json.loads(entry_json), scenario, prompt_tokens=prompt_tokens,
                          output_tokens=output_tokens, speedup=speedup)
    return ov, find_max_chart(ov, labels).to_dict()
