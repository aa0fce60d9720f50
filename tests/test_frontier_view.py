"""The buyer's chart on the Explorer and the Planner (app/frontier_view.py) and in the quote
(capacity/report/quote_frontier.py), issue 26: through Streamlit's AppTest (no browser). Its
disaggregated and wide-EP points (issue 27): tests/test_frontier_pages.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

from capacity.catalog.loader import Catalog
from capacity.model.workload import Workload
from capacity.plan.options import PlanInputs
from capacity.plan.search import plan
from capacity.report.document import Heading, Table, render_markdown
from capacity.report.i18n import t
from capacity.report.quote import option_label
from capacity.report.quote_frontier import (
    frontier_blocks,
    plan_frontier_inputs,
    recommended_mark,
    slo_interactivity,
)

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
pytestmark = pytest.mark.usefixtures("custom")  # the machine's custom entries stay out


def datasets(chart: Any) -> list[pd.DataFrame]:
    """A chart element's data sets (Arrow IPC streams in its proto)."""
    return [convert_arrow_bytes_to_pandas_df(d.data.data) for d in chart.proto.datasets]


def one_row(chart: Any, prefix: str) -> dict[str, Any]:
    """The chart's one-row data set whose label starts with `prefix` (the red cross)."""
    rows = [r for df in datasets(chart) if "label" in df and "throughput_tok_s_per_gpu" in df
            for r in df.to_dict("records") if str(r["label"]).startswith(prefix)]
    assert len(rows) == 1, rows
    return {str(k): v for k, v in rows[0].items()}


def open_explorer(lang: str = "en") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["lang"] = lang
    at.run()
    assert not at.exception
    n = len(at.get("vega_lite_chart"))
    at.session_state["frv_ex"] = True  # open the section (it runs only while open)
    at.run()
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == n + 1
    return at


def test_explorer_section_is_closed_and_free_by_default() -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["exs_charts"] = True  # the Explorer's curves open (issue 30: closed too)
    at.run()
    assert "Throughput per GPU vs interactivity" in [e.label for e in at.expander]
    assert len(at.get("vega_lite_chart")) == 6  # the Explorer's own charts only
    assert not [c for c in at.caption if "Black diamonds" in c.value]


@pytest.mark.slow
def want_point(at: AppTest) -> tuple[float, float]:
    """The what-if's closed-loop point as the library computes it, for the page's state."""
    from capacity.catalog.loader import default_catalog
    from capacity.fit.frontier_loop import deployment_point
    from capacity.plan.service_build import service_from_scenario
    from capacity.report.urlstate import decode

    cat = default_catalog()
    state, _ = decode({k: str(v) for k, v in at.query_params.items()}, cat)
    s = state.scenario(cat)
    svc = service_from_scenario(s, output_tokens=state.out, engine=state.engine,
                                **state.load_knobs(s))
    return deployment_point(svc, concurrency=state.concurrency, replicas=s.replicas,
                            paid_gpus=s.paid_gpus)


def test_explorer_marks_its_own_figures() -> None:
    at = open_explorer()
    m = {x.label: str(x.value) for x in at.metric}
    chart = at.get("vega_lite_chart")[-1]
    cur = one_row(chart, "this what-if")
    # the cross is the what-if in the curves' own closed loop, every 8K prompt prefilled
    # (`deployment_point`): 50 users on one RTX 4090 stall each other's decode for 3 s a
    # prompt, 608 ms a token and 81 tok/s per GPU; the headline's decode step alone, 19.0 ms
    # and 2,636 tok/s, is in the caption (until 2026-12-07 it was the cross, 35x above the
    # 4090's curve)
    x, y = want_point(at)
    assert cur["interactivity_tok_s_per_user"] == pytest.approx(x)
    assert cur["throughput_tok_s_per_gpu"] == pytest.approx(y)
    assert 1e3 / x == pytest.approx(607.7, abs=0.5) and y == pytest.approx(81.0, abs=0.5)
    assert m["TPOT"] == "19.0 ms" and m["aggregate tok/s"] == "2,636"
    captions = " ".join(c.value for c in at.caption)
    assert "1000 / TPOT = 52.7 tok/s per user, aggregate tok/s / GPUs paid = 2,636" in captions
    assert cur["label"] == "this what-if: C=50 on 1 × RTX 4090"
    # the rule at the target (the TPOT SLO's 50 ms = 20 tok/s per user), the fronts, the run
    assert any("interactivity_tok_s_per_user" in df and len(df) == 1 and "throughput_tok_s_per_gpu"
               not in df and df["interactivity_tok_s_per_user"][0] == 20.0
               for df in datasets(chart))
    measured = [df for df in datasets(chart) if "kind" in df and (df["kind"] == "measured").all()]
    assert measured and measured[0]["label"].str.startswith("run sample-rtx-4090-sim").all()
    costs = at.dataframe[-1].value
    assert list(costs["price"]) == ["catalog prices", "on-demand", "reserved 1-year", "spot"]
    assert costs["per M output"].notna().any()
    # the boxes of the disaggregated and wide-EP points (issue 27) start off: no kind drawn
    assert at.toggle(key="ex_fr_disagg").value is False
    assert at.toggle(key="ex_fr_wide_ep").value is False
    assert "deployment_label" not in chart.proto.spec and "deployment" not in costs
    assert "fr_disagg" not in at.query_params and "fr_wide_ep" not in at.query_params


@pytest.mark.slow
def test_explorer_target_moves_the_read_off() -> None:
    at = open_explorer()
    before = at.dataframe[-1].value["per M output"].tolist()
    at.number_input(key="frv_ex_target").set_value(80.0).run()
    assert not at.exception
    after = at.dataframe[-1].value["per M output"].tolist()
    assert before != after
    assert any("80 tok/s per user" in md.value for md in at.markdown)


def test_explorer_chinese() -> None:
    at = open_explorer("zh")
    assert "每 GPU 吞吐量与交互速度" in [e.label for e in at.expander]
    cur = one_row(at.get("vega_lite_chart")[-1], "当前假设")
    assert cur["interactivity_tok_s_per_user"] == pytest.approx(want_point(at)[0])
    assert "价格" in at.dataframe[-1].value.columns


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_planner_marks_the_recommendation(lang: str) -> None:
    at = AppTest.from_file(APP, default_timeout=120).switch_page("pages/planner.py")
    at.query_params["lang"] = lang
    at.run()
    assert not at.exception
    at.session_state["frv_pl"] = True
    at.run()
    assert not at.exception
    chart = at.get("vega_lite_chart")[-1]
    rec = one_row(chart, "recommended" if lang == "en" else "推荐")
    best = at.session_state["planner_chosen"]  # the first option shown: the recommendation
    assert best.split(",")[0] in rec["label"] or lang == "zh"
    rule = [df for df in datasets(chart) if "throughput_tok_s_per_gpu" not in df]
    assert rule and rule[0]["interactivity_tok_s_per_user"][0] == pytest.approx(1e3 / 50.0)
    captions = " ".join(c.value for c in at.caption)
    assert ("design load" in captions) if lang == "en" else ("设计负载" in captions)
    front = at.dataframe[-1].value
    assert len(front) >= 2
    assert at.toggle(key="planner_fr_disagg").value is False  # issue 27's boxes start off
    assert "deployment_label" not in chart.proto.spec


def inputs() -> PlanInputs:
    return PlanInputs(model="qwen3-8b", workload=Workload(
        daily_active_users=5000, context_tokens=4096, prompt_tokens=2048, output_tokens=512),
        gpus=("h100-sxm", "l40s", "rtx-4090"), engine="vllm")


def test_mark_is_the_options_own_figures(catalog: Catalog) -> None:
    inp = inputs()
    p = plan(inp, catalog)
    o = p.best
    assert o is not None
    m = recommended_mark(o, inp)
    assert m.interactivity_tok_s_per_user == pytest.approx(1e3 / o.tpot_mean_ms)
    assert m.throughput_tok_s_per_gpu == pytest.approx(
        o.design_rate_per_s * 512 / o.paid_gpus)
    # F7 at the design load: the GPU-hours over the output tokens the mark says
    assert o.cost_per_mtok_design == pytest.approx(
        o.price_per_hour / (m.throughput_tok_s_per_gpu * 3600) * 1e6, rel=1e-9)
    assert slo_interactivity(inp) == pytest.approx(1e3 / inp.slo.tpot_ms)
    fi = plan_frontier_inputs(inp, catalog)
    assert (fi.prompt_tokens, fi.output_tokens, fi.context) == (2048, 512, 4096)
    assert fi.gpus == inp.gpus and fi.engines == ("vllm",)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_quote_fragment_names_the_recommendation(catalog: Catalog, lang: str) -> None:
    inp = inputs()
    p = plan(inp, catalog)
    assert p.best is not None
    blocks = frontier_blocks(p, lang=lang, catalog=catalog)
    assert isinstance(blocks[0], Heading)
    tables = [b for b in blocks if isinstance(b, Table)]
    assert len(tables) == 2
    rec_rows = [r for r in tables[0].rows if r[0] in ("recommended, at the design load",
                                                      "推荐方案（设计负载）")]
    assert len(rec_rows) == 1
    md = render_markdown(blocks)
    o = p.best
    # the recommended configuration: its GPU, weights and KV precision, and its mark's figures
    assert t("comma", lang).join([o.gpu_name, o.weights, f"{o.kv_dtype} KV"]) in md
    mark = recommended_mark(o, inp)
    assert f"{mark.interactivity_tok_s_per_user:,.1f}" in rec_rows[0]
    assert f"{mark.throughput_tok_s_per_gpu:,.0f}" in rec_rows[0]
    assert option_label(o, lang)  # the quote's own label is there to go beside it


def test_quote_fragment_without_a_recommendation(catalog: Catalog) -> None:
    inp = PlanInputs(model="llama-3.1-70b", workload=Workload(peak_concurrency=10),
                     gpus=("rtx-4090",), max_gpus=1)
    p = plan(inp, catalog)
    assert p.best is None
    assert frontier_blocks(p, catalog=catalog) == []


def test_a_sped_up_simulator_run_is_not_drawn_as_measured(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of `capacity sim-server --speedup 20` (the README's step 3) measured times 20 x
    shorter than the RTX 4090 it names: the buyer's chart counted it among the card's
    measured points, 20 x too fast. It is left out (counted), the real-time run drawn."""
    import json
    import shutil

    from app import frontier_cache as fc

    sample = Path(__file__).resolve().parent.parent / "data" / "bench" / "sample-rtx-4090-sim"
    run = next(p for p in sample.iterdir() if p.is_dir())
    bench = tmp_path / "bench"
    shutil.copytree(run, bench / "real-time" / run.name)
    fast = bench / "sped-up" / run.name
    shutil.copytree(run, fast)
    meta = json.loads((fast / "meta.json").read_text())
    meta["label"] = "sped-up"
    meta["engine_info"] = {**meta.get("engine_info", {}), "sim_speedup": 20.0}
    (fast / "meta.json").write_text(json.dumps(meta))
    real = json.loads((bench / "real-time" / run.name / "meta.json").read_text())
    (bench / "real-time" / run.name / "meta.json").write_text(json.dumps({**real,
                                                                        "label": "real-time"}))
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(bench))
    pts, shown, skipped = fc.run_points("qwen3.5-9b", ("rtx-4090",), "en")
    assert (shown, skipped) == (1, 1)
    assert pts and all("real-time" in label for _, _, label in pts)
    assert "speed-up other than 1" in t("frv_measured_note", "en", runs=1, skipped=1, pub=0)
