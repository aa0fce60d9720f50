"""The Explorer's view of two pools (issue 27): `capacity.plan.disagg_pools` by hand and against
the planner's `disagg_options`, the chart (`capacity.report.disagg_chart`), the URL fields, and
the panel (app/disagg_view.py) through Streamlit's AppTest."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from capacity.catalog.loader import default_catalog
from capacity.errors import InputError
from capacity.plan.disagg import Link, disagg_options
from capacity.plan.disagg_pools import (
    PoolLayout,
    PoolShape,
    closed_loop_rate_per_s,
    layout,
    matched_counts,
    pool_shapes,
    pools_at,
    pools_curve,
    saturation,
    with_counts,
)
from capacity.report.disagg_chart import (
    CURVE_COLUMNS,
    SATURATION_COLUMNS,
    curve_frame,
    explorer_pools,
    saturation_frame,
    two_pools_charts,
)
from capacity.report.urlstate import ExplorerState, decode, encode

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
pytestmark = pytest.mark.usefixtures("custom")  # the machine's custom entries stay out

# Llama-3.1-8B on H100, 4K prompts, 6 req/s: the planner's answer is 2P+1D at TP 1
PARAMS = {"model": "llama-3.1-8b", "weights": "bf16", "gpu": "h100-sxm", "ctx": "8192",
          "prompt": "4096", "load": "6", "slo_tpot_ms": "30"}


def hand_layout(x: int = 2, y: int = 1) -> PoolLayout:
    """A prefill of 400 ms one prompt at a time; a decode step of 10 + b ms over 64 slots,
    10 output tokens; 1e8 bytes each way over 50 GB/s per GPU at efficiency 1 and 1 ms, 800
    descriptors at 2.5 us, one decode step of admission."""
    pre = PoolShape(gpu="g", gpu_name="G", tp=1, prefill_ms=400.0, batched=False,
                    prefill_fits=True, slots=64, step_ms=tuple(10.0 + b for b in range(65)),
                    handover_bytes=1e8, descriptors=800.0, price_per_gpu_hour=1.0)
    link = Link(kind="infiniband", send_gb_s=50.0, recv_gb_s=50.0, efficiency=1.0,
                latency_ms=1.0, descriptor_us=2.5, admission_steps=1.0)
    return PoolLayout(prefill=pre, prefill_replicas=x, decode=pre, decode_replicas=y,
                      link=link, output_tokens=10, quantile=0.9, ttft_slo_ms=2000.0,
                      tpot_slo_ms=20.0)


# ---- the library, by hand ---------------------------------------------------------------------
def test_figures_at_a_rate_by_hand() -> None:
    f = pools_at(hand_layout(), 2.0)
    # prefill: 1 req/s per replica on 400 ms: rho 0.4, W = 0.4 x 400 / 1.2 = 133.3 ms, its p90
    # (exponential tail) 133.3 / 0.4 x ln(0.4 / 0.1) = 462.1 ms
    assert f.prefill_utilization == pytest.approx(0.4)
    assert f.prefill_queue_ms == pytest.approx(1000 / 3 * math.log(4.0))
    # hand-over: the NICs held 1e8 B / 5e7 B per ms = 2 ms + 800 x 2.5 us = 2 ms: 4 ms; + 1 ms
    # latency + one decode step of admission (11.24 ms, below) = 16.24 ms; 2 req/s x 4 ms:
    # rho 0.008 < 0.1, no p90 wait
    assert f.transfer_ms == pytest.approx(1.0 + 4.0 + 11.24)
    assert f.link_wait_ms == 0.0 and f.link_utilization == pytest.approx(0.008)
    # decode: lambda(2) = 1 / (10 x 0.012 s) = 8.333 req/s, so 2 req/s is B = 1 + 2 / 8.333
    # = 1.24 (linear between the batches), s = 11.24 ms; B_q = 1.24 + 1.2816 sqrt(0.24)
    b = 1.24
    assert f.decode_batch == pytest.approx(b)
    assert f.decode_utilization == pytest.approx(b / 64)
    assert f.first_step_ms == pytest.approx(11.24) and f.tpot_mean_ms == pytest.approx(11.24)
    assert f.tpot_ms == pytest.approx(10 + b + 1.2815516 * math.sqrt(0.24), rel=1e-6)
    assert f.ttft_ms == pytest.approx(400 + 1000 / 3 * math.log(4.0) + 16.24 + 11.24)
    # TPOT 20 ms at p90: B = 6 (B_q = 6 + 1.28 sqrt 5 = 8.87 slots, s 18.9 ms) is the largest:
    # 5 / (10 x 0.016 s) = 31.25 req/s
    assert f.decode_capacity_per_s == pytest.approx(31.25)
    assert f.meets_ttft and f.meets_tpot


def test_saturation_by_hand() -> None:
    sat = saturation(hand_layout())
    assert sat.prefill_per_s == pytest.approx(2 * 1000 / 400)          # 5 req/s
    assert sat.decode_per_s == pytest.approx(63 / (10 * 0.074))        # 85.1 req/s
    assert sat.link_per_s == pytest.approx(min(2, 1) * 1000 / 4.0)     # 250 req/s
    assert sat.first_per_s == pytest.approx(5.0)
    # past a saturation the curve is infinite
    c = pools_curve(hand_layout(), [1.0, 4.9, 5.0, 6.0])
    assert np.isfinite(c.ttft_ms[:2]).all() and np.isinf(c.ttft_ms[2:]).all()
    assert np.isfinite(c.tpot_ms).all()


def test_closed_loop_rate_by_hand() -> None:
    # 50 requests of 3 s + 256 x 20 ms = 8.12 s
    assert closed_loop_rate_per_s(50, 3.0, 20.0, 256) == pytest.approx(50 / 8.12)
    with pytest.raises(InputError):
        closed_loop_rate_per_s(50, 0.0, 0.0, 256)


def test_a_pool_without_replicas_is_refused() -> None:
    with pytest.raises(InputError, match="each pool needs at least one replica: got 0 prefill"):
        hand_layout(x=0)
    with pytest.raises(InputError, match="request rate must be > 0"):
        pools_at(hand_layout(), 0.0)


def test_the_planners_counts_and_figures() -> None:
    """At the counts the planner picks, every figure is the planner's (`disagg_options`)."""
    cat = default_catalog()
    state, _ = decode(PARAMS, cat)
    inp = state.plan_inputs(cat)
    shapes = pool_shapes(inp, cat)
    one = layout(inp, shapes, prefill_gpu="h100-sxm", prefill_tp=1, prefill_replicas=1,
                 decode_gpu="h100-sxm", decode_tp=1, decode_replicas=1, catalog=cat)
    got = matched_counts(one, 6.0, cat)
    opts = [o for o in disagg_options(replace(inp, max_gpus=64), cat)
            if o.prefill_tp == 1 and o.decode_tp == 1]
    assert len(opts) == 1
    o = opts[0]
    assert got == (o.prefill_replicas, o.decode_replicas) == (2, 1)
    f = pools_at(with_counts(one, *got, cat), 6.0)
    assert f.ttft_ms == pytest.approx(o.ttft_ms, rel=1e-12)
    assert f.tpot_ms == pytest.approx(o.tpot_ms, rel=1e-12)
    assert f.tpot_mean_ms == pytest.approx(o.tpot_mean_ms, rel=1e-12)
    assert f.prefill_utilization == pytest.approx(o.prefill_utilization, rel=1e-12)
    assert f.link_utilization == pytest.approx(o.link_utilization, rel=1e-12)
    assert f.transfer_ms == pytest.approx(o.transfer_ms, rel=1e-12)
    assert f.link_wait_ms == pytest.approx(o.transfer_wait_ms, abs=1e-12)
    assert f.decode_batch == pytest.approx(o.decode_batch, rel=1e-12)
    assert f.decode_capacity_per_s == pytest.approx(o.decode_capacity_per_s, rel=1e-12)
    assert f.prefill_capacity_per_s == pytest.approx(o.prefill_capacity_per_s, rel=1e-9)


# ---- the chart --------------------------------------------------------------------------------
def datasets_of(spec: dict[str, Any]) -> list[list[dict[str, Any]]]:
    return list(spec["datasets"].values())


def test_chart_frames_and_saturation_rules() -> None:
    lay = hand_layout()
    c = pools_curve(lay, np.linspace(0.1, 6.0, 60))
    df = curve_frame(c)
    assert tuple(df.columns) == CURVE_COLUMNS
    assert df["ttft_ms"].isna().any() and not np.isinf(df.to_numpy()).any()  # inf -> empty
    sat = saturation_frame(c.saturation, up_to=6.0)
    assert tuple(sat.columns) == SATURATION_COLUMNS
    # only the prefill pool saturates within 6 req/s, at 2 replicas x 1000 / 400 ms = 5 req/s
    assert list(sat["part"]) == ["prefill"] and sat["rate_per_s"][0] == pytest.approx(5.0)
    assert sat["label"][0] == "prefill pool (5 req/s)"
    charts = two_pools_charts(c, rate_per_s=2.0, ttft_at_ms=876.3, tpot_at_ms=11.9,
                              ttft_slo_ms=2000.0, tpot_slo_ms=20.0, quantile=0.9)
    assert set(charts) == {"ttft", "tpot"}
    for name, chart in charts.items():
        rows = [r for d in datasets_of(chart.to_dict()) for r in d]
        rules = [r for r in rows if r.get("part") == "prefill"]
        assert rules and rules[0]["rate_per_s"] == pytest.approx(5.0)
        assert any(r.get("v") == (2000.0 if name == "ttft" else 20.0) for r in rows)  # target
        assert any(r.get("label") == "this rate" and r["rate_per_s"] == 2.0 for r in rows)
    zh = saturation_frame(c.saturation, "zh", up_to=6.0)
    assert zh["label"][0] == "预填充池（5 req/s）"


def test_event_points_are_near_the_closed_form() -> None:
    # (their time, 0.2 to 0.45 s for the 4 rates, is a benchmark's matter, not a test's)
    cat = default_catalog()
    state, _ = decode(PARAMS, cat)
    p = explorer_pools(state, cat, ttft_s=1.0, tpot_ms=20.0)
    assert len(p.events) == 4 and {e.percentile for e in p.events} == {0.9}
    at = next(e for e in p.events if e.rate_per_s == 6.0)
    # TPOT: the closed form within 15 % of the event model; TTFT: the closed form, a sum of
    # quantiles, on the safe side
    assert at.tpot_ms == pytest.approx(p.figures.tpot_ms, rel=0.15)
    assert at.ttft_ms <= p.figures.ttft_ms


# ---- the URL ----------------------------------------------------------------------------------
def test_the_panels_inputs_travel_in_the_url() -> None:
    cat = default_catalog()
    s = ExplorerState(dis_rate=3.5, dis_ptp=2, dis_px=3, dis_dgpu="b200", dis_dtp=4, dis_dy=2,
                      dis_eff=0.5, dis_lat_ms=4.0)
    q = encode(s)
    assert {k: q[k] for k in q if k.startswith("dis_")} == {
        "dis_rate": "3.5", "dis_ptp": "2", "dis_px": "3", "dis_dgpu": "b200", "dis_dtp": "4",
        "dis_dy": "2", "dis_eff": "0.5", "dis_lat_ms": "4"}
    back, notices = decode(q, cat)
    assert back == s and notices == []
    assert not any(k.startswith("dis_") for k in encode(ExplorerState()))
    bad, notices = decode({"dis_dgpu": "warp-drive", "dis_eff": "0"}, cat)
    assert bad.dis_dgpu == "" and bad.dis_eff == 0.85
    assert any("dis_dgpu=warp-drive" in n for n in notices)
    assert any("dis_eff" in n for n in notices)


# ---- the panel --------------------------------------------------------------------------------
def open_panel(params: dict[str, str], lang: str = "en", charts: int = 2) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in {**params, "lang": lang}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    assert not [m for m in at.metric if m.label.startswith("prefill pool busy")]  # closed: free
    n = len(at.get("vega_lite_chart"))
    at.session_state["pd_ex"] = True  # open the section (it runs only while open)
    at.run()
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == n + charts
    return at


def shown(at: AppTest) -> dict[str, str]:
    return {m.label: str(m.value) for m in at.metric}


@pytest.mark.slow
def test_the_panel_shows_the_librarys_numbers() -> None:
    at = open_panel(PARAMS)
    cat = default_catalog()
    state, _ = decode(PARAMS, cat)
    m = shown(at)
    # the Explorer's own figures are only used for a closed loop's rate: here the load is set
    p = explorer_pools(state, cat, ttft_s=1.0, tpot_ms=1.0)
    f = p.figures
    assert p.rate_source == "load" and p.layout.ratio == "2P+1D"
    assert m["TTFT p90"] == f"{f.ttft_ms:,.1f} ms" == "1,432.2 ms"
    assert m["TPOT p90"] == f"{f.tpot_ms:,.1f} ms"
    assert m["prefill pool busy"] == f"{f.prefill_utilization:.0%}"
    assert m["decode slots in use"] == f"{f.decode_utilization:.0%}"
    assert m["link busy"] == f"{f.link_utilization:.0%}"
    assert m["rate-matched"] == "2P+1D"
    parts = next(d.value for d in at.dataframe if "TTFT, part" in d.value.columns)
    assert list(parts["ms"]) == [f"{v:,.1f}" for v in (
        f.prefill_queue_ms, f.prefill_ms, f.transfer_ms, f.link_wait_ms, f.first_step_ms,
        f.ttft_ms)]
    text = " ".join(md.value for md in at.markdown)
    assert "At **6 req/s**, the design load." in text
    assert "**2P+1D**: prefill 2 x (1 x H100 SXM), decode 1 x (1 x H100 SXM), 3 GPUs." in text
    assert "KV over NVLink: 450 GB/s per GPU each way" in text
    # set the counts: 3 prefill replicas, the figures follow, the link carries them
    at.number_input(key="ex_dis_px").set_value(3).run()
    assert not at.exception
    f3 = pools_at(with_counts(p.layout, 3, 1, cat), 6.0)
    assert shown(at)["TTFT p90"] == f"{f3.ttft_ms:,.1f} ms"
    assert shown(at)["rate-matched"] == "2P+1D"  # still the planner's counts at this rate
    assert at.query_params["dis_px"] == "3"


@pytest.mark.slow
def test_a_bad_input_gets_a_clear_message() -> None:
    at = open_panel(PARAMS)
    at.number_input(key="ex_dis_eff").set_value(0.0).run()
    assert not at.exception
    warnings = [w.value for w in at.warning]
    assert any("No view of the two pools for these inputs: link efficiency must be in (0, 1], "
               "got 0.0" in w for w in warnings), warnings
    # the inputs stay on screen to fix it
    at.number_input(key="ex_dis_eff").set_value(0.85).run()
    assert not [w for w in at.warning if "No view of the two pools" in w.value]
    # a decode GPU that cannot hold a 70B model at any TP
    at = open_panel({**PARAMS, "model": "llama-3.1-70b", "weights": "fp8", "gpus": "4",
                     "tp": "4", "dis_dgpu": "rtx-3090"}, charts=0)
    warnings = [w.value for w in at.warning]
    assert any("No view of the two pools" in w and "RTX 3090" in w for w in warnings), warnings


@pytest.mark.slow
def test_the_panel_in_chinese_and_a_closed_loop() -> None:
    at = open_panel({}, lang="zh")  # the first screen: RTX 4090, C = 50, no design load
    m = shown(at)
    assert "首字延迟 p90" in m and "每 token 延迟 p90" in m
    text = " ".join(md.value for md in at.markdown)
    assert "保持 50 个在途请求的速率" in text  # the deployment box's design load
    # at that load no rate-matched layout of 4090s meets the SLOs: nothing matches
    assert any("没有按速率匹配的布局" in w.value for w in at.warning)
    assert m["速率匹配"] == "-"


@pytest.mark.slow
def test_without_a_rate_the_pools_run_at_the_deployment_boxs_design_load() -> None:
    """One rate for "C requests in flight" on the page: with no rate entered and no design
    load, the two pools run at the rate the deployment box states (the Planner's design load
    for C in flight, queueing included), not at C / (unqueued TTFT + n x TPOT). The chapter's
    50 requests at 8K on an RTX 4090 queue their prefills: that rate was 6.31 req/s against
    the deployment's 0.289, and the pools read 1934% busy (an audit, 2026-12-07)."""
    from capacity.plan.deployment import assess

    at = open_panel({}, charts=2)
    cat = default_catalog()
    state, _ = decode({}, cat)
    design = assess(state.deployment(cat), cat).design_rate_per_s
    text = " ".join(m.value for m in at.markdown)
    assert f"At **{design:,.3g} req/s**: the deployment's design load" in text
    p = explorer_pools(state, cat, ttft_s=3.0, tpot_ms=19.0, design_rate_per_s=design)
    assert p.rate_source == "deployment" and p.rate_per_s == design
    assert shown(at)["prefill pool busy"] == f"{p.figures.prefill_utilization:.0%}"
    # where no deployment was built, the what-if's own closed loop, as before
    q = explorer_pools(state, cat, ttft_s=3.0, tpot_ms=19.0)
    assert q.rate_source == "concurrency" and q.rate_per_s == pytest.approx(
        closed_loop_rate_per_s(50, 3.0, 19.0, state.out))
