"""`st.cache_data` wrappers around the library: the only caching in the app.

Every function takes the ExplorerState (a frozen dataclass, hashed by value) and the catalog
version, so saving a custom entry (which bumps the version) invalidates the results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from capacity.catalog import custom as catalog_custom
from capacity.catalog.loader import Catalog, default_catalog
from capacity.fit.calibration import load_named as load_calibration
from capacity.fit.uncertainty import KnobFlag, Sensitivity, Widening, band, sensitivity
from capacity.model.prefix import PrefixEffect
from capacity.model.prefix import prefix_effect as model_prefix_effect
from capacity.plan.deployment import assess
from capacity.plan.queueing import (
    MAX_LOAD_REQUESTS,
    LoadPoint,
    closed_loop_load,
    open_loop_load,
)
from capacity.plan.search import Option, PlanInputs
from capacity.report.charts import ChartData, chart_data, compare_specs, specs
from capacity.report.explain import Explanation, MathStep, Targets, explain, show_math, table_records
from capacity.report.urlstate import ExplorerState

VERSION_KEY = "catalog_version"


def catalog() -> Catalog:
    """The catalog every page reads: `default_catalog`, the bundled entries plus the custom
    ones (raises CatalogError for a corrupt file)."""
    return default_catalog()


def catalog_version() -> int:
    """A counter bumped whenever a custom entry is saved."""
    return int(st.session_state.get(VERSION_KEY, 0))


def catalog_changed() -> None:
    """Call after saving a custom entry: re-read the catalog and drop cached results."""
    catalog_custom.clear_caches()
    st.cache_data.clear()
    st.session_state[VERSION_KEY] = catalog_version() + 1


def targets(state: ExplorerState) -> Targets:
    """The SLOs in the state."""
    return Targets(ttft_ms=state.slo_ttft_ms, tpot_ms=state.slo_tpot_ms,
                   cost_per_mtok=state.slo_cost)


@dataclass(frozen=True, kw_only=True)
class ExplorerResult:
    """Everything the Explorer page draws for one state."""

    explanation: Explanation
    math: tuple[MathStep, ...]
    specs: dict[str, dict[str, Any]]
    c_vram: int


@st.cache_data(max_entries=64, show_spinner=False)
def explorer_result(state: ExplorerState, labels: dict[str, str], version: int
                    ) -> ExplorerResult:
    """Verdicts, the math and every chart spec for `state` (labels in the page's language)."""
    del version  # part of the cache key only
    s = state.scenario(catalog())
    ex = explain(s, state.concurrency, targets(state), catalog())
    d = chart_data(s, state.concurrency, slo_ttft_ms=state.slo_ttft_ms, slo_tpot_ms=state.slo_tpot_ms,
                   slo_cost=state.slo_cost)
    return ExplorerResult(explanation=ex, math=show_math(s, state.concurrency), specs=specs(d, labels),
                          c_vram=d.c_vram)


@dataclass(frozen=True, kw_only=True)
class Uncertainty:
    """The band around the prediction at the chosen concurrency, and what moves it most."""

    step_ms: tuple[float, float, float]
    ttft_s: tuple[float, float, float]
    max_concurrency_vram: tuple[int, int, int]
    calibrated: bool
    step_sensitivity: tuple[Sensitivity, ...]
    ttft_sensitivity: tuple[Sensitivity, ...]
    widenings: tuple[Widening, ...] = ()
    flags: tuple[KnobFlag, ...] = ()


@st.cache_data(max_entries=64, show_spinner=False)
def prefix_effect(state: ExplorerState, version: int) -> PrefixEffect:
    """`capacity.model.prefix.prefix_effect` for the Explorer's shared prefix."""
    del version
    return model_prefix_effect(state.scenario(catalog()), state.prefix, state.prefix_share)


@st.cache_data(max_entries=64, show_spinner=False)
def uncertainty(state: ExplorerState, version: int) -> Uncertainty:
    """`capacity.fit.uncertainty.band` and `sensitivity` for the Explorer's state."""
    del version
    s = state.scenario(catalog())
    cal = load_calibration(s.calibration) if s.calibration else None  # a calibration basis
    b = band(s, [state.concurrency], cal)
    return Uncertainty(
        step_ms=(float(b.step_ms[0][0]), float(b.step_ms[1][0]), float(b.step_ms[2][0])),
        ttft_s=b.ttft_s, max_concurrency_vram=b.max_concurrency_vram,
        calibrated=cal is not None,
        step_sensitivity=tuple(sensitivity(s, state.concurrency, "step_ms")[:5]),
        ttft_sensitivity=tuple(sensitivity(s, state.concurrency, "ttft_s")[:5]),
        widenings=b.widenings, flags=b.flags,
    )


@st.cache_data(max_entries=64, show_spinner=False)
def capacity_rows(state: ExplorerState, rows: tuple[tuple[int, int], ...], version: int
                  ) -> pd.DataFrame:
    """The capacity table for the edited scenario rows."""
    del version
    s = state.scenario(catalog())
    return pd.DataFrame(table_records(s, list(rows), targets(state)))


def _chart_data(state: ExplorerState) -> ChartData:
    s = state.scenario(catalog())
    return chart_data(s, state.concurrency, slo_ttft_ms=state.slo_ttft_ms,
                      slo_tpot_ms=state.slo_tpot_ms, slo_cost=state.slo_cost)


@st.cache_data(max_entries=32, show_spinner=False)
def compare_charts(current: ExplorerState, pinned: ExplorerState, labels: dict[str, str],
                   version: int) -> dict[str, dict[str, Any]]:
    """Compare: the current and the pinned what-if's curves overlaid (`compare_specs`)."""
    del version
    return compare_specs(_chart_data(current), _chart_data(pinned), labels)


@dataclass(frozen=True, kw_only=True)
class DeploymentView:
    """The Explorer's what-if as the deployment it is (`capacity.plan.deployment`): the
    planner's inputs and its figures for exactly this configuration."""

    inputs: PlanInputs
    option: Option


@st.cache_data(max_entries=64, show_spinner=False)
def deployment_view(state: ExplorerState, version: int) -> DeploymentView:
    """`deployment.assess` of the Explorer's state: the Planner's own figures for it."""
    del version
    d = state.deployment(catalog())
    return DeploymentView(inputs=d.inputs, option=assess(d, catalog()))


@dataclass(frozen=True, kw_only=True)
class LoadView:
    """The Explorer's load view: the engine's replica and the percentiles at the what-if's
    load: the design rate (`state.load`, an open loop) when set, else `state.c` clients."""

    engine: str
    slots: int
    prompt_tokens: int
    output_tokens: int
    point: LoadPoint | None
    """None when the users per replica exceed what the view simulates."""
    rate_per_s: float = 0.0
    """The open loop's rate (0: a closed loop of `state.c`)."""


OPEN_LOOP_REQUESTS = 2000
"""Requests the open-loop view simulates (at most; at least a minute of arrivals)."""


@st.cache_data(max_entries=64, show_spinner=False)
def load_view(state: ExplorerState, version: int) -> LoadView:
    """`capacity.plan.queueing.closed_loop_load` at the Explorer's concurrency, or
    `open_loop_load` at its design rate (Poisson arrivals, as `capacity plan --rate`), under
    its engine, each request `state.out` output tokens."""
    del version
    s = state.scenario(catalog())
    prompt = state.prompt_tokens
    out = state.out
    if state.load > 0:
        seconds = min(max(60.0, 400.0 / state.load), OPEN_LOOP_REQUESTS / state.load)
        svc, opts = open_loop_load(s, engine=state.engine, output_tokens=out,
                                   stages=[[(state.load, seconds)]])
        p = opts[0]
        return LoadView(engine=svc.engine, slots=svc.slots, prompt_tokens=prompt,
                        output_tokens=out, rate_per_s=state.load,
                        point=LoadPoint(concurrency=state.c, ttft_ms=p.ttft_ms,
                                        tpot_ms=p.tpot_ms))
    per_replica = -(-state.concurrency // s.replicas)
    svc, points = closed_loop_load(
        s, engine=state.engine, output_tokens=out,
        concurrency=[state.concurrency] if per_replica <= MAX_LOAD_REQUESTS else [])
    return LoadView(engine=svc.engine, slots=svc.slots, prompt_tokens=prompt, output_tokens=out,
                    point=points[0] if points else None)
