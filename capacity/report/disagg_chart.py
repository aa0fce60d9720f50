"""The chart of the Explorer's two pools (docs/disaggregation.md, "In the Explorer"): TTFT and
TPOT at the SLO quantile against the request rate for one prefill/decode layout, each target as
a dashed rule, the rate where each pool and the link saturate as a vertical rule, the chosen
rate marked, and the two-pool event model's points on top. Altair, as `capacity.report.charts`;
labels in the page's language (the `pd_*` messages). Pure: no Streamlit here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, cast

import altair as alt
import numpy as np
import pandas as pd

from capacity.catalog.loader import Catalog
from capacity.plan.disagg_pools import (
    EventPoint,
    PoolFigures,
    PoolLayout,
    PoolsCurve,
    Saturation,
    closed_loop_rate_per_s,
    curve_rates,
    event_points,
    layout,
    matched_counts,
    pool_shapes,
    pools_at,
    pools_curve,
    saturation,
    with_counts,
)
from capacity.report.i18n import t
from capacity.report.urlstate import ExplorerState

CURVE_COLUMNS: Final = ("rate_per_s", "ttft_ms", "tpot_ms", "prefill_utilization",
                        "decode_utilization", "link_utilization")
"""`curve_frame`'s columns: req/s, ms at the SLO quantile, utilisations (shares)."""
SATURATION_COLUMNS: Final = ("part", "label", "rate_per_s")
"""`saturation_frame`'s columns: 'prefill' / 'decode' / 'link', its label, req/s."""
PARTS: Final = ("prefill", "decode", "link")
PART_COLORS: Final = ("#1f77b4", "#2ca02c", "#ff7f0e")


def curve_frame(curve: PoolsCurve) -> pd.DataFrame:
    """The curve as rows (CURVE_COLUMNS), a saturated rate's infinite time left empty (NaN:
    the line stops there)."""
    df = pd.DataFrame({c: np.asarray(getattr(curve, c), dtype=np.float64)
                       for c in CURVE_COLUMNS})
    return df.replace([np.inf, -np.inf], np.nan)


def saturation_frame(sat: Saturation, lang: str = "en", *, up_to: float = math.inf
                     ) -> pd.DataFrame:
    """One row per part (SATURATION_COLUMNS) whose saturation rate is finite and at most
    `up_to` req/s (the chart's end)."""
    rates = (sat.prefill_per_s, sat.decode_per_s, sat.link_per_s)
    rows = [(p, t(f"pd_sat_{p}", lang, rate=f"{r:,.3g}"), r)
            for p, r in zip(PARTS, rates, strict=True) if math.isfinite(r) and r <= up_to]
    return pd.DataFrame(rows, columns=list(SATURATION_COLUMNS))


def event_frame(points: Sequence[EventPoint]) -> pd.DataFrame:
    """The event model's points: rate_per_s, ttft_ms, tpot_ms, percentile (0.5, 0.9, 0.99)."""
    return pd.DataFrame([(p.rate_per_s, p.ttft_ms, p.tpot_ms, p.percentile) for p in points],
                        columns=["rate_per_s", "ttft_ms", "tpot_ms", "percentile"])


def _panel(df: pd.DataFrame, field: str, title: str, slo_ms: float, at_ms: float,
           sat: pd.DataFrame, rate_per_s: float, events: pd.DataFrame, lab: dict[str, str],
           top: float, width: int, height: int) -> alt.LayerChart:
    """One panel: the curve of `field`, its target, the saturation rules, the chosen rate, the
    event model's points."""
    # the target twice over, and room for this rate's figure and the curve's lowest point
    lowest = df[field].min()
    y_top = max([2.0 * slo_ms, *(1.2 * v for v in (at_ms,) if math.isfinite(v)),
                 *([2.0 * float(lowest)] if pd.notna(lowest) else [])])
    x = alt.X("rate_per_s:Q", title=lab["rate"], scale=alt.Scale(domain=[0, top], nice=False))
    y = alt.Y(f"{field}:Q", title=title, scale=alt.Scale(domain=[0, y_top], nice=False))
    layers: list[Any] = [
        alt.Chart(df).mark_line(color="#444", strokeWidth=2, clip=True).encode(
            x=x, y=y, tooltip=[alt.Tooltip("rate_per_s:Q", title=lab["rate"], format=",.3g"),
                               alt.Tooltip(f"{field}:Q", title=title, format=",.1f"),
                               alt.Tooltip("prefill_utilization:Q", title=lab["rho_p"],
                                           format=".0%"),
                               alt.Tooltip("decode_utilization:Q", title=lab["rho_d"],
                                           format=".0%"),
                               alt.Tooltip("link_utilization:Q", title=lab["rho_l"],
                                           format=".0%")]),
        alt.Chart(pd.DataFrame([{"v": slo_ms, "label": f"{lab['slo']}{lab['colon']}{slo_ms:g} ms"}]))
        .mark_rule(strokeDash=[6, 4], color="#d62728").encode(
            y=alt.Y("v:Q", scale=alt.Scale(domain=[0, y_top], nice=False)),
            tooltip=[alt.Tooltip("label:N", title=lab["slo"])]),
    ]
    if len(sat):
        layers.append(alt.Chart(sat).mark_rule(strokeWidth=2, strokeDash=[2, 2]).encode(
            x=alt.X("rate_per_s:Q", scale=alt.Scale(domain=[0, top], nice=False)),
            color=alt.Color("label:N", title=lab["saturates"],
                            scale=alt.Scale(domain=list(sat["label"]),
                                            range=[PART_COLORS[PARTS.index(p)]
                                                   for p in sat["part"]]),
                            legend=alt.Legend(orient="bottom", columns=1)),
            tooltip=[alt.Tooltip("label:N", title=lab["saturates"])]))
    here = pd.DataFrame([{"rate_per_s": rate_per_s,
                          field: at_ms if math.isfinite(at_ms) else None,
                          "label": lab["here"]}])
    layers.append(alt.Chart(here).mark_rule(color="#d62728", opacity=0.5).encode(
        x=alt.X("rate_per_s:Q", scale=alt.Scale(domain=[0, top], nice=False)),
        tooltip=[alt.Tooltip("label:N", title=lab["here"]),
                 alt.Tooltip("rate_per_s:Q", title=lab["rate"], format=",.3g")]))
    if math.isfinite(at_ms):
        layers.append(alt.Chart(here).mark_point(shape="cross", size=260, filled=True,
                                                 color="#d62728", clip=True).encode(
            x=x, y=y, tooltip=[alt.Tooltip("label:N", title=lab["here"]),
                               alt.Tooltip(f"{field}:Q", title=title, format=",.1f")]))
    if len(events):
        layers.append(alt.Chart(events).mark_point(shape="diamond", size=80, filled=True,
                                                   color="black", clip=True).encode(
            x=x, y=y, tooltip=[alt.Tooltip("rate_per_s:Q", title=lab["rate"], format=",.3g"),
                               alt.Tooltip(f"{field}:Q", title=lab["events"],
                                           format=",.1f")]))
    return cast(alt.LayerChart, alt.layer(*layers).properties(width=width, height=height))


def chart_labels(lang: str = "en", pct: str = "p90") -> dict[str, str]:
    """The chart's axis titles, legends and tooltip names in `lang`."""
    return {"rate": t("pd_ch_rate", lang), "ttft": t("pd_ch_ttft", lang, pct=pct),
            "tpot": t("pd_ch_tpot", lang, pct=pct), "slo": t("pd_ch_slo", lang),
            "saturates": t("pd_ch_saturates", lang), "here": t("pd_ch_here", lang),
            "events": t("pd_ch_events", lang, pct=pct), "rho_p": t("pd_rho_prefill", lang),
            "rho_d": t("pd_rho_decode", lang), "rho_l": t("pd_rho_link", lang),
            "colon": t("colon", lang)}


CHARTS: Final = ("ttft", "tpot")
"""`two_pools_charts`' charts, in order."""


def two_pools_charts(curve: PoolsCurve, *, rate_per_s: float, ttft_at_ms: float,
                     tpot_at_ms: float, ttft_slo_ms: float, tpot_slo_ms: float,
                     quantile: float, lang: str = "en", events: Sequence[EventPoint] = (),
                     width: int = 420, height: int = 260) -> dict[str, alt.LayerChart]:
    """TTFT ('ttft') and TPOT ('tpot') at the SLO quantile against the request rate over the
    curve's rates, each with its target, the saturation rates within the chart, the chosen rate
    (`rate_per_s`, its figures `ttft_at_ms` and `tpot_at_ms`: a red cross) and the event
    model's points (black diamonds). Two charts, so that a page can set each one's width."""
    pct = f"p{round(quantile * 100)}"
    lab = chart_labels(lang, pct)
    df = curve_frame(curve)
    top = float(np.max(curve.rate_per_s))
    sat = saturation_frame(curve.saturation, lang, up_to=top)
    ev = event_frame(events)
    return {"ttft": _panel(df, "ttft_ms", lab["ttft"], ttft_slo_ms, ttft_at_ms, sat, rate_per_s,
                           ev, lab, top, width, height),
            "tpot": _panel(df, "tpot_ms", lab["tpot"], tpot_slo_ms, tpot_at_ms, sat, rate_per_s,
                           ev, lab, top, width, height)}


# ---- the Explorer's inputs to a layout ----------------------------------------------------------
EVENT_SHARES: Final = (0.3, 0.6, 0.9)
"""The event model's rates, as shares of the first saturation rate (`explorer_pools`)."""


@dataclass(frozen=True, kw_only=True)
class ExplorerPools:
    """The two pools of an Explorer what-if (`explorer_pools`): the layout its `dis_*` inputs
    describe, its figures at the rate, the rate-matched counts, the curve and the event
    model's points."""

    rate_per_s: float
    rate_source: str
    """'entered' (`dis_rate`), 'load' (the design load), 'deployment' (the aggregated
    deployment's design load for C requests in flight, queueing included: the rate the
    Explorer's deployment box states) or 'concurrency' (Little's law from C and the what-if's
    unqueued TTFT and TPOT, where no deployment could be built)."""
    layout: PoolLayout
    figures: PoolFigures
    matched: tuple[int, int] | None
    """The rate-matched (X, Y) of the two shapes at the rate (None: none exists)."""
    auto_counts: tuple[bool, bool]
    """Whether the prefill and the decode counts are the rate-matched ones (`dis_px`, `dis_dy`
    left at 0)."""
    prefill_sizes: tuple[int, ...]
    """The TP sizes the planner builds on the prefill GPU (its choices)."""
    decode_sizes: tuple[int, ...]
    curve: PoolsCurve
    events: tuple[EventPoint, ...]


def explorer_rate(state: ExplorerState, ttft_s: float, tpot_ms: float,
                  design_rate_per_s: float | None = None) -> tuple[float, str]:
    """The request rate of the two pools (req/s) and where it comes from: `dis_rate` when set,
    else the design load `load`, else the aggregated deployment's design load
    (`design_rate_per_s`: the Planner's rate for C requests in flight with its headroom,
    queueing included, `Option.design_rate_per_s`, the figure the Explorer's deployment box
    states), else, where no deployment was built, the rate the what-if's C requests in flight
    complete at from its own unqueued TTFT and TPOT (`closed_loop_rate_per_s`). Until
    2026-12-07 the last was used beside a deployment box too: 6.31 req/s for the chapter's 50
    requests at 8K on an RTX 4090, whose prefills queue at 0.289 req/s, the rate that keeps
    50 in flight, so the two pools ran at 22 times the deployment's load."""
    if state.dis_rate > 0:
        return state.dis_rate, "entered"
    if state.load > 0:
        return state.load, "load"
    if design_rate_per_s is not None and math.isfinite(design_rate_per_s) \
            and design_rate_per_s > 0:
        return float(design_rate_per_s), "deployment"
    return closed_loop_rate_per_s(state.c, ttft_s, tpot_ms, state.out), "concurrency"


def explorer_pools(state: ExplorerState, catalog: Catalog, *, ttft_s: float, tpot_ms: float,
                   events: bool = True, design_rate_per_s: float | None = None
                   ) -> ExplorerPools:
    """The two pools of the what-if: the prefill pool on its GPU at `dis_ptp` (0: its TP),
    the decode pool on `dis_dgpu` ('': its GPU) at `dis_dtp`, `dis_px` and `dis_dy` replicas
    (0: rate-matched at the rate, `matched_counts`), the link `link_for` picks with `dis_eff`
    and `dis_lat_ms`; the planner's replica shapes for its model, weights, KV, workload, SLOs,
    engine and basis (`ExplorerState.plan_inputs`). `ttft_s` and `tpot_ms` are the what-if's
    own figures (for the rate of a closed loop), `design_rate_per_s` the aggregated
    deployment's design load (`explorer_rate`). InputError when the layout cannot be built."""
    rate, source = explorer_rate(state, ttft_s, tpot_ms, design_rate_per_s)
    dgpu = state.dis_dgpu or state.gpu
    base = state.plan_inputs(catalog)
    inp = replace(base, gpus=tuple(dict.fromkeys((state.gpu, dgpu))), max_gpus=64)
    shapes = pool_shapes(inp, catalog)
    ptp, dtp = state.dis_ptp or state.tp, state.dis_dtp or state.tp
    one = layout(inp, shapes, prefill_gpu=state.gpu, prefill_tp=ptp, prefill_replicas=1,
                 decode_gpu=dgpu, decode_tp=dtp, decode_replicas=1,
                 efficiency=state.dis_eff, latency_ms=state.dis_lat_ms, catalog=catalog)
    matched = matched_counts(one, rate, catalog)
    x = state.dis_px or (matched[0] if matched else 1)
    y = state.dis_dy or (matched[1] if matched else 1)
    lay = with_counts(one, x, y, catalog)
    fig = pools_at(lay, rate)
    pts: tuple[EventPoint, ...] = ()
    if events:
        first = saturation(lay).first_per_s
        bare = replace(state, spare=0, draft="", prefix=0)
        pre = replace(bare, gpus=ptp, tp=ptp).scenario(catalog)
        dec = replace(bare, gpu=dgpu, gpus=dtp, tp=dtp).scenario(catalog)
        rates = sorted({*(s * first for s in EVENT_SHARES), *([rate] if rate < first else [])})
        pts = tuple(event_points(lay, pre, dec, rates, engine=state.engine))
    return ExplorerPools(
        rate_per_s=rate, rate_source=source, layout=lay, figures=fig, matched=matched,
        auto_counts=(state.dis_px == 0, state.dis_dy == 0),
        prefill_sizes=tuple(sorted(t for g, t in shapes if g == state.gpu)),
        decode_sizes=tuple(sorted(t for g, t in shapes if g == dgpu)),
        curve=pools_curve(lay, curve_rates(lay, rate)), events=pts)


def explorer_pools_charts(p: ExplorerPools, lang: str = "en") -> dict[str, alt.LayerChart]:
    """`two_pools_charts` of the Explorer's two pools."""
    lay, f = p.layout, p.figures
    return two_pools_charts(p.curve, rate_per_s=p.rate_per_s, ttft_at_ms=f.ttft_ms,
                            tpot_at_ms=f.tpot_ms, ttft_slo_ms=lay.ttft_slo_ms,
                            tpot_slo_ms=lay.tpot_slo_ms, quantile=lay.quantile, lang=lang,
                            events=p.events)
