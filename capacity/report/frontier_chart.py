"""The buyer's chart (docs/frontier.md): throughput per GPU against interactivity, one line per
group's Pareto front, every point faint, measured points and a what-if on top, and a rule at
the interactivity the cost is read at. Altair; labels in the page's language
(`capacity.report.i18n`, the `fr_*` messages). Pure: no Streamlit here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

import altair as alt
import pandas as pd

from capacity.fit.frontier import AGGREGATED, DEPLOYMENTS, Frontier
from capacity.fit.reference import ReferenceSweep, load_reference, select
from capacity.report.i18n import engine_short, t

MEASURED_COLUMNS: Final = ("interactivity_tok_s_per_user", "throughput_tok_s_per_gpu", "label")
"""The columns of a DataFrame of measured (or what-if) points for `frontier_chart`."""
MAX_FAINT_POINTS: Final = 5000
"""Points drawn faint at most (the most productive of each group's concurrencies are kept):
a chart of every point of every engine would carry tens of thousands of rows."""


_DISAGG_LAYOUT: Final = re.compile(
    r"prefill TP(?P<tp>\d+) x (?P<per>\S+) per decode replica, KV (?P<ms>\S+) ms over (?P<link>.+)")
_EP_LAYOUT: Final = re.compile(
    r"EP(?P<ep>\d+), (?:DP attention|TP(?P<atp>\d+) attention)"
    r"(?:, (?P<red>\d+) redundant experts)? \((?:NVLink|(?P<nodes>\d+) nodes over the NIC)\)")


_POOLS_LAYOUT: Final = re.compile(
    r"(?P<decode>EP\d+, .*\)), prefill EP(?P<ep>\d+) x (?P<per>\S+) per decode deployment, "
    r"KV (?P<ms>\S+) ms over (?P<link>.+)")


def layout_text(layout: str, lang: str) -> str:
    """A point's layout in `lang` (the `fr_lay_*` messages): the disaggregated one
    (`capacity.fit.frontier_disagg`: prefill TP, prefill replicas per decode replica, the KV
    hand-over's ms and link), the wide-EP one (`EpLayout.describe`: EP degree, attention,
    redundant experts, NVLink or nodes over the NIC) and the EP-pools one
    (`frontier_ep.ep_pools_blocks`: the decode group's, then the prefill groups per decode
    group and the hand-over) are read back from their English; any other text is returned as
    it is."""
    if m := _DISAGG_LAYOUT.fullmatch(layout):
        return t("fr_lay_disagg", lang, **m.groupdict())
    if m := _POOLS_LAYOUT.fullmatch(layout):   # the decode EP group's layout, then the pools
        return t("fr_lay_pools", lang, **{**m.groupdict(),
                                          "decode": layout_text(m["decode"], lang)})
    if m := _EP_LAYOUT.fullmatch(layout):
        attn = (t("fr_lay_dp_attn", lang) if m["atp"] is None
                else t("fr_lay_tp_attn", lang, tp=m["atp"]))
        red = "" if m["red"] is None else t("fr_lay_redundant", lang, n=m["red"])
        net = t("fr_lay_nvlink", lang) if m["nodes"] is None else t("fr_lay_nic", lang,
                                                                     n=m["nodes"])
        return t("fr_lay_ep", lang, ep=m["ep"], attn=attn, red=red, net=net)
    return layout


def frontier_frame(fr: Frontier, *, front_only: bool = False,
                   lang: str | None = None) -> pd.DataFrame:
    """Every point (or the fronts' alone) as a DataFrame, one row per point: its configuration,
    figures, group key (`series`: GPU, engine, weights/KV, draft, deployment) and `on_front`;
    cost per M output tokens at the catalog price (F7); `gpus_paid`, the GPUs the throughput is
    shared by (a replica's, with a decode replica's prefill GPUs). `deployment_label`: the kind
    of deployment in `lang` (the `fr_dep_*` messages; the key itself without `lang`), and the
    style (dash) of a group not aggregated ends with it; `engine_label`: the engine's short name
    in `lang` (`engine_short`: 'chapter's engine', not its key 'chapter'; the key without
    `lang`), which the style begins with; `layout` in `lang` (`layout_text`; '-' for an
    aggregated point). Units: tok/s per user, tok/s per GPU, ms."""
    pt = fr.points
    dep_label = {d: t(f"fr_dep_{d.replace('-', '_')}", lang) if lang else d
                 for d in DEPLOYMENTS}
    lay = {x: (layout_text(x, lang) if lang else x) or "-" for x in set(pt.layout)}
    eng = {e: engine_short(e, lang) if lang else e for e in set(pt.engine)}
    df = pd.DataFrame({
        "gpu": pt.gpu, "gpu_name": pt.gpu_name, "engine": pt.engine,
        "engine_label": [eng[e] for e in pt.engine], "weights": pt.weights,
        "kv_dtype": pt.kv_dtype, "draft": [d or "-" for d in pt.draft], "tp": pt.tp,
        "n_gpus": pt.n_gpus, "gpus_paid": pt.n_gpus + pt.prefill_gpus,
        "deployment": pt.deployment, "deployment_label": [dep_label[d] for d in pt.deployment],
        "layout": [lay[x] for x in pt.layout], "concurrency": pt.concurrency,
        "interactivity_tok_s_per_user": pt.interactivity_tok_s_per_user,
        "throughput_tok_s_per_gpu": pt.throughput_tok_s_per_gpu, "ttft_ms": pt.ttft_ms,
        "price_per_gpu_hour": pt.price_per_gpu_hour, "on_front": pt.on_front,
        "group": pt.group})
    df["cost_per_mtok"] = df["price_per_gpu_hour"] / (df["throughput_tok_s_per_gpu"] * 3600.0) * 1e6
    df["precision"] = df["weights"] + "/" + df["kv_dtype"]
    df["style"] = df["engine_label"] + " " + df["precision"] + (" " + df["deployment_label"]).where(
        df["deployment"] != AGGREGATED, "")
    df["series"] = df["gpu"] + " " + df["style"] + df["draft"].where(df["draft"] == "-", "")
    if front_only:
        df = df[df["on_front"]]
    return df.sort_values(["group", "interactivity_tok_s_per_user"]).reset_index(drop=True)


def published_points(sweeps: Sequence[ReferenceSweep] | None = None, *,
                     model: str | None = None, gpu: str | None = None) -> pd.DataFrame:
    """Measured points for the chart from published sweeps (data/reference/published.csv,
    `capacity.fit.reference`; `model`, `gpu`: text a sweep's key or name contains): every level
    whose TPOT and aggregate output tok/s are both known, as interactivity = 1000 / TPOT and
    throughput per GPU = output tok/s / the sweep's GPUs, labelled with the sweep and its
    concurrency."""
    chosen = select(load_reference() if sweeps is None else sweeps, gpu=gpu, model=model)
    rows = [(1e3 / p.tpot_ms, p.output_tok_s / s.gpus, f"{s.label}, C={p.concurrency:g}")
            for s in chosen for p in s.points
            if p.tpot_ms is not None and p.output_tok_s is not None and p.tpot_ms > 0]
    return pd.DataFrame(rows, columns=list(MEASURED_COLUMNS))


def frontier_labels(lang: str = "en", currency: str = "") -> dict[str, str]:
    """The chart's axis titles, legends and tooltip names in `lang`."""
    keys = ("x", "y", "gpu", "style", "gpus", "tp", "weights", "kv", "engine", "draft",
            "concurrency", "ttft", "cost", "measured", "current", "target", "point",
            "deployment", "layout")
    out = {k: t(f"fr_{k}", lang) for k in keys}
    if currency:
        out["cost"] = t("with_paren", lang, what=out["cost"], detail=currency)
    out["colon"] = t("colon", lang)
    return out


LEGEND_LABEL_PX: Final = 320
"""Legend labels' width at most, px, with disaggregated or wide-EP groups (Vega's default,
160, cuts 'vllm fp8/fp16 disaggregated prefill/decode')."""
GPU_SCHEME: Final = "tableau20"
"""The GPUs' colour scheme: 20 colours. The theme's 10 (Streamlit's, Vega's category10) gave
two GPUs of the Explorer's 14 (its own against every data-centre GPU) one colour: A10 and L4,
A100 80GB PCIe and MI300X, ... could not be told apart."""
MAX_ROWS: Final = 5000
"""Rows of one data set at most: Altair's default data transformer refuses more."""


def front_pieces(front: pd.DataFrame, limit: int = MAX_ROWS) -> list[pd.DataFrame]:
    """`front` (rows sorted by `group`, as `frontier_frame` gives them) in pieces of whole
    groups of at most `limit` rows each, in order: one piece, `front` itself, up to `limit`.
    The chart draws the fronts whole, one layer per piece with the same marks, so a line is
    never cut: with disaggregated points (a front point per decode x prefill shape and
    concurrency) the Planner's fronts over every GPU and format pass 5,000 rows (6,943 for
    Llama-3.1-70B). A group is one GPU's Pareto front, hundreds of points; one over `limit`
    stays whole in its own piece."""
    if len(front) <= limit:
        return [front]
    pieces: list[pd.DataFrame] = []
    cur: list[pd.DataFrame] = []
    n = 0
    for _, g in front.groupby("group", sort=False):
        if cur and n + len(g) > limit:
            pieces.append(pd.concat(cur))
            cur, n = [], 0
        cur.append(g)
        n += len(g)
    pieces.append(pd.concat(cur))
    return pieces


def _faint(df: pd.DataFrame) -> pd.DataFrame:
    """At most MAX_FAINT_POINTS rows: the fronts first, then the others by throughput."""
    if len(df) <= MAX_FAINT_POINTS:
        return df
    ranked = df.sort_values(["on_front", "throughput_tok_s_per_gpu"], ascending=False)
    return ranked.head(MAX_FAINT_POINTS)


def frontier_chart(fr: Frontier, *, lang: str = "en", interactivity: float | None = None,
                   current: Mapping[str, Any] | None = None,
                   measured: pd.DataFrame | None = None, width: int = 640,
                   height: int = 420) -> alt.LayerChart:
    """The chart: every point faint (colour by GPU), each group's front as a line (colour by
    GPU, dash by engine and precision) with its points and a tooltip of the configuration,
    `measured` points (MEASURED_COLUMNS, e.g. `published_points`) as black diamonds, the
    `current` what-if (a mapping with MEASURED_COLUMNS' keys) as a red star, and a vertical rule
    at `interactivity` (tok/s per user). Layers in that order (the lines, then their points,
    one layer per piece of `front_pieces`: one up to MAX_ROWS); absent parts are left out. With
    disaggregated or wide-EP groups the legend's style names the kind of deployment and the
    tooltip adds it, its layout and the GPUs paid (a decode replica's prefill GPUs included)."""
    lab = frontier_labels(lang, fr.inputs.currency)
    df = frontier_frame(fr, lang=lang)
    kinds = bool((df["deployment"] != AGGREGATED).any())
    front = df[df["on_front"]].rename(columns={"gpu_name": lab["gpu"], "style": lab["style"]})
    x = alt.X("interactivity_tok_s_per_user:Q", title=lab["x"])
    y = alt.Y("throughput_tok_s_per_gpu:Q", title=lab["y"])
    color = alt.Color(f"{lab['gpu']}:N", title=lab["gpu"], scale=alt.Scale(scheme=GPU_SCHEME))
    tips = [alt.Tooltip(f"{lab['gpu']}:N"), alt.Tooltip("tp:Q", title=lab["tp"]),
            (alt.Tooltip("gpus_paid:Q", title=lab["gpus"], format=".2f") if kinds
             else alt.Tooltip("tp:Q", title=lab["gpus"])),
            *([alt.Tooltip("deployment_label:N", title=lab["deployment"]),
               alt.Tooltip("layout:N", title=lab["layout"])] if kinds else []),
            alt.Tooltip("weights:N", title=lab["weights"]),
            alt.Tooltip("kv_dtype:N", title=lab["kv"]), alt.Tooltip("engine_label:N", title=lab["engine"]),
            alt.Tooltip("draft:N", title=lab["draft"]),
            alt.Tooltip("concurrency:Q", title=lab["concurrency"]),
            alt.Tooltip("interactivity_tok_s_per_user:Q", title=lab["x"], format=".1f"),
            alt.Tooltip("throughput_tok_s_per_gpu:Q", title=lab["y"], format=",.0f"),
            alt.Tooltip("ttft_ms:Q", title=lab["ttft"], format=",.0f"),
            alt.Tooltip("cost_per_mtok:Q", title=lab["cost"], format=",.3f")]
    faint = _faint(df).rename(columns={"gpu_name": lab["gpu"]})
    pieces = front_pieces(front)
    layers: list[Any] = [
        alt.Chart(faint).mark_circle(size=12, opacity=0.12).encode(
            x=x, y=y, color=color),
        *(alt.Chart(piece).mark_line(strokeWidth=1.5).encode(
            x=x, y=y, color=color, strokeDash=alt.StrokeDash(
                f"{lab['style']}:N", title=lab["style"],
                # a style that names its kind of deployment is long: not cut at Vega's 160 px
                legend=alt.Legend(labelLimit=LEGEND_LABEL_PX) if kinds else alt.Undefined),
            detail="series:N", order="interactivity_tok_s_per_user:Q") for piece in pieces),
        *(alt.Chart(piece).mark_circle(size=36).encode(x=x, y=y, color=color, tooltip=tips)
          for piece in pieces),
    ]
    if measured is not None and len(measured):
        m = measured.assign(kind=lab["measured"])
        layers.append(alt.Chart(m).mark_point(shape="diamond", size=90, filled=True,
                                              color="black").encode(
            x=x, y=y, tooltip=[alt.Tooltip("label:N", title=lab["measured"]),
                               alt.Tooltip("interactivity_tok_s_per_user:Q", title=lab["x"],
                                           format=".1f"),
                               alt.Tooltip("throughput_tok_s_per_gpu:Q", title=lab["y"],
                                           format=",.0f")]))
    if current is not None:
        c = pd.DataFrame([{k: current.get(k, "") for k in MEASURED_COLUMNS}])
        layers.append(alt.Chart(c).mark_point(shape="cross", size=420, filled=True, color="red",
                                              stroke="black", strokeWidth=1.5).encode(
            x=x, y=y, tooltip=[alt.Tooltip("label:N", title=lab["current"])]))
    if interactivity is not None:
        rule = pd.DataFrame([{"interactivity_tok_s_per_user": interactivity,
                              "label": f"{lab['target']}{lab['colon']}{interactivity:g}"}])
        layers.append(alt.Chart(rule).mark_rule(strokeDash=[4, 4], color="gray").encode(
            x=x, tooltip=[alt.Tooltip("label:N", title=lab["target"])]))
    # the faint dots share the GPU legend with the fronts: its symbols drawn opaque
    return cast(alt.LayerChart, alt.layer(*layers).properties(width=width, height=height)
                .configure_legend(symbolOpacity=1).interactive())
