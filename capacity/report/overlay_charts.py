"""Altair charts of measured points on predicted curves (`capacity.fit.overlay` frames).

Per metric: predicted curves as lines (spec-sheet dashed, calibrated solid, the no-load roofline
light grey and dotted where the overlay predicts under load), the predicted p90-p99 band of the
best prediction as a light area where it has one (TTFT under load), measured p50 as
points per series (a run, an import, a published sweep), the p90-p99 band as a vertical rule
through each point, and vertical rules at the predicted C_vram and the measured saturation.
Concurrency on a log axis. Labels come from the caller (the app's language).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import altair as alt
import pandas as pd

from capacity.fit.findmax import FindMaxOverlay
from capacity.fit.overlay import Overlay, Predicted

DEFAULT_LABELS: dict[str, str] = {
    "concurrency": "concurrent requests", "ttft_ms": "TTFT (ms)", "tpot_ms": "TPOT (ms)",
    "tok_s_per_request": "tok/s per request", "aggregate_tok_s": "aggregate tok/s",
    "series": "series", Predicted.SPEC_SHEET: "predicted, spec-sheet",
    Predicted.CALIBRATED: "predicted, calibrated", Predicted.ROOFLINE: "roofline, no queueing",
    "c_vram": "C_vram (predicted)", "saturation": "measured saturation", "band": "p90-p99",
    "find_max": "highest within the SLO (measured)",
    "ratio": "measured / predicted",
}


PAD = 1.3
"""Margin of a log axis beyond the data on each side (a factor)."""


def _positive(columns: list[pd.Series]) -> list[float]:
    """The finite positive values of some columns (what a log axis can show)."""
    out: list[float] = []
    for c in columns:
        v = pd.to_numeric(c, errors="coerce")
        out += [float(x) for x in v[(v > 0) & v.map(math.isfinite)]] if not v.empty else []
    return out


def _l(labels: Mapping[str, str], key: str) -> str:
    return labels.get(key, DEFAULT_LABELS.get(key, key))


def overlay_chart(ov: Overlay, metric: str, labels: Mapping[str, str] = DEFAULT_LABELS,
                  extra_measured: pd.DataFrame | None = None, height: int = 260,
                  find_max_concurrency: float | None = None) -> alt.LayerChart:
    """One metric vs concurrency: curves, points, band, C_vram and saturation rules, and the
    highest concurrency within the SLO that a `--find-max` run measured, when given."""
    x_title, y_title = _l(labels, "concurrency"), _l(labels, metric)
    pred = ov.predicted[ov.predicted["metric"] == metric].copy()
    pred["series"] = pred["series"].map(lambda s: _l(labels, s))
    meas = ov.measured
    if extra_measured is not None and not extra_measured.empty:
        meas = pd.concat([meas, extra_measured], ignore_index=True)
    meas = meas[meas["metric"] == metric].copy()
    band = meas.dropna(subset=["p90", "p99"])
    # every axis spans all the data shown (the curves, each series' points and bands) with a
    # margin, so that no point sits on the chart's edge half cut off (issue 14, item 8)
    xs = _positive([pred["concurrency"], meas["concurrency"]])
    x_scale = (alt.Scale(type="log", nice=False, domain=[min(xs) / PAD, max(xs) * PAD])
               if xs else alt.Scale(type="log", nice=False))
    x = alt.X("concurrency:Q", scale=x_scale, title=x_title)
    pband_all = ov.predicted[ov.predicted["metric"] == metric]
    ys = _positive([pred["value"], meas["p50"], meas["p90"], meas["p99"],
                    pband_all["p90"], pband_all["p99"]])
    if metric != "aggregate_tok_s":
        y_scale = (alt.Scale(type="log", domain=[min(ys) / PAD, max(ys) * PAD])
                   if ys else alt.Scale(type="log"))
    else:
        y_scale = alt.Scale(zero=False)
    if metric == "aggregate_tok_s" and (pred["series"] == _l(labels, Predicted.ROOFLINE)).any():
        # the roofline without queueing climbs far above what a loaded server delivers: let it
        # leave the top of the chart rather than flatten the measured points and the curve
        loaded = pred.loc[pred["series"] != _l(labels, Predicted.ROOFLINE), "value"]
        top = max([*_positive([meas["p50"], meas["p90"], meas["p99"]]),
                   float(loaded.max()) if not loaded.empty else 0.0]) * 1.25
        if math.isfinite(top) and top > 0:
            y_scale = alt.Scale(domain=[0.0, top], nice=True)
    # the legend lists the predicted series this chart draws, and only those (no calibrated
    # line without a calibration, no roofline where the overlay predicts without load or for
    # a metric it has none of); each keeps its own dash and colour
    styles = [(_l(labels, p), dash_of, colour) for p, dash_of, colour in (
        (Predicted.SPEC_SHEET, [6, 4], "#555555"), (Predicted.CALIBRATED, [1, 0], "#d62728"),
        (Predicted.ROOFLINE, [2, 3], "#b0b0b0"))]
    drawn = set(pred["series"])
    styles = [x for x in styles if x[0] in drawn] or styles
    names = [name for name, _, _ in styles]
    # one explicit domain, so the band and the points of a series get the same colour
    measured_scale = alt.Scale(domain=list(dict.fromkeys(meas["series"])), scheme="tableau10")
    legend = alt.Legend(orient="bottom", title=None, labelLimit=400, direction="vertical")
    dash = alt.StrokeDash("series:N", scale=alt.Scale(domain=names,
                                                      range=[d for _, d, _ in styles]),
                          legend=legend)
    line_color = alt.Color("series:N", scale=alt.Scale(domain=names,
                                                       range=[c for _, _, c in styles]),
                           legend=legend)
    layers: list[alt.Chart] = [
        alt.Chart(pred).mark_line(strokeWidth=2, clip=True).encode(
            x=x, y=alt.Y("value:Q", title=y_title, scale=y_scale), strokeDash=dash,
            color=line_color,
            tooltip=[alt.Tooltip("series:N"), alt.Tooltip("concurrency:Q", format=".3g"),
                     alt.Tooltip("value:Q", title=y_title, format=".4g")]),
    ]
    best = (Predicted.CALIBRATED if (ov.predicted["series"] == Predicted.CALIBRATED).any()
            else Predicted.SPEC_SHEET)
    pband = ov.predicted[(ov.predicted["metric"] == metric) & (ov.predicted["series"] == best)
                         ].dropna(subset=["p90", "p99"])
    if not pband.empty:
        layers.insert(0, alt.Chart(pband).mark_area(
            opacity=0.12, color="#d62728" if best == Predicted.CALIBRATED else "#555555").encode(
            x=x, y=alt.Y("p90:Q", scale=y_scale, title=y_title), y2="p99:Q",
            tooltip=[alt.Tooltip("concurrency:Q", format=".3g"),
                     alt.Tooltip("p90:Q", title=f"{y_title} p90", format=".4g"),
                     alt.Tooltip("p99:Q", title=f"{y_title} p99", format=".4g")]))
    if not band.empty:
        layers.append(alt.Chart(band).mark_rule(strokeWidth=3, opacity=0.45).encode(
            x=x, y=alt.Y("p90:Q", scale=y_scale), y2="p99:Q",
            color=alt.Color("series:N", title=None, scale=measured_scale, legend=None),
            tooltip=[alt.Tooltip("series:N"), alt.Tooltip("p90:Q", format=".4g"),
                     alt.Tooltip("p99:Q", format=".4g")]))
    layers.append(alt.Chart(meas).mark_point(filled=True, size=70).encode(
        x=x, y=alt.Y("p50:Q", scale=y_scale),
        color=alt.Color("series:N", title=None, scale=measured_scale,
                        # above the chart, its labels ellipsized at 180 px: beside the predicted
                        # lines' legend below, a long run label was cut at the chart's edge
                        legend=alt.Legend(orient="top", labelLimit=180,
                                          direction="vertical")),
        shape=alt.Shape("series:N", legend=None),
        tooltip=[alt.Tooltip("series:N"), alt.Tooltip("concurrency:Q", format=".3g"),
                 alt.Tooltip("p50:Q", title=f"{y_title} p50", format=".4g"),
                 alt.Tooltip("p90:Q", format=".4g"), alt.Tooltip("p99:Q", format=".4g")]))
    rules: list[tuple[float, str]] = [(float(ov.c_vram_spec), _l(labels, "c_vram"))]
    if ov.saturation.concurrency is not None:
        rules.append((ov.saturation.concurrency, _l(labels, "saturation")))
    if find_max_concurrency is not None and find_max_concurrency > 0:
        rules.append((find_max_concurrency, _l(labels, "find_max")))
    lo = min(xs) if xs else 1.0
    hi = max(xs) if xs else 1.0
    shown = pd.DataFrame([{"concurrency": c, "what": w} for c, w in rules if lo <= c <= hi])
    if not shown.empty:
        layers.append(alt.Chart(shown).mark_rule(color="#e45756", strokeDash=[2, 2]).encode(
            x=x, tooltip=[alt.Tooltip("what:N"), alt.Tooltip("concurrency:Q", format=".4g")]))
        layers.append(alt.Chart(shown).mark_text(align="left", dx=3, dy=-4, color="#e45756",
                                                 baseline="top").encode(
            x=x, y=alt.value(2), text="what:N"))
    chart: alt.LayerChart = alt.layer(*layers).resolve_scale(
        color="independent", strokeDash="independent").properties(height=height,
                                                                    width="container")
    return chart


def ratio_chart(ratios: pd.DataFrame, labels: Mapping[str, str] = DEFAULT_LABELS,
                height: int = 220) -> alt.Chart:
    """Measured / predicted per point and metric (1 = agreement), one mark per prediction."""
    cols = [c for c in ratios.columns
            if c.startswith("ratio_") and c != f"ratio_{Predicted.ROOFLINE}"]
    long = ratios.melt(id_vars=["concurrency", "metric"], value_vars=cols, var_name="series",
                       value_name="ratio").dropna()
    long["series"] = long["series"].str.removeprefix("ratio_").map(lambda s: _l(labels, s))
    long["metric"] = long["metric"].map(lambda m: _l(labels, m))
    lo, hi = float(long["concurrency"].min()), float(long["concurrency"].max())
    x = alt.X("concurrency:Q", scale=alt.Scale(type="log", nice=False,
                                               domain=[lo / 1.3, hi * 1.3]),
              title=_l(labels, "concurrency"))
    points = alt.Chart(long).mark_point(filled=True, size=60).encode(
        x=x, y=alt.Y("ratio:Q", scale=alt.Scale(type="log"), title=_l(labels, "ratio")),
        color=alt.Color("metric:N", title=None, legend=alt.Legend(orient="bottom")),
        shape=alt.Shape("series:N", title=None, legend=alt.Legend(orient="bottom")),
        tooltip=["metric:N", "series:N", alt.Tooltip("concurrency:Q", format=".3g"),
                 alt.Tooltip("ratio:Q", format=".3f")])
    one = alt.Chart(pd.DataFrame({"ratio": [1.0]})).mark_rule(color="gray").encode(y="ratio:Q")
    return alt.layer(points, one).properties(height=height, width="container")  # type: ignore[return-value]


def find_max_chart(ov: FindMaxOverlay, labels: Mapping[str, str], height: int = 300
                   ) -> alt.LayerChart:
    """A find-max run: each probe's TTFT at the run's percentile against its load (meets /
    misses the SLO), the TTFT target as a horizontal rule, and vertical rules at the measured
    maximum (solid) and the predicted one (dashed, when there is one). `labels`: "load",
    "ttft", "verdict", "passed", "failed", "measured", "predicted", "target"."""
    probes = pd.DataFrame([{"load": float(p.get("load", math.nan)),
                            "ttft": p.get("ttft_pct_ms"),
                            "verdict": labels["passed"] if p.get("passed") else labels["failed"]}
                           for p in ov.probes])
    if probes.empty:
        probes = pd.DataFrame({"load": [], "ttft": [], "verdict": []})
    x = alt.X("load:Q", title=labels["load"])
    pts = alt.Chart(probes).mark_point(filled=True, size=70).encode(
        x=x, y=alt.Y("ttft:Q", title=labels["ttft"]),
        color=alt.Color("verdict:N", title=labels["verdict"]),
        tooltip=["load:Q", "ttft:Q", "verdict:N"])
    rules = pd.DataFrame([{"x": ov.measured, "what": labels["measured"]}]
                         + ([{"x": ov.predicted_rate_per_s, "what": labels["predicted"]}]
                            if ov.predicted_rate_per_s is not None else []))
    vrule = alt.Chart(rules).mark_rule(strokeWidth=2).encode(
        x="x:Q", strokeDash=alt.StrokeDash("what:N", title=None), tooltip=["what:N", "x:Q"])
    target = alt.Chart(pd.DataFrame({"y": [ov.slo_ttft_ms], "what": [labels["target"]]})
                       ).mark_rule(color="grey", strokeDash=[2, 2]).encode(
        y="y:Q", tooltip=["what:N", "y:Q"])
    return alt.LayerChart(layer=[pts, vrule, target], height=height)
