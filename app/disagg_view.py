"""The Explorer's view of two pools (issue 27, docs/disaggregation.md "In the Explorer"): the
what-if run disaggregated, a prefill pool and a decode pool that hand the KV over a link.

One function, `explorer_disagg`, draws it into the page's section (`app.layout.section`), which
runs only while open (`on_change="rerun"`: a closed one costs the page nothing, and the page
imports this module only once it is open). Its inputs are the Explorer's
`dis_*` fields (`capacity.report.urlstate`: in the shareable URL, 0 or '' = the default); every
number comes from `capacity.report.disagg_chart.explorer_pools` (the planner's own functions,
`capacity.plan.disagg_pools`), cached here with `app.cache.cached`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from app import cache
from app.explorer_view import POOLS_SECTION
from app.layout import Metric, metric_row
from app.state import key
from capacity.catalog.loader import Catalog
from capacity.errors import CapacityError
from capacity.plan.disagg_pools import EVENT_REQUESTS
from capacity.report.disagg_chart import (
    CHARTS,
    ExplorerPools,
    explorer_pools,
    explorer_pools_charts,
)
from capacity.report.i18n import error_text, t
from capacity.report.urlstate import ExplorerState

EXPANDER_KEY = POOLS_SECTION
"""The section (its open state in `st.session_state`)."""
CHART_HEIGHT = 300


@cache.cached(max_entries=32)
def pools_of(version: str, state: ExplorerState, ttft_s: float, tpot_ms: float,
             design_rate_per_s: float | None = None) -> ExplorerPools:
    """`explorer_pools` for the what-if: at the aggregated deployment's design load
    (`design_rate_per_s`, the deployment box's) unless a rate is set; its own TTFT and TPOT
    for a closed loop's rate where no deployment was built."""
    del version
    return explorer_pools(state, cache.catalog(), ttft_s=ttft_s, tpot_ms=tpot_ms,
                          design_rate_per_s=design_rate_per_s)


@cache.cached(max_entries=32)
def charts_of(version: str, state: ExplorerState, ttft_s: float, tpot_ms: float,
              lang: str, design_rate_per_s: float | None = None) -> dict[str, dict[str, Any]]:
    """The charts' Vega-Lite specs (`explorer_pools_charts`), their widths left to the page."""
    del version
    specs = {}
    for name, chart in explorer_pools_charts(pools_of(state, ttft_s, tpot_ms, design_rate_per_s),
                                             lang).items():
        spec: dict[str, Any] = chart.to_dict()
        spec.pop("width", None)
        specs[name] = spec
    return specs


def ms(v: float) -> str:
    """A time in ms, or 'saturated' where the queue never settles (inf)."""
    return f"{v:,.1f} ms" if math.isfinite(v) else "∞"


def share(v: float) -> str:
    return f"{v:.0%}" if math.isfinite(v) else "∞"


def key_metrics(p: ExplorerPools, lang: str) -> list[Metric]:
    """TTFT and TPOT at the SLO quantile, each pool's and the link's utilisation, the
    rate-matched ratio."""
    f, lay = p.figures, p.layout
    pct = f"p{round(lay.quantile * 100)}"
    matched = ("-" if p.matched is None else f"{p.matched[0]}P+{p.matched[1]}D")
    return [Metric(t("pd_m_ttft", lang, pct=pct), ms(f.ttft_ms)),
            Metric(t("pd_m_tpot", lang, pct=pct), ms(f.tpot_ms)),
            Metric(t("pd_rho_prefill", lang), share(f.prefill_utilization),
                   help=t("help_pd_rho_prefill", lang)),
            Metric(t("pd_rho_decode", lang), share(f.decode_utilization),
                   help=t("help_pd_rho_decode", lang, b=f"{f.decode_batch:,.1f}",
                          slots=lay.decode.slots)),
            Metric(t("pd_rho_link", lang), share(f.link_utilization),
                   help=t("help_pd_rho_link", lang)),
            Metric(t("pd_m_matched", lang), matched, help=t("help_pd_matched", lang))]


def ttft_frame(p: ExplorerPools, lang: str) -> pd.DataFrame:
    """TTFT at the SLO quantile in its parts (ms, as text to one decimal: '∞' where
    saturated), and their sum."""
    f = p.figures
    parts = (("pd_part_queue", f.prefill_queue_ms), ("pd_part_prefill", f.prefill_ms),
             ("pd_part_transfer", f.transfer_ms), ("pd_part_wait", f.link_wait_ms),
             ("pd_part_first", f.first_step_ms),
             *((("pd_part_request", f.request_ms),) if f.request_ms > 0 else ()),
             ("pd_part_total", f.ttft_ms))
    return pd.DataFrame({t("pd_col_part", lang): [t(k, lang) for k, _ in parts],
                         t("pd_col_ms", lang): [f"{v:,.1f}" if math.isfinite(v) else "∞"
                                                for _, v in parts]})


def _tp_choice(name: str, sizes: tuple[int, ...]) -> None:
    """Before a TP selectbox is drawn: a stored size it does not offer goes back to 0."""
    if int(st.session_state.get(key(name), 0)) not in (0, *sizes):
        st.session_state[key(name)] = 0


def _inputs(state: ExplorerState, catalog: Catalog, sizes: tuple[tuple[int, ...],
            tuple[int, ...]], lang: str) -> None:
    """The panel's widgets (keys `ex_dis_*`: the Explorer's state, in its URL)."""
    gpu = catalog.gpus[state.gpu].name
    _tp_choice("dis_ptp", sizes[0])
    _tp_choice("dis_dtp", sizes[1])
    top = st.columns(3)
    top[0].number_input(t("pd_rate", lang), min_value=0.0, max_value=1e6, step=0.5,
                        format="%.3f", key=key("dis_rate"), help=t("help_pd_rate", lang))
    top[1].number_input(t("pd_eff", lang), min_value=0.0, max_value=1.0, step=0.05,
                        format="%.2f", key=key("dis_eff"), help=t("help_pd_eff", lang))
    top[2].number_input(t("pd_lat", lang), min_value=0.0, max_value=10_000.0, step=0.5,
                        format="%.1f", key=key("dis_lat_ms"), help=t("help_pd_lat", lang))
    same_tp = t("pd_tp_same", lang, tp=state.tp)
    pre, c = st.columns(3), st.columns(3)  # a grid: the prefill pool, then the decode pool
    pre[0].selectbox(t("pd_ptp", lang, gpu=gpu), (0, *sizes[0]), key=key("dis_ptp"),
                     format_func=lambda v: same_tp if v == 0 else f"TP {v}")
    pre[1].number_input(t("pd_px", lang), min_value=0, max_value=4096, step=1,
                        key=key("dis_px"), help=t("help_pd_counts", lang))
    c[0].selectbox(t("pd_dgpu", lang), ("", *sorted(catalog.gpus)), key=key("dis_dgpu"),
                   format_func=lambda g: t("pd_gpu_same", lang, gpu=gpu) if not g
                   else catalog.gpus[g].name)
    c[1].selectbox(t("pd_dtp", lang), (0, *sizes[1]), key=key("dis_dtp"),
                   format_func=lambda v: same_tp if v == 0 else f"TP {v}")
    c[2].number_input(t("pd_dy", lang), min_value=0, max_value=4096, step=1,
                      key=key("dis_dy"), help=t("help_pd_counts", lang))


def explorer_disagg(box: DeltaGenerator, state: ExplorerState, figures: Mapping[str, Any],
                    lang: str, design_rate_per_s: float | None = None) -> None:
    """The Explorer's section, drawn into its open expander `box`: the what-if as a prefill
    pool and a decode pool, their figures at a request rate (an entered one, the design load,
    else the aggregated deployment's, `design_rate_per_s`) and the chart of TTFT and TPOT
    against the rate."""
    catalog = cache.catalog()
    with box:
        st.caption(t("pd_help", lang))
        ttft_s, tpot_ms = float(figures["ttft_s"]), float(figures["step_ms"])
        try:
            p = pools_of(state, ttft_s, tpot_ms, design_rate_per_s)
        except CapacityError as exc:
            # the inputs stay on screen to be fixed: the TP choices of the planner's sizes
            _inputs(state, catalog, ((1, 2, 4, 8), (1, 2, 4, 8)), lang)
            st.warning(t("pd_error", lang, msg=error_text(exc, lang)), icon=":material/error:")
            return
        _inputs(state, catalog, (p.prefill_sizes, p.decode_sizes), lang)
        lay, f = p.layout, p.figures
        st.markdown(t("pd_rate_" + p.rate_source, lang, rate=f"{p.rate_per_s:,.3g}",
                      c=f"{state.c:,}"))
        st.markdown(t("pd_layout", lang, ratio=lay.ratio, x=lay.prefill_replicas,
                      ptp=lay.prefill.tp, pgpu=lay.prefill.gpu_name, y=lay.decode_replicas,
                      dtp=lay.decode.tp, dgpu=lay.decode.gpu_name, n=lay.n_gpus)
                    + " " + t("pd_link_" + ("up" if lay.link.scale_up else "out"), lang,
                              kind=t("pd_kind_" + lay.link.kind.replace("-", "_"), lang),
                              send=f"{lay.link.send_gb_s:,.4g}",
                              recv=f"{lay.link.recv_gb_s:,.4g}"))
        if p.matched is None:
            st.warning(t("pd_no_match", lang, rate=f"{p.rate_per_s:,.3g}"),
                       icon=":material/warning:")
        metric_row(key_metrics(p, lang), key="pd_numbers")
        verdict = [t("pd_ok_ttft" if f.meets_ttft else "pd_bad_ttft", lang,
                     slo=f"{lay.ttft_slo_ms:g}"),
                   t("pd_ok_tpot" if f.meets_tpot else "pd_bad_tpot", lang,
                     slo=f"{lay.tpot_slo_ms:g}")]
        st.markdown(" ".join(verdict))
        left, right = st.columns([2, 3])
        frame = ttft_frame(p, lang)
        left.dataframe(frame, hide_index=True, key="pd_ttft_parts", width="stretch")
        sat = p.curve.saturation
        right.caption(t("pd_caps", lang, cp=f"{f.prefill_capacity_per_s:,.3g}",
                        cd=f"{f.decode_capacity_per_s:,.3g}",
                        sp=f"{sat.prefill_per_s:,.3g}", sd=f"{sat.decode_per_s:,.3g}",
                        sl=f"{sat.link_per_s:,.3g}"))
        right.caption(t("pd_sum_note", lang))
        specs = charts_of(state, ttft_s, tpot_ms, lang, design_rate_per_s)
        for col, name in zip(st.columns(2), CHARTS, strict=True):
            col.vega_lite_chart(specs[name], width="stretch", height=CHART_HEIGHT,
                                key=f"pd_chart_{name}")
        st.caption(t("pd_chart_note", lang, n=len(p.events), k=EVENT_REQUESTS))
