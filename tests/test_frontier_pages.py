"""The disaggregated and wide-EP points on the pages' buyer's chart (issue 27,
app/frontier_kinds.py): the boxes on the Explorer and the Planner, default off (the chart as
before), in each page's link, the chart's figures those of `capacity.fit.frontier.frontier` for
the same inputs; the layout text in both languages. Through Streamlit's AppTest (no browser)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

from app.frontier_kinds import KIND_ENGINE, kind_inputs
from app.frontier_view import read_off_frame
from capacity.catalog.loader import Catalog
from capacity.fit.frontier import (
    AGGREGATED,
    DISAGGREGATED,
    EP_POOLS,
    PRICE_KINDS,
    WIDE_EP,
    FrontierInputs,
    cost_read_off,
    frontier,
)
from capacity.report.frontier_chart import (
    MAX_ROWS,
    front_pieces,
    frontier_chart,
    frontier_frame,
    layout_text,
)
from capacity.report.planner_url import PlannerState, planner_decode, planner_encode
from capacity.report.quote_frontier import plan_frontier_inputs
from capacity.report.urlstate import ExplorerState, decode, encode

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
pytestmark = pytest.mark.usefixtures("custom")  # the machine's custom entries stay out

Front = list[tuple[str, float, float]]


def front_frame(at: AppTest) -> pd.DataFrame:
    """The last chart's data set of the fronts (the lines', whose style column is renamed to
    its legend title)."""
    chart = at.get("vega_lite_chart")[-1]
    frames = [convert_arrow_bytes_to_pandas_df(d.data.data) for d in chart.proto.datasets]
    fronts = [df for df in frames if "series" in df and "style" not in df]
    assert len(fronts) == 1
    return fronts[0]


def chart_fronts(at: AppTest) -> Front:
    """The last chart's front points: (deployment, interactivity, throughput per GPU), sorted."""
    df = front_frame(at)
    return sorted(zip(df["deployment"], df["interactivity_tok_s_per_user"],
                      df["throughput_tok_s_per_gpu"], strict=True))


def library_fronts(inp: FrontierInputs, catalog: Catalog) -> Front:
    """Every group's front points of `frontier(inp)`, as `chart_fronts` gives them."""
    fr = frontier(inp, catalog)
    return sorted((p.deployment, p.interactivity_tok_s_per_user, p.throughput_tok_s_per_gpu)
                  for g in fr.groups for p in g.front)


def same(page: Front, lib: Front) -> None:
    assert [d for d, _, _ in page] == [d for d, _, _ in lib]
    assert [x for _, x, _ in page] == pytest.approx([x for _, x, _ in lib], rel=1e-12)
    assert [y for _, _, y in page] == pytest.approx([y for _, _, y in lib], rel=1e-12)


def spec_text(at: AppTest) -> str:
    return json.dumps(json.loads(at.get("vega_lite_chart")[-1].proto.spec))


def param(at: AppTest, name: str) -> Any:
    value = at.query_params.get(name)
    return value[-1] if isinstance(value, list) else value


def explorer_inputs(catalog: Catalog, state: ExplorerState, gpus: tuple[str, ...],
                    engines: tuple[str, ...]) -> FrontierInputs:
    """The Explorer's chart inputs written out: its model and request, its GPU first, its
    weights and KV precision."""
    return FrontierInputs(
        model=state.model, prompt_tokens=state.prompt_tokens, output_tokens=state.out,
        context_tokens=state.ctx, gpus=gpus, engines=engines,
        basis=state.plan_inputs(catalog).basis_string, formats=(state.weights,),
        kv_dtypes=(state.kv,), currency="CNY", cny_per_usd=state.rate)


def open_explorer(params: dict[str, str], others: list[str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    at.session_state["frv_ex"] = True  # open the section
    at.session_state["frv_ex_gpus"] = others  # GPUs besides the what-if's
    at.run()
    assert not at.exception
    return at


# ---- the Explorer ----------------------------------------------------------------------------
@pytest.mark.slow
def test_explorer_box_off_then_on(catalog: Catalog) -> None:
    at = open_explorer({}, ["h100-sxm"])
    state = ExplorerState()  # the default page: qwen3.5-9b awq, fp16 KV on an RTX 4090
    plain = explorer_inputs(catalog, state, ("rtx-4090", "h100-sxm"), ("chapter",))
    # off (the default): the aggregated chart, as before the boxes
    assert at.toggle(key="ex_fr_disagg").value is False
    page = chart_fronts(at)
    same(page, library_fronts(plain, catalog))
    assert {d for d, _, _ in page} == {AGGREGATED}
    assert "deployment_label" not in spec_text(at)  # no kind in the tooltip
    assert "deployment" not in at.dataframe[-1].value.columns
    assert param(at, "fr_disagg") is None
    # a dense model: the wide-EP box is disabled, and says why
    ep = at.toggle(key="ex_fr_wide_ep")
    assert ep.disabled and ep.value is False and "dense" in ep.help
    # on: the disaggregated points, with the page's TTFT SLO (2,000 ms at p90); the chapter's
    # engine runs none, so vLLM joins the engines
    at.toggle(key="ex_fr_disagg").set_value(True).run()
    assert not at.exception
    assert param(at, "fr_disagg") == "1"
    want = replace(plain, engines=("chapter", "vllm"), disaggregated=True, ttft_ms=2000.0,
                   quantile=0.9)
    page = chart_fronts(at)
    same(page, library_fronts(want, catalog))
    assert DISAGGREGATED in {d for d, _, _ in page}
    assert "deployment_label" in spec_text(at)
    captions = " ".join(c.value for c in at.caption)
    assert "2,000 ms at p90" in captions and "added to the engines" in captions
    # the read-off names each row's deployment kind; its cheapest catalog-priced front is the
    # library's read-off at the target (20 tok/s per user: the TPOT SLO's 50 ms)
    costs = at.dataframe[-1].value
    assert "deployment" in costs.columns
    rows = [r for r in cost_read_off(frontier(want, catalog), 20.0, PRICE_KINDS, catalog)
            if r.kind == "catalog" and r.output_per_mtok is not None]
    best = min(rows, key=lambda r: r.output_per_mtok or 0.0)
    assert costs["per M output"][0] == pytest.approx(best.output_per_mtok, rel=1e-12)
    assert costs["deployment"][0] == {AGGREGATED: "aggregated",
                                      DISAGGREGATED: "disaggregated prefill/decode"}[
        best.group.deployment]
    # off again: the link drops it
    at.toggle(key="ex_fr_disagg").set_value(False).run()
    assert param(at, "fr_disagg") is None
    same(chart_fronts(at), library_fronts(plain, catalog))


@pytest.mark.slow
def test_explorer_wide_ep_from_a_link(catalog: Catalog) -> None:
    params = {"model": "deepseek-v3", "weights": "fp8", "gpu": "h200-sxm", "gpus": "8",
              "tp": "8", "fr_wide_ep": "1", "lang": "zh"}
    at = open_explorer(params, [])
    ep = at.toggle(key="ex_fr_wide_ep")
    assert not ep.disabled and ep.value is True
    assert param(at, "fr_wide_ep") == "1"
    state, notices = decode(params, catalog)
    assert notices == [] and state.fr_wide_ep == 1
    want = replace(explorer_inputs(catalog, state, ("h200-sxm",), ("chapter",)),
                   engines=("chapter", KIND_ENGINE), wide_ep=True)
    page = chart_fronts(at)
    same(page, library_fronts(want, catalog))
    assert WIDE_EP in {d for d, _, _ in page}
    lay = front_frame(at)["layout"]
    assert lay.str.startswith("EP").any() and lay.str.contains("数据并行注意力").any()
    assert not lay.str.contains("DP attention").any()  # the layout, in Chinese
    assert "部署方式" in at.dataframe[-1].value.columns


@pytest.mark.slow
@pytest.mark.parametrize(("extra", "fields", "notice"), [
    pytest.param({"prompt": "1000", "turns": "3", "turn_tokens": "100"},
                 {"turns": 3, "turn_tokens": 100}, "plans single requests", id="conversation"),
    pytest.param({"prompt": "4000", "prefix": "3000", "prefix_share": "0.9"},
                 {"prefix_tokens": 3000, "prefix_share": 0.9},
                 "plans requests with nothing cached", id="shared-prefix")])
def test_explorer_chart_of_cached_requests(catalog: Catalog, extra: dict[str, str],
                                           fields: dict[str, Any], notice: str) -> None:
    # the load view's conversation (its points hold the turns' mean prompt and prefill their
    # mean new tokens) or shared prefix (held once, the rest prefilled) travels to the chart;
    # the disaggregated box, ticked, says what it plans and draws none of its points
    params = {"engine": "vllm", "out": "256", "fr_disagg": "1", **extra}
    at = open_explorer(params, [])
    state, notices = decode(params, catalog)
    assert notices == []
    base = explorer_inputs(catalog, state, ("rtx-4090",), ("vllm",))
    want = replace(base, **fields)
    page = chart_fronts(at)
    same(page, library_fronts(want, catalog))
    assert {d for d, _, _ in page} == {AGGREGATED}
    assert notice in " ".join(c.value for c in at.caption)
    # single requests with nothing cached, of the same first prompt, are another chart
    assert page != library_fronts(base, catalog)


# ---- the Planner -----------------------------------------------------------------------------
@pytest.mark.slow
def test_planner_disaggregated_from_a_link(catalog: Catalog) -> None:
    params = {"model": "llama-3.1-70b-fp8", "gpus": "h100-sxm", "conc": "20", "mode": "conc",
              "fr_disagg": "1"}
    at = AppTest.from_file(APP, default_timeout=180).switch_page("pages/planner.py")
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    at.session_state["frv_pl"] = True
    at.run()
    assert not at.exception
    assert at.toggle(key="planner_fr_disagg").value is True
    assert param(at, "fr_disagg") == "1"
    ep = at.toggle(key="planner_fr_wide_ep")
    assert ep.disabled and ep.value is False  # Llama-3.1-70B is dense
    pinp = planner_decode(params, catalog)[0].inputs(catalog)
    assert (pinp.slo.ttft_ms, pinp.slo.quantile) == (2000.0, 0.9)
    want = replace(plan_frontier_inputs(pinp, catalog), engines=("chapter", "vllm"),
                   disaggregated=True, ttft_ms=2000.0, quantile=0.9)
    page = chart_fronts(at)
    same(page, library_fronts(want, catalog))
    assert DISAGGREGATED in {d for d, _, _ in page}
    # the recommendation's table is still its own (aggregated) front
    assert len(at.dataframe[-1].value) >= 2
    # off: as before
    at.toggle(key="planner_fr_disagg").set_value(False).run()
    assert param(at, "fr_disagg") is None
    page = chart_fronts(at)
    same(page, library_fronts(plan_frontier_inputs(pinp, catalog), catalog))
    assert {d for d, _, _ in page} == {AGGREGATED}


# ---- the links, the inputs, the layout text --------------------------------------------------
def test_links_carry_the_boxes(catalog: Catalog) -> None:
    s = ExplorerState(fr_disagg=1, fr_wide_ep=1)
    assert {k: v for k, v in encode(s).items() if k.startswith("fr_")} == {
        "fr_disagg": "1", "fr_wide_ep": "1"}
    assert "fr_disagg" not in encode(ExplorerState())
    back, notices = decode({"fr_disagg": "1", "fr_wide_ep": "2"}, catalog)
    assert (back.fr_disagg, back.fr_wide_ep) == (1, 0) and len(notices) == 1
    p = PlannerState(fr_disagg=1)
    assert planner_encode(p) == {"fr_disagg": "1"}
    got, notices = planner_decode({"fr_disagg": "1", "fr_wide_ep": "yes"}, catalog)
    assert (got.fr_disagg, got.fr_wide_ep) == (1, 0) and len(notices) == 1


def test_kind_inputs() -> None:
    base = FrontierInputs(model="llama-3.1-70b", engines=("chapter",), ttft_ms=500.0)
    assert kind_inputs(base, disaggregated=False, wide_ep=False, ttft_ms=3000.0,
                       quantile=0.5) == (base, False)
    dis, added = kind_inputs(base, disaggregated=True, wide_ep=False, ttft_ms=3000.0,
                             quantile=0.5)
    assert added and dis.engines == ("chapter", "vllm") and dis.disaggregated
    assert (dis.ttft_ms, dis.quantile, dis.wide_ep) == (3000.0, 0.5, False)
    # wide EP alone keeps the chart's TTFT budget (it has none); sglang runs it: none added
    ep, added = kind_inputs(replace(base, engines=("sglang",)), disaggregated=False,
                            wide_ep=True, ttft_ms=3000.0, quantile=0.5)
    assert not added and ep.engines == ("sglang",) and ep.wide_ep
    assert (ep.ttft_ms, ep.disaggregated) == (500.0, False)


def test_layout_text_in_both_languages() -> None:
    dis = "prefill TP2 x 0.35 per decode replica, KV 4.1 ms over nvlink"
    ep = "EP16, TP2 attention, 32 redundant experts (2 nodes over the NIC)"
    ep8 = "EP8, DP attention (NVLink)"
    for text in (dis, ep, ep8, "something else"):
        assert layout_text(text, "en") == text  # English: the library's own text
    assert layout_text(dis, "zh") == "每个解码副本配 0.35 个 TP2 预填充副本，KV 传输 4.1 ms（经 nvlink）"
    assert layout_text(ep, "zh") == "EP16，TP2 张量并行注意力，32 个冗余专家（2 个节点，经网卡）"
    assert layout_text(ep8, "zh") == "EP8，数据并行注意力（NVLink）"
    assert layout_text("something else", "zh") == "something else"


def test_every_layout_of_a_frontier_is_translated(catalog: Catalog) -> None:
    # gpt-oss-120b: an MoE whose prefill on one H100 is slow enough for the KV link (a smaller
    # one, Qwen3-30B-A3B, prefills ~100k tokens/s a replica: the decode rank's transfer
    # descriptors alone would keep the link busy, docs/disaggregation.md, and draw no point)
    inp = FrontierInputs(model="gpt-oss-120b", gpus=("h100-sxm",), engines=("vllm",),
                         formats=("fp8",), kv_dtypes=("fp8",), disaggregated=True, wide_ep=True)
    fr = frontier(inp, catalog)
    kinds = set(fr.points.deployment)
    assert kinds == {AGGREGATED, DISAGGREGATED, WIDE_EP, EP_POOLS}   # both boxes: the pools too
    raw, en, zh = (frontier_frame(fr, lang=lang) for lang in (None, "en", "zh"))
    assert (en["layout"] == raw["layout"]).all()  # English: the library's text
    lay = zh["layout"][zh["deployment"] != AGGREGATED]
    assert len(lay) and not lay.str.contains("prefill|attention|replica|experts|NIC").any()


def test_read_off_frame_names_the_kind(catalog: Catalog) -> None:
    inp = FrontierInputs(model="llama-3.1-70b", gpus=("h100-sxm",), engines=("vllm",),
                         formats=("fp8",), kv_dtypes=("fp8",), disaggregated=True)
    rows = cost_read_off(frontier(inp, catalog), 30.0, PRICE_KINDS, catalog)
    plain = read_off_frame(rows, "en")
    kinds = read_off_frame(rows, "zh", kinds=True)
    assert "deployment" not in plain.columns and "部署方式" in kinds.columns
    assert len(kinds.columns) == len(plain.columns) + 1
    assert set(kinds["部署方式"]) <= {"聚合部署", "预填充/解码分离", "-"}


def test_fronts_of_more_rows_than_a_data_set_holds() -> None:
    # groups of 2, 3 and 2 rows, at most 4 rows a piece: whole groups, in order
    front = pd.DataFrame({"group": [0, 0, 1, 1, 1, 2, 2], "x": range(7)})
    pieces = front_pieces(front, limit=4)
    assert [p["group"].tolist() for p in pieces] == [[0, 0], [1, 1, 1], [2, 2]]
    assert front_pieces(front, limit=7)[0] is front
    assert [p["group"].tolist() for p in front_pieces(front, limit=5)] == [[0, 0, 1, 1, 1],
                                                                          [2, 2]]


@pytest.mark.slow
def test_a_chart_of_over_5000_front_points(catalog: Catalog) -> None:
    """The Planner's Llama-3.1-70B chart with disaggregated points over every GPU: 6,943 front
    points, more than one Vega-Lite data set may hold, all drawn."""
    inp = FrontierInputs(model="llama-3.1-70b", gpus=tuple(sorted(catalog.gpus)),
                         engines=("chapter", "vllm"), prompt_tokens=8192, output_tokens=256,
                         context_tokens=8192, disaggregated=True)
    fr = frontier(inp, catalog)
    n = sum(len(g.front) for g in fr.groups)
    assert n > MAX_ROWS
    spec = frontier_chart(fr).to_dict()
    sets = spec["datasets"].values()
    assert max(len(v) for v in sets) <= MAX_ROWS
    # the lines' data sets (their style column renamed) hold every front point once
    lines = [v for v in sets if v and "series" in v[0] and "style" not in v[0]]
    assert sum(len(v) for v in lines) == n
