"""Chart data and Altair specs for the Explorer, computed from `evaluate` in a few vectorized calls.

`chart_data` evaluates one scenario over a grid of hundreds of concurrency points (one call),
a grid of prompt lengths (one call) and the roofline, and returns plain DataFrames; the
`*_chart` functions turn them into Altair specs with tooltips on every point. Labels (axis
titles and series names) are passed in, so the app can show them in any language; the English
ones are `DEFAULT_LABELS`. Pure: no Streamlit here.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import altair as alt
import numpy as np
import numpy.typing as npt
import pandas as pd

from capacity.fit.traffic import LogSummary
from capacity.model.roofline import DecodeStep, attainable_tflops, ridge_point
from capacity.model.scenario import Scenario, decode_model, evaluate
from capacity.plan.detail import CurvePoint
from capacity.plan.options import Option
from capacity.plan.search import pareto_front
from capacity.types import FloatArray
from capacity.units import GB, TERA

DEFAULT_POINTS: Final = 400
"""Concurrency points per curve."""
PROMPT_POINTS: Final = 200
"""Prompt-length points of the TTFT curve."""

DEFAULT_LABELS: Final[dict[str, str]] = {
    "concurrency": "concurrent requests",
    "step_ms": "decode step (ms)",
    "bandwidth": "bandwidth term",
    "compute": "compute term",
    "step": "step time = max",
    "c_vram": "C_vram (memory limit)",
    "chosen": "chosen concurrency",
    "slo_tpot": "TPOT SLO",
    "slo_ttft": "TTFT SLO",
    "slo_cost": "cost SLO",
    "tok_s_per_request": "tok/s per request",
    "aggregate_tok_s": "aggregate tok/s",
    "series": "series",
    "value": "value",
    "gb": "GB per GPU",
    "weights": "weights",
    "overhead": "overhead",
    "nccl": "NCCL buffers",
    "kv": "KV cache",
    "free": "free (within util)",
    "reserved": "outside util",
    "usable": "VRAM x util",
    "vram": "VRAM",
    "segment": "segment",
    "prompt_tokens": "prompt length (tokens)",
    "ttft_s": "TTFT (s)",
    "linear": "linear (2PL / F x MFU)",
    "attention": "with attention (O(L^2))",
    "chosen_prompt": "chosen prompt",
    "cost": "cost per M tokens",
    "intensity": "arithmetic intensity (FLOP/byte)",
    "tflops": "TFLOP/s per GPU",
    "roof": "roofline",
    "ridge": "ridge point",
    "decode_curve": "decode, C = 1..max",
    "decode": "decode at chosen C",
    "prefill": "prefill",
    "verdict": "memory verdict",
    "bound": "binds",
    "point": "point",
    "current": "this what-if",
    "pinned": "pinned",
    "what_if": "what-if",
    "colon": ": ",  # between a rule's name and its value; Chinese: '：'
    "with_unit": "{what} ({unit})",  # an axis title with its unit; Chinese: '{what}（{unit}）'
}


@dataclass(frozen=True, kw_only=True)
class ChartData:
    """Every curve of the Explorer for one scenario, as DataFrames, plus the marker positions."""

    curves: pd.DataFrame
    ttft: pd.DataFrame
    vram: pd.DataFrame
    roof: pd.DataFrame
    roof_points: pd.DataFrame
    concurrency: int
    c_vram: int
    usable_gb: float
    vram_gb: float
    prompt_tokens: int
    ridge_flop_per_byte: float
    slo_ttft_s: float
    slo_tpot_ms: float
    slo_cost: float
    currency: str


def concurrency_grid(chosen: int, c_vram: int, points: int = DEFAULT_POINTS) -> FloatArray:
    """Whole concurrency values for the curves: 1 .. max(2 x chosen, 1.25 x C_vram, 128), at
    most `points` of them evenly spaced, plus the chosen value itself (a tooltip hits it)."""
    c_max = min(max(2.0 * chosen, 1.25 * c_vram, 128.0), 100_000.0)
    grid = np.round(np.linspace(1.0, c_max, points))
    return np.asarray(np.unique(np.concatenate([grid, [float(chosen)]])), dtype=np.float64)


def chart_data(s: Scenario, concurrency: int, *, slo_ttft_ms: float = 2000.0,
               slo_tpot_ms: float = 50.0, slo_cost: float = 0.0,
               points: int = DEFAULT_POINTS) -> ChartData:
    """Evaluate `s` for every chart: one `evaluate` over the concurrency grid, one over the
    prompt-length grid, and the roofline from the same terms. Units: ms, s, GB, tok/s."""
    c = max(int(concurrency), 1)
    one = evaluate(s, [c])
    c_vram = int(one.max_concurrency_vram.flat[0])
    grid = concurrency_grid(c, c_vram, points)
    ev = evaluate(s, grid)
    d = ev.decode
    curves = pd.DataFrame({
        "concurrency": grid,
        "bandwidth_ms": d.bandwidth_ms,
        "compute_ms": d.compute_ms,
        "comm_ms": d.comm_ms,
        "step_ms": d.step_ms,
        "bound": d.bound,
        "tok_s_per_request": d.tok_s_per_request,
        "aggregate_tok_s": ev.aggregate_tok_s,
        "cost_per_mtok": ev.cost_per_mtok,
        "vram_subtotal_gb": ev.vram_subtotal_bytes / GB,
        "verdict": ev.verdict,
    })
    # TTFT against prompt length: one evaluate over a prompt grid (prompt = context here)
    l_max = max(s.prompt, min(max(2 * s.context_tokens, 32_768), s.model.max_context_tokens))
    prompts = np.unique(np.concatenate([np.linspace(l_max / PROMPT_POINTS, l_max,
                                                    PROMPT_POINTS).round(), [s.prompt]]))
    tev = evaluate(s.with_(prompt_tokens=None), [1], prompts)
    ttft = pd.DataFrame({"prompt_tokens": prompts, "linear_s": tev.ttft_linear_s,
                         "attention_s": tev.ttft_s})
    v = one.vram
    kv_gb = float(one.kv_total_bytes[0]) / GB
    subtotal_gb = float(one.vram_subtotal_bytes[0]) / GB
    segments = [("weights", v.weights_bytes / GB), ("overhead", v.overhead_bytes / GB),
                ("nccl", v.nccl_bytes / GB), ("kv", kv_gb),
                ("free", max(v.usable_bytes / GB - subtotal_gb, 0.0)),
                ("reserved", max(v.vram_bytes / GB - max(v.usable_bytes / GB, subtotal_gb),
                                 0.0))]
    vram = pd.DataFrame([{"segment": k, "gb": g, "order": i} for i, (k, g) in
                         enumerate(segments) if g > 0 or k == "kv"])
    roof, roof_points = _roofline(s, ev, grid, one)
    return ChartData(
        curves=curves, ttft=ttft, vram=vram, roof=roof, roof_points=roof_points,
        concurrency=c, c_vram=c_vram, usable_gb=v.usable_bytes / GB, vram_gb=s.budget_vram_gb,
        prompt_tokens=s.prompt, ridge_flop_per_byte=ridge_point(s.tflops, s.bandwidth_gb_s),
        slo_ttft_s=slo_ttft_ms / 1e3, slo_tpot_ms=slo_tpot_ms, slo_cost=slo_cost,
        currency=s.currency)


def step_intensity(step: DecodeStep, tp: int) -> tuple[FloatArray, FloatArray]:
    """FLOPs and bytes of one decode step on one GPU, from F4's terms (`DecodeStep`):
    (2 x P_active x C / TP, W_read(C) / TP + C x KV_request per rank). Intensity = FLOPs /
    bytes (FLOP/byte). Source: F4 (docs/method.md)."""
    return (np.asarray(step.flops / tp, dtype=np.float64),
            np.asarray(step.weight_read_bytes + step.kv_read_bytes, dtype=np.float64))


def decode_intensity(s: Scenario, per_replica_concurrency: npt.ArrayLike,
                     kv_request_bytes: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """`step_intensity` of `s` at these per-replica batches and KV per request. The chapter at
    C = 50: 9e11 FLOP over 19.12e9 B = 47 FLOP/B (below the 4090's ridge of 164)."""
    return step_intensity(decode_model(s, kv_request_bytes).decode(per_replica_concurrency),
                          s.tp)


def _roofline(s: Scenario, ev: Any, grid: FloatArray, one: Any
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    flops, moved = step_intensity(ev.decode, s.tp)
    achieved = flops / (ev.decode.step_ms / 1e3) / TERA
    f1, m1 = step_intensity(one.decode, s.tp)
    dec_i = float(f1[0] / m1[0])
    dec_t = float(f1[0] / (one.decode.step_ms[0] / 1e3) / TERA)
    pf_flops = float(one.prefill.total_flops.flat[0]) / s.tp
    pf_bytes = s.step_weights_gb * GB + float(one.kv_read_bytes.flat[0])
    pf_i = pf_flops / pf_bytes
    pf_t = pf_flops / float(one.prefill_s.flat[0]) / TERA
    ridge = ridge_point(s.tflops, s.bandwidth_gb_s)
    lo = min(0.5, float(np.min(flops / moved)) / 2)
    hi = max(ridge * 20, pf_i * 4)
    xs = np.geomspace(lo, hi, 200)
    roof = pd.concat([
        pd.DataFrame({"intensity": xs, "tflops": attainable_tflops(xs, s.tflops,
                                                                   s.bandwidth_gb_s),
                      "series": "roof", "concurrency": np.nan}),
        pd.DataFrame({"intensity": flops / moved, "tflops": achieved,
                      "series": "decode_curve", "concurrency": grid}),
    ], ignore_index=True)
    points = pd.DataFrame([
        {"point": "decode", "intensity": dec_i, "tflops": dec_t,
         "roof_tflops": float(attainable_tflops(dec_i, s.tflops, s.bandwidth_gb_s))},
        {"point": "prefill", "intensity": pf_i, "tflops": pf_t,
         "roof_tflops": float(attainable_tflops(pf_i, s.tflops, s.bandwidth_gb_s))},
        {"point": "ridge", "intensity": ridge, "tflops": s.tflops, "roof_tflops": s.tflops},
    ])
    return roof, points


# ---------------------------------------------------------------------------------------------
# Vega-Lite specs, built with Altair
#
# Building Altair objects costs tens of milliseconds per chart (schema validation and deep
# copies), too slow for a page that reruns on every slider move (docs/benchmarks.md: < 300 ms). So each
# chart's structure is built once per set of labels with Altair over *named* datasets and cached
# as a dict; a rerun only fills the datasets (`specs`), which takes about a millisecond.

COLORS: Final = {"bandwidth": "#4c78a8", "compute": "#f58518", "step": "#222222",
                 "tok_s_per_request": "#4c78a8", "aggregate_tok_s": "#54a24b",
                 "linear": "#4c78a8", "attention": "#e45756", "cost": "#b279a2",
                 "c_vram": "#e45756", "chosen": "#222222", "slo": "#2ca02c"}
VRAM_COLORS: Final = {"weights": "#4c78a8", "overhead": "#9d755d", "nccl": "#bab0ac",
                      "kv": "#f58518", "free": "#c7e9c0", "reserved": "#e8e8e8"}
ROOF_COLORS: Final = {"roof": "#222222", "decode_curve": "#9ecae9", "decode": "#4c78a8",
                      "prefill": "#e45756", "ridge": "#2ca02c"}
LabelItems = tuple[tuple[str, str], ...]


def _l(labels: Mapping[str, str], key: str) -> str:
    return labels.get(key, DEFAULT_LABELS.get(key, key))


def _named(name: str) -> alt.Chart:
    return alt.Chart(alt.Data(name=name))  # type: ignore[no-untyped-call]


def _legend_color(field: str, domain: list[str], colors: list[str]) -> alt.Color:
    return alt.Color(f"{field}:N", title=None, scale=alt.Scale(domain=domain, range=colors),
                     legend=alt.Legend(orient="bottom", columns=min(len(domain), 3),
                                       labelLimit=260, symbolType="stroke"))


def _rule_layers(with_h: bool = True) -> list[Any]:
    """Vertical rules at the chosen concurrency (dataset `v_chosen`) and C_vram (`v_cvram`),
    and a horizontal SLO rule (`h_slo`), each with its label and a tooltip. A rule whose
    dataset is empty is not drawn."""
    tip = [alt.Tooltip("label:N", title=" ")]
    out: list[Any] = []
    for name, color, dy in (("v_chosen", COLORS["chosen"], 2), ("v_cvram", COLORS["c_vram"], 18)):
        v = _named(name)
        out += [v.mark_rule(strokeWidth=2, strokeDash=[6, 4], color=color).encode(
                    x="x:Q", tooltip=tip),
                v.mark_text(align="left", dx=4, baseline="top", fontSize=11, color=color).encode(
                    x="x:Q", y=alt.value(dy), text="label:N", tooltip=tip)]
    if with_h:
        h = _named("h_slo")
        out += [h.mark_rule(strokeWidth=2, strokeDash=[2, 3], color=COLORS["slo"]).encode(
                    y="y:Q", tooltip=tip),
                h.mark_text(align="left", dy=-7, fontSize=11, color=COLORS["slo"]).encode(
                    y="y:Q", x=alt.value(4), text="label:N", tooltip=tip)]
    return out


def _hover_lines(name: str, x_title: str, y_title: str, domain: list[str], colors: list[str],
                 tooltip: list[alt.Tooltip], log_y: bool = False) -> list[Any]:
    """Lines over dataset `lines` (x, series, value) with a nearest-point hover and tooltips."""
    hover = alt.selection_point(name=name, nearest=True, on="pointerover", fields=["x"],
                                empty=False, clear="pointerout")
    y = alt.Y("value:Q", title=y_title,
              scale=alt.Scale(type="log") if log_y else alt.Scale(zero=True))
    base = _named("lines").encode(x=alt.X("x:Q", title=x_title), y=y,
                                  color=_legend_color("series", domain, colors))
    last = [7, 4] if len(domain) > 1 else [1, 0]
    dash = alt.StrokeDash("series:N", legend=None, scale=alt.Scale(
        domain=domain, range=[[1, 0]] * (len(domain) - 1) + [last]))
    return [base.mark_line(strokeWidth=2.5).encode(strokeDash=dash),
            base.mark_circle(size=60).encode(
                opacity=alt.when(hover).then(alt.value(1.0)).otherwise(alt.value(0.0)),
                tooltip=tooltip).add_params(hover)]


def _finish(layers: list[Any], height: int, **resolve: str) -> dict[str, Any]:
    chart = alt.layer(*layers).properties(height=height)
    if resolve:
        chart = chart.resolve_scale(**resolve)  # type: ignore[arg-type]
    spec: dict[str, Any] = chart.to_dict()
    spec.pop("datasets", None)
    return spec


@functools.lru_cache(maxsize=64)
def _template(name: str, items: LabelItems, currency: str) -> dict[str, Any]:
    """The Vega-Lite structure of one chart for one set of labels (data left out)."""
    labels = dict(items)
    L = functools.partial(_l, labels)
    if name == "step_time":
        keys = ["bandwidth", "compute", "step"]
        layers = _hover_lines(
            "hover_step", L("concurrency"), L("step_ms"), [L(k) for k in keys],
            [COLORS[k] for k in keys],
            [alt.Tooltip("series:N", title=L("series")),
             alt.Tooltip("x:Q", title=L("concurrency"), format=",.0f"),
             alt.Tooltip("value:Q", title=L("step_ms"), format=",.2f"),
             alt.Tooltip("bound:N", title=L("bound"))])
        return _finish(layers + _rule_layers(), 300)
    if name == "throughput":
        per, agg = L("tok_s_per_request"), L("aggregate_tok_s")
        hover = alt.selection_point(name="hover_tput", nearest=True, on="pointerover",
                                    fields=["x"], empty=False, clear="pointerout")
        color = _legend_color("series", [per, agg], [COLORS["tok_s_per_request"],
                                                     COLORS["aggregate_tok_s"]])
        tooltip = [alt.Tooltip("x:Q", title=L("concurrency"), format=",.0f"),
                   alt.Tooltip("per:Q", title=per, format=",.1f"),
                   alt.Tooltip("agg:Q", title=agg, format=",.0f"),
                   alt.Tooltip("verdict:N", title=L("verdict"))]
        x = alt.X("x:Q", title=L("concurrency"))
        sides = []
        for col, series_name, orient in (("per", per, "left"), ("agg", agg, "right")):
            base = _named("curves").transform_calculate(
                series=alt.datum["series_" + col]).encode(
                x=x, y=alt.Y(f"{col}:Q", title=series_name,
                             axis=alt.Axis(orient=orient)),  # type: ignore[arg-type]
                color=color)
            dots = base.mark_circle(size=60).encode(
                opacity=alt.when(hover).then(alt.value(1.0)).otherwise(alt.value(0.0)),
                tooltip=tooltip)
            if col == "per":
                dots = dots.add_params(hover)
            sides.append(alt.layer(base.mark_line(strokeWidth=2), dots))
        return _finish([*sides, *_rule_layers(with_h=False)], 300, y="independent")
    if name == "vram":
        keys = list(VRAM_COLORS)
        bar = _named("bars").mark_bar(stroke="white").encode(
            x=alt.X("gb:Q", title=L("gb"), stack="zero"),
            color=alt.Color("name:N", title=None,
                            scale=alt.Scale(domain=[L(k) for k in keys],
                                            range=list(VRAM_COLORS.values())),
                            legend=alt.Legend(orient="bottom", columns=3, labelLimit=260)),
            order=alt.Order("order:Q"),
            tooltip=[alt.Tooltip("name:N", title=L("segment")),
                     alt.Tooltip("gb:Q", title=L("gb"), format=",.2f")])
        layers = [bar]
        vram_rules: list[tuple[str, str, list[int], Literal["left", "right"]]] = [
            ("v_usable", "#e45756", [1, 0], "right"), ("v_vram", "#666666", [4, 3], "left")]
        for ds, rule_color, dash, align in vram_rules:
            r = _named(ds)
            layers += [r.mark_rule(strokeWidth=3, color=rule_color, strokeDash=dash).encode(
                           x="x:Q", tooltip=[alt.Tooltip("label:N", title=" ")]),
                       r.mark_text(align=align, dx=-4 if align == "right" else 4,
                                   baseline="bottom", fontSize=11, color=rule_color).encode(
                           x="x:Q", y=alt.value(-4), text="label:N")]
        return _finish(layers, 60)
    if name == "ttft":
        keys = ["linear", "attention"]
        layers = _hover_lines(
            "hover_ttft", L("prompt_tokens"), L("ttft_s"), [L(k) for k in keys],
            [COLORS[k] for k in keys],
            [alt.Tooltip("series:N", title=L("series")),
             alt.Tooltip("x:Q", title=L("prompt_tokens"), format=",.0f"),
             alt.Tooltip("value:Q", title=L("ttft_s"), format=",.3f")])
        return _finish(layers + _rule_layers(), 300)
    if name == "cost":
        title = L("with_unit").format(what=L("cost"), unit=currency)
        layers = _hover_lines(
            "hover_cost", L("concurrency"), title, [L("cost")], [COLORS["cost"]],
            [alt.Tooltip("x:Q", title=L("concurrency"), format=",.0f"),
             alt.Tooltip("value:Q", title=title, format=",.3f"),
             alt.Tooltip("verdict:N", title=L("verdict"))], log_y=True)
        return _finish(layers + _rule_layers(), 300)
    if name == "roofline":
        keys = list(ROOF_COLORS)
        color = _legend_color("name", [L(k) for k in keys], list(ROOF_COLORS.values()))
        x = alt.X("intensity:Q", title=L("intensity"), scale=alt.Scale(type="log"))
        y = alt.Y("tflops:Q", title=L("tflops"), scale=alt.Scale(type="log"))
        hover = alt.selection_point(name="hover_roof", nearest=True, on="pointerover",
                                    fields=["intensity"], empty=False, clear="pointerout")
        base = _named("roof").encode(x=x, y=y, color=color, detail="series:N")
        tip = [alt.Tooltip("name:N", title=L("series")),
               alt.Tooltip("intensity:Q", title=L("intensity"), format=",.1f"),
               alt.Tooltip("tflops:Q", title=L("tflops"), format=",.1f"),
               alt.Tooltip("concurrency:Q", title=L("concurrency"), format=",.0f")]
        pts = _named("points")
        layers = [
            base.mark_line(strokeWidth=2),
            base.mark_circle(size=50).encode(
                opacity=alt.when(hover).then(alt.value(1.0)).otherwise(alt.value(0.0)),
                tooltip=tip).add_params(hover),
            _named("ridge").mark_rule(color=ROOF_COLORS["ridge"], strokeDash=[4, 3]).encode(
                x="intensity:Q", tooltip=[alt.Tooltip("label:N", title=L("ridge"))]),
            pts.mark_point(size=180, filled=True, shape="diamond", opacity=1).encode(
                x=x, y=y, color=color,
                tooltip=[alt.Tooltip("name:N", title=L("point")),
                         alt.Tooltip("intensity:Q", title=L("intensity"), format=",.1f"),
                         alt.Tooltip("tflops:Q", title=L("tflops"), format=",.1f"),
                         alt.Tooltip("roof_tflops:Q", title=L("roof"), format=",.1f")]),
            pts.mark_text(align="left", dx=8, dy=-8, fontSize=11).encode(
                x=x, y=y, text="label:N",
                color=alt.Color("name:N", legend=None)),
        ]
        return _finish(layers, 320)
    raise ValueError(f"unknown chart '{name}'; use one of {', '.join(ALL_CHARTS)}")


ALL_CHARTS: Final = ("step_time", "throughput", "vram", "ttft", "cost", "roofline")


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame -> JSON-safe records (NaN and inf become null), column by column."""
    cols: list[list[Any]] = []
    for name in df.columns:
        arr = df[name].to_numpy()
        if arr.dtype.kind == "f":
            values: list[Any] = arr.tolist()
            bad = ~np.isfinite(arr)
            if bad.any():
                for i in np.flatnonzero(bad):
                    values[i] = None
            cols.append(values)
        elif arr.dtype.kind in "iub":
            cols.append(arr.tolist())
        else:
            cols.append([None if v is None or (isinstance(v, float) and v != v) else str(v)
                         for v in arr.tolist()])
    names = [str(c) for c in df.columns]
    return [dict(zip(names, row, strict=True)) for row in zip(*cols, strict=True)]


def _rule(x: float, label: str, labels: Mapping[str, str]) -> pd.DataFrame:
    return pd.DataFrame({"x": [x], "label": [f"{label}{_l(labels, 'colon')}{x:,.4g}"]})


def _hrule(y: float, label: str, labels: Mapping[str, str]) -> pd.DataFrame:
    return pd.DataFrame({"y": [y], "label": [f"{label}{_l(labels, 'colon')}{y:,.4g}"]})


NO_RULE: Final = pd.DataFrame({"x": [], "y": [], "label": []})


def datasets(d: ChartData, labels: Mapping[str, str] = DEFAULT_LABELS
             ) -> dict[str, dict[str, pd.DataFrame]]:
    """The data each chart plots, by chart name and dataset name (translated series names)."""
    L = functools.partial(_l, labels)
    cv = d.curves
    x_max = float(cv["concurrency"].max())
    rules = {"v_chosen": _rule(d.concurrency, L("chosen"), labels),
             "v_cvram": _rule(d.c_vram, L("c_vram"), labels) if 0 < d.c_vram <= x_max else NO_RULE}
    n = len(cv)
    step = pd.DataFrame({
        "x": np.tile(cv["concurrency"].to_numpy(), 3),
        "series": np.repeat([L("bandwidth"), L("compute"), L("step")], n),
        "value": np.concatenate([cv["bandwidth_ms"], cv["compute_ms"], cv["step_ms"]]),
        "bound": np.tile(cv["bound"].to_numpy(), 3)})
    tput = pd.DataFrame({"x": cv["concurrency"], "per": cv["tok_s_per_request"],
                         "agg": cv["aggregate_tok_s"], "verdict": cv["verdict"],
                         "series_per": L("tok_s_per_request"),
                         "series_agg": L("aggregate_tok_s")})
    bars = d.vram.assign(name=d.vram["segment"].map(L), row=f"C = {d.concurrency:,}")
    tt = d.ttft
    m = len(tt)
    ttft = pd.DataFrame({"x": np.tile(tt["prompt_tokens"].to_numpy(), 2),
                         "series": np.repeat([L("linear"), L("attention")], m),
                         "value": np.concatenate([tt["linear_s"], tt["attention_s"]])})
    ok = np.isfinite(cv["cost_per_mtok"].to_numpy())
    cost = pd.DataFrame({"x": cv["concurrency"][ok], "series": L("cost"),
                         "value": cv["cost_per_mtok"][ok], "verdict": cv["verdict"][ok]})
    roof = d.roof.assign(name=d.roof["series"].map(L))
    pts = d.roof_points[d.roof_points["point"] != "ridge"]
    pts = pts.assign(name=pts["point"].map(L), label=pts["point"].map(L))
    ridge = d.roof_points[d.roof_points["point"] == "ridge"]
    ridge = ridge.assign(label=[f"{L('ridge')}{L('colon')}{d.ridge_flop_per_byte:,.0f} FLOP/B"])
    ridge_pt = ridge.assign(name=L("ridge"), point="ridge")
    return {
        "step_time": {"lines": step, **rules, "h_slo": _hrule(d.slo_tpot_ms, L("slo_tpot"), labels)},
        "throughput": {"curves": tput, **rules},
        "vram": {"bars": bars,
                 "v_usable": pd.DataFrame({"x": [d.usable_gb], "label": [
                     f"{L('usable')}{L('colon')}{d.usable_gb:,.1f} GB"]}),
                 "v_vram": pd.DataFrame({"x": [d.vram_gb], "label": [
                     f"{L('vram')}{L('colon')}{d.vram_gb:,.1f} GB"]})},
        "ttft": {"lines": ttft, "v_chosen": _rule(d.prompt_tokens, L("chosen_prompt"), labels),
                 "v_cvram": NO_RULE, "h_slo": _hrule(d.slo_ttft_s, L("slo_ttft"), labels)},
        "cost": {"lines": cost, **rules,
                 "h_slo": _hrule(d.slo_cost, L("slo_cost"), labels) if d.slo_cost > 0 else NO_RULE},
        "roofline": {"roof": roof, "points": pd.concat([pts, ridge_pt], ignore_index=True),
                     "ridge": ridge},
    }


def specs(d: ChartData, labels: Mapping[str, str] = DEFAULT_LABELS) -> dict[str, dict[str, Any]]:
    """Every Explorer chart as a complete Vega-Lite spec (structure from Altair, data filled
    in), by name in `ALL_CHARTS` order. Tooltips on every line point, rule and marker."""
    items = tuple(sorted((k, _l(labels, k)) for k in DEFAULT_LABELS))
    data = datasets(d, labels)
    out: dict[str, dict[str, Any]] = {}
    for name in ALL_CHARTS:
        spec = dict(_template(name, items, d.currency))
        spec["datasets"] = {k: _records(v) for k, v in data[name].items()}
        out[name] = spec
    return out


COMPARE_CHARTS: Final = ("step_ms", "aggregate_tok_s", "cost_per_mtok")
"""The curves Compare overlays (columns of `ChartData.curves`), by concurrency."""
_COMPARE_TITLES: Final = {"step_ms": "step_ms", "aggregate_tok_s": "aggregate_tok_s",
                          "cost_per_mtok": "cost"}


def compare_specs(current: ChartData, pinned: ChartData,
                  labels: Mapping[str, str] = DEFAULT_LABELS, height: int = 260
                  ) -> dict[str, dict[str, Any]]:
    """Compare: each of `COMPARE_CHARTS` for the current and the pinned what-if overlaid on one
    concurrency axis (current solid, pinned dashed), a dot at each one's chosen concurrency.
    Units as in `chart_data` (ms, tok/s, currency per M tokens); by name."""
    L = functools.partial(_l, labels)
    names = [L("current"), L("pinned")]
    out: dict[str, dict[str, Any]] = {}
    for y in COMPARE_CHARTS:
        frames, dots = [], []
        for name, d in zip(names, (current, pinned), strict=True):
            cv = d.curves
            ok = np.isfinite(cv[y].to_numpy())
            frames.append(pd.DataFrame({"x": cv["concurrency"][ok], "value": cv[y][ok],
                                        "series": name}))
            at = cv.iloc[[int(np.argmin(np.abs(cv["concurrency"].to_numpy() - d.concurrency)))]]
            dots.append(pd.DataFrame({"x": at["concurrency"], "value": at[y], "series": name}))
        title = L(_COMPARE_TITLES[y])
        if y == "cost_per_mtok":
            title = L("with_unit").format(what=title, unit=current.currency)
        tip = [alt.Tooltip("series:N", title=L("what_if")),
               alt.Tooltip("x:Q", title=L("concurrency"), format=",.0f"),
               alt.Tooltip("value:Q", title=title, format=",.3f")]
        color = _legend_color("series", names, [COLORS["bandwidth"], COLORS["compute"]])
        dash = alt.StrokeDash("series:N", legend=None,
                              scale=alt.Scale(domain=names, range=[[1, 0], [7, 4]]))
        enc = {"x": alt.X("x:Q", title=L("concurrency")),
               "y": alt.Y("value:Q", title=title, scale=alt.Scale(zero=True)), "color": color}
        lines = alt.Chart(pd.concat(frames, ignore_index=True)).mark_line(
            strokeWidth=2.5).encode(strokeDash=dash, tooltip=tip, **enc)
        points = alt.Chart(pd.concat(dots, ignore_index=True)).mark_circle(size=90).encode(
            tooltip=tip, **enc)
        out[y] = alt.layer(lines, points).properties(height=height).to_dict()
    return out


# ---------------------------------------------------------------------------------------------
# A request log's summary (issue 12: the Planner's "size from a log")


def log_length_chart(summary: LogSummary, *, prompt_label: str, output_label: str,
                     x_title: str, y_title: str) -> alt.Chart:
    """Prompt and output length histograms of a log (`capacity.fit.traffic`), on powers of two:
    one bar per bin (its lower edge in tokens), the two lengths side by side."""
    rows = [{"length": name, "from_tokens": b, "bin": f"{b:,}+", "requests": n}
            for name, part in ((prompt_label, summary.prompt), (output_label, summary.output))
            for b, n in zip(part.bins_tokens, part.counts, strict=True)]
    df = pd.DataFrame(rows)
    return alt.Chart(df).mark_bar().encode(  # type: ignore[no-any-return]
        x=alt.X("bin:N", title=x_title, sort=alt.SortField("from_tokens")),
        y=alt.Y("requests:Q", title=y_title),
        color=alt.Color("length:N", title=None, legend=alt.Legend(orient="bottom")),
        xOffset="length:N",
        tooltip=[alt.Tooltip("length:N"), alt.Tooltip("bin:N", title=x_title),
                 alt.Tooltip("requests:Q", title=y_title, format=",")],
    ).properties(height=260)


def log_arrivals_chart(summary: LogSummary, *, x_title: str, y_title: str) -> alt.Chart:
    """Mean requests per hour of the day, the busiest hour in red."""
    busiest = summary.busiest_hour_of_day
    df = pd.DataFrame({"hour": list(range(24)), "requests": list(summary.per_hour_of_day),
                       "busiest": [h == busiest for h in range(24)]})
    return alt.Chart(df).mark_bar().encode(  # type: ignore[no-any-return]
        x=alt.X("hour:O", title=x_title),
        y=alt.Y("requests:Q", title=y_title),
        color=alt.condition(alt.datum.busiest, alt.value(COLORS["c_vram"]),
                            alt.value(COLORS["bandwidth"])),
        tooltip=[alt.Tooltip("hour:O", title=x_title),
                 alt.Tooltip("requests:Q", title=y_title, format=",.1f")],
    ).properties(height=220)


# ---------------------------------------------------------------------------------------------
# The Planner's options and the chosen option's load curve


def options_chart(options: Sequence[Option], names: Sequence[str], *, x_title: str,
                  y_title: str) -> alt.LayerChart:
    """Cost per month against goodput (both on log scales), one point per option coloured by
    its GPU, `names` in the tooltips; the Pareto front (`pareto_front`) as a black line."""
    front = pareto_front(options)
    frame = pd.DataFrame([{
        "option": name, "gpu": o.gpu_name, "cost_per_month": o.cost_per_month,
        "goodput_req_s": o.capacity_rate_per_s, "binding": o.binding, "pareto": f,
        "rank": i + 1} for i, (o, name, f) in enumerate(zip(options, names, front, strict=True))])
    base = alt.Chart(frame).encode(
        x=alt.X("cost_per_month:Q", title=x_title, scale=alt.Scale(type="log")),
        y=alt.Y("goodput_req_s:Q", title=y_title, scale=alt.Scale(type="log")),
        tooltip=["rank", "option", alt.Tooltip("cost_per_month:Q", format=",.0f"),
                 alt.Tooltip("goodput_req_s:Q", format=".2f"), "binding"])
    points = base.mark_circle(size=45, opacity=0.6).encode(color=alt.Color("gpu:N", title="GPU"))
    front_line = base.transform_filter(alt.datum.pareto).mark_line(
        color="black", point=alt.OverlayMarkDef(color="black", size=70, shape="diamond"))
    return alt.LayerChart(layer=[points, front_line])


def ttft_curve_chart(curve: Sequence[CurvePoint], *, slo_ttft_ms: float,
                     design_rate_per_s: float, x_title: str, y_title: str,
                     legend_title: str) -> alt.LayerChart:
    """TTFT percentiles (p50, p90, p99) over the request rate (`load_curve`), TTFT on a log
    scale; the TTFT target as a red dashed rule, the design rate as a grey dotted one."""
    pts = pd.DataFrame([{"rate_per_s": c.rate_per_s, "percentile": f"p{round(q * 100)}",
                         "ttft_ms": c.ttft_ms[q]} for c in curve for q in (0.5, 0.9, 0.99)])
    lines = alt.Chart(pts).mark_line(point=True).encode(
        x=alt.X("rate_per_s:Q", title=x_title),
        y=alt.Y("ttft_ms:Q", title=y_title, scale=alt.Scale(type="log")),
        color=alt.Color("percentile:N", title=legend_title),
        tooltip=["percentile", alt.Tooltip("rate_per_s:Q", format=".2f"),
                 alt.Tooltip("ttft_ms:Q", format=",.0f")])
    slo_rule = alt.Chart(pd.DataFrame({"y": [slo_ttft_ms], "label": ["TTFT SLO"]})
                         ).mark_rule(color="red", strokeDash=[6, 3]).encode(y="y:Q")
    load_rule = alt.Chart(pd.DataFrame({"x": [design_rate_per_s]})).mark_rule(
        color="gray", strokeDash=[2, 2]).encode(x="x:Q")
    return alt.LayerChart(layer=[lines, slo_rule, load_rule])
