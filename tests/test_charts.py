"""Chart data and Vega-Lite specs (capacity.report.charts): numbers from `evaluate`, complete specs."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from capacity.catalog.loader import default_catalog
from capacity.model.scenario import Scenario, evaluate, make_scenario
from capacity.report.charts import (
    ALL_CHARTS,
    DEFAULT_LABELS,
    chart_data,
    concurrency_grid,
    datasets,
    decode_intensity,
    specs,
)
from capacity.report.urlstate import DEFAULT_STATE


@pytest.fixture(scope="module")
def seed() -> Scenario:
    return DEFAULT_STATE.scenario(default_catalog())


def _walk(node: Any) -> list[dict[str, Any]]:
    out = []
    if isinstance(node, dict):
        out.append(node)
        for v in node.values():
            out += _walk(v)
    elif isinstance(node, list):
        for v in node:
            out += _walk(v)
    return out


def test_grid_is_whole_numbers_and_holds_the_chosen_point() -> None:
    g = concurrency_grid(77, 53, points=400)
    assert g[0] == 1 and 77 in g and np.all(g == np.round(g))
    assert g[-1] >= 154 and np.all(np.diff(g) > 0)
    assert len(concurrency_grid(500, 53)) >= 300  # hundreds of points


def test_curves_are_the_evaluated_numbers(seed: Scenario) -> None:
    d = chart_data(seed, 50)
    ev = evaluate(seed, d.curves["concurrency"].to_numpy())
    assert np.allclose(d.curves["step_ms"], ev.decode.step_ms)
    assert np.allclose(d.curves["aggregate_tok_s"], ev.aggregate_tok_s)
    row = d.curves[d.curves["concurrency"] == 50].iloc[0]
    assert round(row["bandwidth_ms"], 2) == 18.97 and round(row["compute_ms"], 2) == 5.45
    assert row["verdict"] == "tight"
    assert d.c_vram == 53 and d.usable_gb == pytest.approx(21.6)


def test_vram_bar_adds_up(seed: Scenario) -> None:
    d = chart_data(seed, 50)
    parts = dict(zip(d.vram["segment"], d.vram["gb"], strict=True))
    assert parts["weights"] == pytest.approx(5.7) and parts["overhead"] == pytest.approx(1.5)
    assert parts["kv"] == pytest.approx(50 * 268_435_456 / 1e9)
    assert sum(parts.values()) == pytest.approx(24.0)  # the whole card
    over = chart_data(seed, 100)
    parts = dict(zip(over.vram["segment"], over.vram["gb"], strict=True))
    assert "free" not in parts  # 34 GB needed: nothing free
    assert parts["weights"] + parts["overhead"] + parts["kv"] > over.usable_gb


def test_ttft_curve_has_linear_and_attention(seed: Scenario) -> None:
    d = chart_data(seed, 50)
    at_8k = d.ttft[d.ttft["prompt_tokens"] == 8192].iloc[0]
    assert round(at_8k["linear_s"], 3) == 2.975
    assert at_8k["attention_s"] > at_8k["linear_s"]
    assert np.all(np.diff(d.ttft["attention_s"]) > 0)


def test_roofline_ridge_and_points(seed: Scenario) -> None:
    d = chart_data(seed, 50)
    assert d.ridge_flop_per_byte == pytest.approx(163.9, abs=0.1)
    pts = d.roof_points.set_index("point")
    # bandwidth-bound decode at eff = 1 sits exactly on the roof, left of the ridge
    assert pts.loc["decode", "tflops"] == pytest.approx(pts.loc["decode", "roof_tflops"])
    assert pts.loc["decode", "intensity"] < d.ridge_flop_per_byte
    # prefill is compute-bound: right of the ridge, at F x MFU below the roof
    assert pts.loc["prefill", "intensity"] > d.ridge_flop_per_byte
    assert pts.loc["prefill", "tflops"] < pts.loc["prefill", "roof_tflops"]
    flops, moved = decode_intensity(seed, np.array([50.0]), np.array([268_435_456.0]))
    assert flops[0] == pytest.approx(9e11) and moved[0] == pytest.approx(5.7e9 + 50 * 268435456)


@pytest.mark.slow
def test_every_spec_is_complete_json_with_tooltips(seed: Scenario) -> None:
    out = specs(chart_data(seed, 50))
    assert list(out) == list(ALL_CHARTS)
    for name, spec in out.items():
        json.dumps(spec, allow_nan=False)  # NaN/inf would break the browser
        nodes = _walk(spec)
        used = {n["name"] for n in nodes if set(n) == {"name"}}
        assert used <= set(spec["datasets"]), name
        marks = [n for n in nodes if "mark" in n]
        assert marks and all("tooltip" in m.get("encoding", {}) for m in marks
                             if m["mark"]["type"] in ("circle", "point", "bar", "rule")), name


def test_rules_follow_the_inputs(seed: Scenario) -> None:
    data = datasets(chart_data(seed, 50, slo_tpot_ms=40, slo_cost=0))
    step = data["step_time"]
    assert step["v_chosen"]["x"].tolist() == [50]
    assert step["v_cvram"]["x"].tolist() == [53]
    assert step["h_slo"]["y"].tolist() == [40]
    assert data["cost"]["h_slo"].empty  # no cost target, no rule


@pytest.mark.slow
def test_labels_are_translatable(seed: Scenario) -> None:
    labels = {**DEFAULT_LABELS, "bandwidth": "带宽项", "concurrency": "并发请求数"}
    spec = specs(chart_data(seed, 50), labels)["step_time"]
    text = json.dumps(spec, ensure_ascii=False)
    assert "带宽项" in text and "并发请求数" in text and "bandwidth term" not in text


def test_chinese_rule_labels_and_titles_use_full_width_punctuation(seed: Scenario) -> None:
    """'所选并发: 50', '显存: 24.0 GB' and '每百万 token 成本 (CNY)' until 2026-12-08: a rule's
    label and a title's unit in the language's colon and brackets (the labels travel as the
    charts' data, which the Chinese page scan in tests/test_chinese_pages.py does not read)."""
    from app.i18n import chart_labels

    d = chart_data(seed, 50, slo_tpot_ms=40, slo_cost=1.0)
    zh = datasets(d, chart_labels("zh"))
    labels = [str(v) for sets in zh.values() for df in sets.values() if "label" in df
              for v in df["label"] if isinstance(v, str)]
    assert any(x.startswith("所选并发：50") for x in labels), labels
    assert any(x.startswith("显存：") and x.endswith(" GB") for x in labels), labels
    assert not [x for x in labels if ": " in x], labels
    en = datasets(d, chart_labels("en"))["step_time"]["v_chosen"]["label"].tolist()
    assert en == ["chosen concurrency: 50"]
    spec = json.dumps(specs(d, chart_labels("zh"))["cost"], ensure_ascii=False)
    assert f"每百万 token 成本（{d.currency}）" in spec and f"({d.currency})" not in spec


@pytest.mark.slow
@pytest.mark.parametrize(("model", "gpu", "gpus", "tp"), [
    pytest.param("deepseek-v3", "h200-sxm", 8, 8, id="mla-moe-tp8"),
    pytest.param("qwen3-30b-a3b", "rtx-4090", 2, 1, id="moe-replicas"),
    pytest.param("gemma-3-27b", "a100-80gb-sxm", 1, 1, id="sliding"),
])
def test_other_layouts_chart_without_error(model: str, gpu: str, gpus: int, tp: int) -> None:
    s = make_scenario(model, gpu, n_gpus=gpus, tp=tp)
    out = specs(chart_data(s, 64))
    assert all(spec["datasets"] for spec in out.values())
    json.dumps(out, allow_nan=False)
