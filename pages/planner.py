"""Planner page: daily users (or peak concurrency) and SLOs -> ranked GPU options, charts, quote.

Draws only: every number comes from `capacity.planner`, `capacity.queueing` and `capacity.quote`.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import streamlit as st

from app.bootstrap import ensure_navigation
from app.state import init_lang
from capacity.catalog import Catalog, default_catalog
from capacity.errors import CapacityError
from capacity.planner import (
    CurvePoint,
    Option,
    Plan,
    PlanInputs,
    Slo,
    explorer_state,
    load_curve,
    pareto_front,
    plan,
    simulate_option,
)
from capacity.queueing import QueueResult
from capacity.quote import quote_markdown, quote_pdf
from capacity.urlstate import explorer_url
from capacity.workload import Workload

ensure_navigation()

L: dict[str, dict[str, str]] = {
    "title": {"en": "Planner: which card, how many, what it costs",
              "zh": "规划:选什么卡、几张、多少钱"},
    "intro": {"en": "Daily users and SLOs in; ranked GPU options out, each with the constraint "
                    "that binds. Peak concurrency is not daily users: the peak arrival rate "
                    "times the request duration is (Little's law).",
              "zh": "输入日活和 SLO,输出排好序的 GPU 方案及其最紧约束。峰值并发不是日活:"
                    "峰值到达率乘以请求时长才是(利特尔法则)。"},
    "model": {"en": "Model and weights", "zh": "模型与权重格式"},
    "mode": {"en": "Load given as", "zh": "负载输入方式"},
    "mode_dau": {"en": "daily users", "zh": "日活"},
    "mode_conc": {"en": "peak concurrency", "zh": "峰值并发"},
    "dau": {"en": "Daily active users", "zh": "日活用户"},
    "rpu": {"en": "Requests per user per day", "zh": "每用户每日请求"},
    "share": {"en": "Share of daily requests in the peak", "zh": "峰值时段请求占比"},
    "hours": {"en": "Peak window, hours", "zh": "峰值时长(小时)"},
    "conc": {"en": "Peak concurrency (requests in flight)", "zh": "峰值并发(在途请求)"},
    "ctx": {"en": "Context, tokens", "zh": "上下文(token)"},
    "out": {"en": "Output tokens per request", "zh": "每请求输出 token"},
    "ttft": {"en": "TTFT SLO, ms", "zh": "首字 SLO(ms)"},
    "tpot": {"en": "TPOT SLO, ms", "zh": "每 token SLO(ms)"},
    "pct": {"en": "SLO percentile", "zh": "SLO 分位"},
    "headroom": {"en": "Headroom on the peak", "zh": "峰值余量"},
    "space": {"en": "Search space and engine", "zh": "搜索范围与引擎"},
    "gpus": {"en": "GPUs", "zh": "GPU"},
    "maxg": {"en": "Most GPUs per option", "zh": "每方案最多 GPU 数"},
    "kv": {"en": "KV precisions", "zh": "KV 精度"},
    "tp": {"en": "Allow tensor parallel", "zh": "允许张量并行"},
    "currency": {"en": "Currency", "zh": "币种"},
    "util": {"en": "gpu_memory_utilization", "zh": "gpu_memory_utilization"},
    "mfu": {"en": "Prefill MFU", "zh": "Prefill MFU"},
    "best": {"en": "Recommendation", "zh": "推荐"},
    "month": {"en": "per month", "zh": "每月"},
    "mtok": {"en": "per M output tokens (SLO capacity)", "zh": "每百万输出 token(满载)"},
    "options": {"en": "Ranked options ({n} meet every constraint, {m} evaluated)",
                "zh": "排序方案({n} 个满足全部约束,共评估 {m} 个)"},
    "none": {"en": "No configuration meets every constraint; the reasons are below.",
             "zh": "没有配置满足全部约束,原因见下。"},
    "rejected": {"en": "Ruled out", "zh": "被排除"},
    "near": {"en": "Cheaper, but short of memory", "zh": "更便宜但显存不够"},
    "chart_cost": {"en": "Cost vs SLO-feasible goodput (Pareto front marked)",
                   "zh": "成本 vs 满足 SLO 的吞吐(标出帕累托前沿)"},
    "chosen": {"en": "Option to inspect", "zh": "查看方案"},
    "chart_ttft": {"en": "TTFT percentiles vs arrival rate (discrete-event model)",
                   "zh": "首字延迟分位数 vs 到达率(离散事件模型)"},
    "sim": {"en": "Event model at the design load: TTFT p50/p90/p99 {a:.0f}/{b:.0f}/{c:.0f} ms, "
                  "TPOT p50/p90/p99 {d:.1f}/{e:.1f}/{f:.1f} ms, {ok:.0%} meet both SLOs.",
            "zh": "设计负载下的离散事件模型:首字 p50/p90/p99 {a:.0f}/{b:.0f}/{c:.0f} ms,"
                  "每 token p50/p90/p99 {d:.1f}/{e:.1f}/{f:.1f} ms,{ok:.0%} 同时满足两项 SLO。"},
    "explorer": {"en": "Open in Explorer", "zh": "在 Explorer 中打开"},
    "quote_md": {"en": "Download quote (Markdown)", "zh": "下载报价(Markdown)"},
    "quote_pdf": {"en": "Download quote (PDF)", "zh": "下载报价(PDF)"},
    "error": {"en": "Cannot plan these inputs: {msg}", "zh": "无法规划:{msg}"},
    "col_option": {"en": "option", "zh": "方案"},
    "col_month": {"en": "per month", "zh": "每月"},
    "col_mtok": {"en": "per M tok", "zh": "每百万 token"},
    "col_binding": {"en": "binding", "zh": "最紧约束"},
    "col_memory": {"en": "memory", "zh": "显存"},
    "col_link": {"en": "Explorer", "zh": "Explorer"},
    "reason_memory": {"en": "memory", "zh": "显存"},
    "reason_slots": {"en": "slots", "zh": "槽位"},
    "reason_ttft": {"en": "TTFT", "zh": "首字"},
    "reason_tpot": {"en": "TPOT", "zh": "每 token"},
    "reason_throughput": {"en": "throughput", "zh": "吞吐"},
}

CTX_CHOICES = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]


@st.cache_data(show_spinner=False)
def _catalog() -> Catalog:
    return default_catalog()


@st.cache_data(show_spinner=False)
def _plan(inp: PlanInputs) -> Plan:
    return plan(inp, _catalog())


@st.cache_data(show_spinner=False)
def _curve(inp: PlanInputs, o: Option) -> list[CurvePoint]:
    return load_curve(inp, o, catalog=_catalog(), points=10, n_requests=400)


@st.cache_data(show_spinner=False)
def _sim(inp: PlanInputs, o: Option) -> QueueResult:
    return simulate_option(inp, o, _catalog(), n_requests=1000)


@st.cache_data(show_spinner=False)
def _quotes(p: Plan, sim: QueueResult | None, lang: str) -> tuple[str, bytes]:
    return (quote_markdown(p, lang=lang, simulation=sim, catalog=_catalog()),
            quote_pdf(p, lang=lang, simulation=sim, catalog=_catalog()))


lang = init_lang()  # the app's sidebar switch (or ?lang= on a shared link)


def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
    return L[k][lang].format(**kw)


st.title(T("title"))
st.caption(T("intro"))

catalog = _catalog()
variants = catalog.variant_keys()
c1, c2, c3 = st.columns(3)
with c1:
    model = st.selectbox(T("model"), variants, index=variants.index("qwen3.5-9b-awq"),
                         key="planner_model")
    mode = st.radio(T("mode"), ["dau", "conc"], horizontal=True, key="planner_mode",
                    format_func=lambda m: T("mode_" + m))
    if mode == "dau":
        dau = st.number_input(T("dau"), min_value=1, value=500, step=50, key="planner_dau")
        rpu = st.number_input(T("rpu"), min_value=0.1, value=20.0, key="planner_rpu")
        share = st.slider(T("share"), 0.05, 1.0, 0.3, 0.05, key="planner_share")
        hours = st.number_input(T("hours"), min_value=0.25, max_value=24.0, value=2.0,
                                step=0.25, key="planner_hours")
        conc = None
    else:
        conc = st.number_input(T("conc"), min_value=1, value=50, key="planner_conc")
        dau, rpu, share, hours = None, 20.0, 0.3, 2.0
with c2:
    ctx = st.selectbox(T("ctx"), CTX_CHOICES, index=CTX_CHOICES.index(8192),
                       key="planner_ctx")
    out_tokens = st.number_input(T("out"), min_value=1, value=256, key="planner_out")
    headroom = st.slider(T("headroom"), 0.0, 1.0, 0.2, 0.05, key="planner_headroom")
with c3:
    slo_ttft = st.number_input(T("ttft"), min_value=10.0, value=2000.0, step=100.0,
                               key="planner_ttft")
    slo_tpot = st.number_input(T("tpot"), min_value=1.0, value=50.0, step=5.0,
                               key="planner_tpot")
    pct = st.select_slider(T("pct"), [50, 75, 90, 95, 99], value=90, key="planner_pct")

with st.expander(T("space")):
    s1, s2, s3 = st.columns(3)
    gpu_keys = sorted(catalog.gpus)
    with s1:
        gpus = st.multiselect(T("gpus"), gpu_keys, default=gpu_keys, key="planner_gpus",
                              format_func=lambda k: catalog.gpus[k].name)
        max_gpus = st.slider(T("maxg"), 1, 16, 16, key="planner_maxg")
    with s2:
        kv = st.multiselect(T("kv"), ["fp16", "fp8"], default=["fp16", "fp8"],
                            key="planner_kv")
        allow_tp = st.checkbox(T("tp"), value=True, key="planner_tp")
    with s3:
        currency = st.radio(T("currency"), ["CNY", "USD"], horizontal=True,
                            key="planner_currency")
        util = st.slider(T("util"), 0.5, 1.0, 0.9, 0.01, key="planner_util")
        mfu = st.slider(T("mfu"), 0.05, 1.0, 0.3, 0.05, key="planner_mfu")

try:
    wl = Workload(daily_active_users=None if dau is None else float(dau),
                  requests_per_user_per_day=float(rpu), peak_share=float(share),
                  peak_hours=float(hours), peak_concurrency=None if conc is None else float(conc),
                  context_tokens=int(ctx), output_tokens=int(out_tokens),
                  headroom=float(headroom))
    inputs = PlanInputs(model=model, workload=wl,
                        slo=Slo(ttft_ms=float(slo_ttft), tpot_ms=float(slo_tpot),
                                quantile=pct / 100.0),
                        gpus=tuple(gpus) if gpus else None, max_gpus=int(max_gpus),
                        kv_dtypes=tuple(kv) or ("fp16",), allow_tp=bool(allow_tp),
                        currency=currency, util=float(util), mfu=float(mfu))  # type: ignore[arg-type]
    result = _plan(inputs)
except CapacityError as exc:
    st.error(T("error", msg=str(exc)))
    st.stop()

cur = inputs.currency
best = result.best


def money(x: float) -> str:
    return "-" if not math.isfinite(x) else (f"{cur} {x:,.0f}" if x >= 100 else f"{cur} {x:.2f}")


def link(o: Option) -> str:
    return explorer_url(explorer_state(inputs, o, catalog, lang))


st.subheader(T("best"))
if best is None:
    st.warning(T("none"))
else:
    st.markdown(f"### {best.label}")
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(T("month"), money(best.cost_per_month))
    m2.metric(T("mtok"), money(best.cost_per_mtok))
    m3.metric(f"TTFT / TPOT p{int(pct)}", f"{best.ttft_ms / 1e3:.2f} s / {best.tpot_ms:.0f} ms")
    m4.metric(T("col_binding"), f"{T('reason_' + best.binding)} ({best.binding_ratio:.0%})")

if result.options:
    st.subheader(T("options", n=len(result.options), m=result.evaluated))
    shown = result.options[:30]
    q = int(pct)
    table = pd.DataFrame([{
        "#": i + 1, T("col_option"): o.label, T("col_month"): o.cost_per_month,
        T("col_mtok"): o.cost_per_mtok, f"TTFT p{q} ms": round(o.ttft_ms),
        f"TPOT p{q} ms": round(o.tpot_ms, 1), T("col_memory"): o.memory_verdict,
        T("col_binding"): T("reason_" + o.binding), T("col_link"): link(o)}
        for i, o in enumerate(shown)])
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        T("col_link"): st.column_config.LinkColumn(T("col_link"),
                                                   display_text=T("explorer")),
        T("col_month"): st.column_config.NumberColumn(format=f"{cur} %.0f"),
        T("col_mtok"): st.column_config.NumberColumn(format=f"{cur} %.2f")})

if result.rejected:
    st.subheader(T("rejected"))
    st.markdown("\n".join(
        f"- **{r.gpu_name}**: {', '.join(T('reason_' + x) for x in r.reasons)} - {r.detail}"
        for r in result.rejected))
if result.near_misses:
    st.subheader(T("near"))
    st.markdown("\n".join(
        f"- {m.option.label}: " + "; ".join(f.description for f in m.fixes)
        for m in result.near_misses))

if result.options:
    opts = result.options[:200]
    front = pareto_front(opts)
    frame = pd.DataFrame([{
        "option": o.label, "gpu": o.gpu_name, "cost_per_month": o.cost_per_month,
        "goodput_req_s": o.capacity_rate_per_s, "binding": o.binding, "pareto": f,
        "rank": i + 1} for i, (o, f) in enumerate(zip(opts, front, strict=True))])
    st.subheader(T("chart_cost"))
    base = alt.Chart(frame).encode(
        x=alt.X("cost_per_month:Q", title=f"{cur} / month", scale=alt.Scale(type="log")),
        y=alt.Y("goodput_req_s:Q", title="SLO-feasible goodput, req/s",
                scale=alt.Scale(type="log")),
        tooltip=["rank", "option", alt.Tooltip("cost_per_month:Q", format=",.0f"),
                 alt.Tooltip("goodput_req_s:Q", format=".2f"), "binding"])
    points = base.mark_circle(size=45, opacity=0.6).encode(color=alt.Color("gpu:N", title="GPU"))
    front_line = base.transform_filter(alt.datum.pareto).mark_line(
        color="black", point=alt.OverlayMarkDef(color="black", size=70, shape="diamond"))
    st.altair_chart(alt.layer(points, front_line), width="stretch")

    labels = [o.label for o in result.options[:30]]
    chosen_label = st.selectbox(T("chosen"), labels, key="planner_chosen")
    chosen = result.options[labels.index(chosen_label)]
    st.link_button(T("explorer"), link(chosen))
    try:
        sim = _sim(inputs, chosen)
        curve = _curve(inputs, chosen)
    except CapacityError as exc:
        st.error(T("error", msg=str(exc)))
        st.stop()
    st.caption(T("sim", a=sim.ttft_ms[0.5], b=sim.ttft_ms[0.9], c=sim.ttft_ms[0.99],
                 d=sim.tpot_ms[0.5], e=sim.tpot_ms[0.9], f=sim.tpot_ms[0.99],
                 ok=sim.slo_met_share))
    pts = pd.DataFrame([{"rate_per_s": c.rate_per_s, "percentile": f"p{round(qq * 100)}",
                         "ttft_ms": c.ttft_ms[qq]} for c in curve for qq in (0.5, 0.9, 0.99)])
    st.subheader(T("chart_ttft"))
    lines = alt.Chart(pts).mark_line(point=True).encode(
        x=alt.X("rate_per_s:Q", title="arrival rate, req/s"),
        y=alt.Y("ttft_ms:Q", title="TTFT, ms", scale=alt.Scale(type="log")),
        color=alt.Color("percentile:N"),
        tooltip=["percentile", alt.Tooltip("rate_per_s:Q", format=".2f"),
                 alt.Tooltip("ttft_ms:Q", format=",.0f")])
    slo_rule = alt.Chart(pd.DataFrame({"y": [inputs.slo.ttft_ms], "label": ["TTFT SLO"]})
                         ).mark_rule(color="red", strokeDash=[6, 3]).encode(y="y:Q")
    load_rule = alt.Chart(pd.DataFrame({"x": [chosen.design_rate_per_s]})).mark_rule(
        color="gray", strokeDash=[2, 2]).encode(x="x:Q")
    st.altair_chart(alt.layer(lines, slo_rule, load_rule), width="stretch")

    md, pdf = _quotes(result, sim if chosen == best else None, lang)
    d1, d2 = st.columns(2)
    d1.download_button(T("quote_md"), md, file_name="capacity-quote.md",
                       mime="text/markdown", key="planner_quote_md")
    d2.download_button(T("quote_pdf"), pdf, file_name="capacity-quote.pdf",
                       mime="application/pdf", key="planner_quote_pdf")
