"""F11's per-layer step overhead (`roofline.fixed_step_ms`): the fixed time of a decode step is
a per-step part plus a per-layer part times the model's layers. Expected values by hand."""

from __future__ import annotations

import math

import pytest

from capacity.catalog.loader import Catalog
from capacity.errors import InputError
from capacity.fit.planning import scenario_with_basis, with_basis
from capacity.model.basis import CHAPTER_KNOBS, SPEC_KNOBS, knobs_of
from capacity.model.roofline import fixed_step_ms
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.detail import option_scenario, option_service
from capacity.plan.options import PlanInputs
from capacity.plan.search import plan
from capacity.report.bases import knobs_text
from capacity.report.explain import show_math


def test_fixed_step_ms_by_hand() -> None:
    # 0.5 ms a step + 0.04 ms x 80 layers = 0.5 + 3.2 = 3.7 ms
    assert fixed_step_ms(0.5, 0.04, 80) == pytest.approx(3.7)
    assert fixed_step_ms(0.0, 0.0727, 32) == pytest.approx(2.3264)
    assert fixed_step_ms(2.0, 0.0, 64) == 2.0


def test_the_step_grows_by_layers_times_the_overhead(catalog: Catalog) -> None:
    base = make_scenario("llama-3.1-70b", "h100-sxm", catalog=catalog, weights="fp8",
                         n_gpus=8, tp=8, context_tokens=4096, eta_bw=0.836)
    with_layer = base.with_(layer_overhead_ms=0.0727)
    assert base.model.layers == 80
    a = evaluate(base, [1.0, 64.0]).decode.step_ms
    b = evaluate(with_layer, [1.0, 64.0]).decode.step_ms
    # 80 layers x 0.0727 ms = 5.816 ms on every batch: neither TP nor the batch changes it
    assert list(b - a) == pytest.approx([5.816, 5.816], abs=1e-9)
    assert with_layer.fixed_step_ms == pytest.approx(5.816)
    for bad in (-0.01, math.nan, math.inf):
        with pytest.raises(InputError, match="per-layer step overhead"):
            make_scenario("llama-3.1-70b", "h100-sxm", catalog=catalog, n_gpus=8, tp=8,
                          layer_overhead_ms=bad)


def test_bases_set_it(catalog: Catalog) -> None:
    s = make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog)
    assert scenario_with_basis(s, "typical:vllm").layer_overhead_ms == 0.0773
    assert scenario_with_basis(s, "spec").layer_overhead_ms == 0.0  # the bound: no overhead
    assert scenario_with_basis(s, "").layer_overhead_ms == 0.0  # the chapter's
    # a saved calibration's t0 holds the whole fixed time: it starts from no per-layer part
    typ = scenario_with_basis(s, "typical:vllm")
    assert scenario_with_basis(typ, "rtx-4090-vllm-published").layer_overhead_ms == 0.0
    assert CHAPTER_KNOBS["layer_overhead_ms"] == SPEC_KNOBS["layer_overhead_ms"] == 0.0
    assert knobs_of(typ)["layer_overhead_ms"] == 0.0773


def test_planner_explorer_event_model_and_words_agree(catalog: Catalog) -> None:
    wl = Workload(peak_concurrency=8.0, context_tokens=4096, prompt_tokens=1000,
                  output_tokens=200, headroom=0.0)
    inp = with_basis(PlanInputs(model="llama-3.1-8b-bf16", workload=wl, gpus=("h100-sxm",)),
                     "typical:vllm")
    assert inp.layer_overhead_ms == 0.0773
    best = plan(inp, catalog).best
    assert best is not None
    s = option_scenario(inp, best, catalog)
    assert s.layer_overhead_ms == 0.0773
    svc = option_service(inp, best, catalog)
    # the event model's fixed time per step is the scenario's: 32 layers x 0.0773 = 2.474 ms
    assert svc.overhead_ms == pytest.approx(32 * 0.0773) == s.fixed_step_ms
    assert float(svc.step_ms[4]) == pytest.approx(
        float(evaluate(s, [4.0 * s.replicas]).decode.step_ms[0]), rel=1e-12)
    assert "77.3 us per layer per decode step" in knobs_text(inp, "en")
    assert "每层每个解码步 77.3 μs" in knobs_text(inp, "zh")
    # "show the math": the step's line adds t0 and its terms up to the step
    step = next(m for m in show_math(s, 4) if m.key == "step")
    assert step.formula.startswith("t_step = t0 + max(t_bw, t_compute)")
    # the compute term: 2 x (8.03e9 - 0.525e9) FLOP x 4 sequences at 989 TFLOP/s x eff 0.706
    # x 0.803 (typical vLLM's decode arithmetic at the prefill plateau, on the H100's matmul
    # ceiling; the 128,256 x 4,096 input table a lookup, not multiplied) = 0.107 ms; the read
    # binds (at eta_bw 0.921, the H100's copy ceiling: 3,085.1 of 3,350 GB/s; 5.554 ms with
    # the table read whole, less its 1.051 GB at that rate, 0.341 ms), and F4c's ridge adds
    # (5.213^2.5 + 0.107^2.5)^0.4 - 5.213, under 0.1 us; t0 = 32 layers x 77.3 us
    assert step.substituted.startswith("2.474 + max(5.213, 0.107) = 7.687 ms")


def test_the_explorers_caption_names_the_typical_basis_once(catalog: Catalog) -> None:
    from app.explorer_view import prediction_caption

    s = scenario_with_basis(make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog),
                            "typical:vllm")
    en = prediction_caption(s, "typical:vllm", "en")
    assert en.startswith("Prediction: typical vLLM efficiency (no calibration): decode compute")
    assert "typical typical" not in en and "77.3 us per layer per decode step" in en
    zh = prediction_caption(s, "typical:vllm", "zh")
    assert zh.count("典型效率") == 1 and "每层每个解码步 77.3 μs" in zh
