"""F6's fixed time per linear-attention layer (`prefill.fixed_prefill_ms`): the typical basis'
launch-and-latency floor of a Gated DeltaNet layer's prefill kernels (data/engines.toml,
`linear_prefill_ms`), on every surface that prices a prefill. Hand values in the comments."""

from __future__ import annotations

import pytest

from capacity.catalog.loader import Catalog
from capacity.fit.planning import scenario_with_basis, with_typical
from capacity.fit.typical import typical_efficiency
from capacity.model.basis import CHAPTER_KNOBS, SPEC_KNOBS
from capacity.model.prefill import fixed_prefill_ms
from capacity.model.prefix import cached_prefill_s
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.detail import option_scenario
from capacity.plan.options import PlanInputs
from capacity.plan.search import plan
from capacity.report.bases import knobs_text


def test_fixed_prefill_ms_by_hand() -> None:
    # 3.5 ms + 24 layers x 0.2 ms = 8.3 ms; no linear layer: the overhead alone
    assert fixed_prefill_ms(3.5, 0.2, 24) == pytest.approx(8.3)
    assert fixed_prefill_ms(3.5, 0.2, 0) == 3.5
    assert fixed_prefill_ms(0.0, 0.0, 24) == 0.0


def test_the_typical_basis_sets_it_and_the_bounds_do_not(catalog: Catalog) -> None:
    assert typical_efficiency("vllm").typical["linear_prefill_ms"] == 0.2
    assert typical_efficiency("sglang").typical["linear_prefill_ms"] == 0.2
    assert CHAPTER_KNOBS["linear_prefill_ms"] == SPEC_KNOBS["linear_prefill_ms"] == 0.0
    s = make_scenario("qwen3.5-9b", "h100-sxm", catalog=catalog, context_tokens=1024,
                      prompt_tokens=342)
    assert s.model.layers_of("linear") == 24
    typ = scenario_with_basis(s, "typical:vllm")
    assert typ.linear_prefill_ms == 0.2
    assert scenario_with_basis(s, "spec").linear_prefill_ms == 0.0
    # the prefill of a Qwen3.5-9B prompt grows by 24 x 0.2 = 4.8 ms, a dense model's by nothing
    without = typ.with_(linear_prefill_ms=0.0)
    grow = float(evaluate(typ, [1]).prefill_s - evaluate(without, [1]).prefill_s) * 1e3
    assert grow == pytest.approx(4.8)
    dense = scenario_with_basis(make_scenario("llama-3.1-8b", "h100-sxm", catalog=catalog,
                                              context_tokens=1024, prompt_tokens=342),
                                "typical:vllm")
    assert float(evaluate(dense, [1]).prefill_s) == pytest.approx(
        float(evaluate(dense.with_(linear_prefill_ms=0.0), [1]).prefill_s))
    # a prefix hit prefills the rest of its prompt: the layers' floor once as well
    hit = float(cached_prefill_s(typ, 342, 100) - cached_prefill_s(without, 342, 100)) * 1e3
    assert hit == pytest.approx(4.8)
    assert "0.2 ms per linear-attention layer per prefill" in knobs_text(typ, "en")
    assert "每个线性注意力层每次预填充 0.2 ms" in knobs_text(typ, "zh")
    assert "linear-attention" not in knobs_text(scenario_with_basis(s, "spec"), "en")


def test_the_planner_prices_it_as_the_scenario_does(catalog: Catalog) -> None:
    # one option of the Planner's search on typical vLLM: its TTFT at no load is the
    # Explorer's scenario's prefill (the same fixed time, the same formula)
    wl = Workload(peak_concurrency=1.0, context_tokens=1024, prompt_tokens=342,
                  output_tokens=128, headroom=0.0)
    inp = with_typical(PlanInputs(model="qwen3.5-9b", workload=wl, gpus=("h100-sxm",),
                                  max_gpus=1), typical_efficiency("vllm"))
    assert inp.linear_prefill_ms == 0.2
    assert inp.fixed_prefill_ms(make_scenario("qwen3.5-9b", "h100-sxm").model) == \
        pytest.approx(3.5 + 24 * 0.2)
    best = plan(inp, catalog).best
    assert best is not None
    s = option_scenario(inp, best, catalog)
    assert s.linear_prefill_ms == 0.2
    assert best.prefill_ms == pytest.approx(float(evaluate(s, [1]).prefill_s) * 1e3, rel=1e-6)
