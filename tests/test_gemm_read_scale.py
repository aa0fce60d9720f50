"""F6c's m_half on each device and weight format (`capacity.model.moe.gemm_read_scale`): m_half
is where a GEMM's arithmetic takes as long as reading its weights, m = F b / (2 BW), so it moves
with the device's FLOP/s per byte and the weights' stored bytes against the H100 SXM bf16
reference it was measured on. Every expected value is computed by hand in the comments."""

from __future__ import annotations

import pytest

from capacity.catalog.loader import default_catalog
from capacity.model.moe import (
    DENSE,
    Routing,
    gemm_bytes_per_param,
    gemm_read_scale,
    routing_of,
    routing_on,
)
from capacity.model.prefill import step_mfu
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.events import service_from_scenario
from capacity.plan.options import PlanInputs
from capacity.plan.search import plan

H100_RIDGE = 989e12 / 3350e9
"""The reference ridge, FLOP per byte (H100 SXM bf16 / HBM3): 295.2."""


def test_reference_is_one() -> None:
    # H100 SXM bf16: (989 x 2 / 2 / 3350) / (989 / 3350) = 1
    assert gemm_read_scale(989.0, 3350.0, 2.0) == pytest.approx(1.0, rel=1e-12)
    # FP8 W8A8 on an H100 runs at the fp8 peak (1979) on 1-byte weights:
    # (1979 x 1 / 2 / 3350) / (989 / 3350) = 1979 / 1978 = 1.0005 (the same ridge in tokens)
    assert gemm_read_scale(1979.0, 3350.0, 1.0) == pytest.approx(1979 / 1978, rel=1e-12)


def test_other_devices_and_formats_by_hand() -> None:
    # A100 80GB bf16: 312e12 / 2039e9 = 153.02 FLOP/B -> 153.02 / 295.22 = 0.5183
    assert gemm_read_scale(312.0, 2039.0, 2.0) == pytest.approx(
        (312e12 / 2039e9) / H100_RIDGE, rel=1e-12)
    assert gemm_read_scale(312.0, 2039.0, 2.0) == pytest.approx(0.5183, abs=1e-4)
    # RTX 3090 bf16: 71e12 / 936e9 = 75.85 -> 0.2569
    assert gemm_read_scale(71.0, 936.0, 2.0) == pytest.approx(0.2569, abs=1e-4)
    # 4-bit weights dequantized to bf16 on an H100, 0.55 bytes each: 0.55 / 2 = 0.275
    assert gemm_read_scale(989.0, 3350.0, 0.55) == pytest.approx(0.275, rel=1e-12)
    # nothing to scale by: a device without a rate keeps the reference's
    assert gemm_read_scale(0.0, 3350.0, 2.0) == 1.0
    assert gemm_read_scale(989.0, 3350.0, 0.0) == 1.0


def test_gemm_bytes_per_param_by_hand() -> None:
    cat = default_catalog()
    # Llama-3.1-8B BF16: (16.06 - 1.051) GB / (8.03 - 0.5253) B = 2.0 bytes
    assert gemm_bytes_per_param(cat.variant("llama-3.1-8b", "bf16")) == pytest.approx(2.0, abs=1e-3)
    # gpt-oss-120b MXFP4 (a stated 69.13 GB; its 0.579 B-parameter embedding table at the
    # weights' average, 0.343 GB): (69.13 - 0.343) / (116.8 - 0.579) = 0.5919
    v = cat.variant("gpt-oss-120b", "mxfp4")
    assert v.lookup_bytes == pytest.approx(0.3428e9, rel=1e-3)
    assert gemm_bytes_per_param(v) == pytest.approx((69.13e9 - v.lookup_bytes)
                                                    / ((116.8 - 0.57913344) * 1e9), rel=1e-12)
    assert gemm_bytes_per_param(v) == pytest.approx(0.5919, abs=1e-4)


def test_scale_multiplies_m_half_in_step_mfu() -> None:
    # dense, scale 0.5, plateau 0.6, m_half 262, 262 tokens: 0.6 / (1 + 0.5^2.5)^0.4 = 0.5622
    half = Routing(read_scale=0.5)
    assert float(step_mfu(262, mfu=0.6, half_tokens=262.0, routing=half)) == pytest.approx(
        0.6 / (1 + 0.5 ** 2.5) ** 0.4) == pytest.approx(0.562178, abs=1e-6)
    # the reference (scale 1), at its ridge: 0.6 / 2^0.4 = 0.4547
    assert float(step_mfu(262, mfu=0.6, half_tokens=262.0, routing=DENSE)) == pytest.approx(
        0.6 / 2 ** 0.4)
    # an MoE's weight ratio and the scale multiply: gpt-oss-120b at 5,000 tokens 22.90 x 0.25
    moe = routing_of(default_catalog().models["gpt-oss-120b"], 0.25)
    assert float(moe.half_ratio(5000)) == pytest.approx(
        float(moe.gemm_weight_ratio(5000)) * 0.25, rel=1e-12)
    assert float(moe.half_ratio(5000)) == pytest.approx(5.72, abs=0.01)


def test_scenario_routing_uses_its_device_and_format() -> None:
    # Llama-3.1-8B bf16 on an A100 80GB: the scenario's routing holds the A100's scale, and a
    # 500-token prompt's GEMMs run at 0.622 / (1 + (262 x 0.5183 / 500)^2.5)^0.4
    cat = default_catalog()
    s = make_scenario("llama-3.1-8b", "a100-80gb-sxm", catalog=cat, context_tokens=1024,
                      prompt_tokens=500, mfu=0.622, mfu_half_tokens=262.0)
    b = gemm_bytes_per_param(s.variant)
    assert s.routing == routing_on(s.model, 312.0, 2039.0, b)
    assert s.routing.read_scale == pytest.approx((312e12 * b / 2 / 2039e9) / H100_RIDGE,
                                                 rel=1e-12)
    eff = float(step_mfu(500, mfu=0.622, half_tokens=262.0, routing=s.routing))
    assert eff == pytest.approx(0.622 / (1 + (262.0 * 0.5183 / 500) ** 2.5) ** 0.4, rel=1e-3)
    # the same prompt on an H100 SXM (scale 1) runs at 0.622 / (1 + (262 / 500)^2.5)^0.4: its
    # GEMMs need more rows to hide their weight read behind the arithmetic
    h = make_scenario("llama-3.1-8b", "h100-sxm", catalog=cat, context_tokens=1024,
                      prompt_tokens=500, mfu=0.622, mfu_half_tokens=262.0)
    assert h.routing.read_scale == pytest.approx(1.0, abs=1e-3)
    assert float(step_mfu(500, mfu=0.622, half_tokens=262.0, routing=h.routing)) == \
        pytest.approx(0.622 / (1 + (262 / 500) ** 2.5) ** 0.4, rel=1e-3)
    # one computation: the event model's whole-prompt prefill is the Explorer's F6
    svc = service_from_scenario(s, output_tokens=16, engine="vllm")
    assert svc.routing == s.routing
    assert svc.prefill_ms == pytest.approx(float(evaluate(s, [1]).prefill_s) * 1e3)


def test_planner_prefill_is_the_explorers_on_another_device() -> None:
    # one surface, one number: the Planner's prefill of an option on an A100 with AWQ weights
    # (scale well below 1) is its scenario's TTFT, the same scale on both
    from capacity.plan.detail import option_scenario

    wl = Workload(peak_concurrency=4.0, context_tokens=4096, prompt_tokens=300,
                  output_tokens=200, headroom=0.0)
    inp = PlanInputs(model="qwen3-14b", workload=wl, gpus=("a100-80gb-sxm",), allow_tp=False,
                     max_gpus=1, mfu=0.6, mfu_half_tokens=262.0)
    p = plan(inp, keep_all=True)
    o = next(x for x in p.all_options if x.weights == "awq")
    s = option_scenario(inp, o)
    assert s.routing.read_scale < 0.2
    assert o.prefill_ms == pytest.approx(float(evaluate(s, [1]).ttft_s) * 1e3, rel=1e-9)


def test_spec_sheet_has_no_curve_so_no_scale_moves_it() -> None:
    # without a curve (m_half 0) the scale changes nothing: the spec sheet stays the bound
    s = make_scenario("llama-3.1-8b", "rtx-3090", context_tokens=1024, prompt_tokens=500,
                      mfu=0.622, mfu_half_tokens=0.0)
    assert s.routing.read_scale != 1.0
    assert float(step_mfu(500, mfu=0.622, half_tokens=0.0, routing=s.routing)) == 0.622
