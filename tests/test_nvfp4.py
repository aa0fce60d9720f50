"""NVFP4 weights and Blackwell's FP4 tensor cores (data/weight_formats.toml `nvfp4`, the GPUs'
`fp4_tflops`; docs/method.md, "NVFP4 and the FP4 tensor rate"), each figure by hand."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from capacity.catalog import custom as cc
from capacity.catalog.loader import default_catalog
from capacity.catalog.matmul import UNMEASURED_CEILING, matmul_ceiling, typical_ceiling
from capacity.fit.planning import scenario_with_basis
from capacity.model.ep_knobs import SPEC_KNOBS, planning_ep_knobs
from capacity.model.expert_parallel import ep_layout, ep_setup, prefill_tok_s_per_gpu
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.options import PlanInputs
from capacity.plan.search import plan


def test_the_format_is_four_bits_and_an_fp8_scale_per_sixteen() -> None:
    fmt = default_catalog().formats["nvfp4"]
    assert fmt.bits_per_weight == 4 + 8 / 16 and fmt.compute_dtype == "fp4"
    assert fmt.embedding_bits == 16 and fmt.generic


def test_weights_by_hand() -> None:
    """Llama-3.1-8B: (P - E) x 4.5 / 8 + E x 16 / 8, E = 2 x 128,256 x 4,096 (untied)."""
    v = default_catalog().variant("llama-3.1-8b", "nvfp4")
    m = v.model
    emb = 2 * 128_256 * 4_096 / 1e9
    assert m.lookup_params_b + m.head_params_b == pytest.approx(emb)
    assert v.weights_gb == pytest.approx((m.params_total_b - emb) * 0.5625 + emb * 2.0)
    assert not v.weights_stated
    # smaller than FP8, a little larger than AWQ's 4.25 bits
    cat = default_catalog()
    assert (cat.variant("llama-3.1-8b", "awq").weights_gb < v.weights_gb
            < cat.variant("llama-3.1-8b", "fp8").weights_gb)


@pytest.mark.parametrize(("gpu", "fp4", "over_fp8"), [
    ("b200", 9000.0, 2.0), ("gb200", 10000.0, 2.0),
    ("rtx-5090", 1676.0, 4.0)])  # GeForce: FP8 with FP32 accumulate runs at half rate, FP4 not
def test_blackwell_runs_fp4_at_its_tensor_rate(gpu: str, fp4: float, over_fp8: float) -> None:
    g = default_catalog().gpu(gpu)
    assert g.fp4_tflops == fp4 and g.tflops_for("fp4") == fp4
    assert fp4 == pytest.approx(over_fp8 * g.tflops_for("fp8"))


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200-sxm", "a100-80gb-sxm", "rtx-4090", "mi300x"])
def test_without_fp4_tensor_cores_the_weights_run_in_bf16(gpu: str) -> None:
    """W4A16: the weights are dequantized (vLLM's Marlin path) and the GEMM runs at bf16."""
    g = default_catalog().gpu(gpu)
    assert g.fp4_tflops is None and g.tflops_for("fp4") == g.bf16_tflops
    assert matmul_ceiling(g, "fp4") == matmul_ceiling(g, "bf16")
    assert typical_ceiling(g, "fp4") == typical_ceiling(g, "bf16")


def test_an_fp4_gemm_serves_at_the_fp8_gemms_rate_on_the_typical_basis() -> None:
    """`FP4_AT_FP8_RATE`: on FP4 tensor cores the typical basis' ceiling is the FP8 GEMM's
    TFLOP/s over the FP4 peak (the spec sheet keeps the FP4 peak)."""
    cat = default_catalog()
    b200, gb200, rtx = cat.gpu("b200"), cat.gpu("gb200"), cat.gpu("rtx-5090")
    assert matmul_ceiling(b200, "fp4") is None
    assert typical_ceiling(b200, "fp4") == pytest.approx(3432.5 / 9000.0)  # B200 FP8 MAMF
    assert typical_ceiling(gb200, "fp4") == pytest.approx(3615.6 / 10000.0)
    # nothing measured on an RTX 5090: the median share of its FP8 rate (FP32 accumulate)
    assert typical_ceiling(rtx, "fp4") == pytest.approx(UNMEASURED_CEILING * 419.0 / 1676.0)
    s = scenario_with_basis(make_scenario("llama-3.1-70b-nvfp4", "b200"), "typical:vllm")
    f8 = scenario_with_basis(make_scenario("llama-3.1-70b-fp8", "b200"), "typical:vllm")
    assert s.tflops * s.mfu == pytest.approx(f8.tflops * f8.mfu)  # the same prefill TFLOP/s
    assert scenario_with_basis(s, "spec").tflops == 9000.0


def test_a_blackwell_step_reads_fp4_weights_and_prefills_at_the_fp4_peak() -> None:
    """On the spec sheet, B200: the step reads the NVFP4 bytes (half of FP8's, about), the
    prompt's FLOPs run at 9,000 TFLOP/s against FP8's 4,500."""
    fp4 = make_scenario("llama-3.1-70b-nvfp4", "b200")
    fp8 = make_scenario("llama-3.1-70b-fp8", "b200")
    e4, e8 = evaluate(fp4, [1]), evaluate(fp8, [1])
    assert fp4.variant.weights_gb / fp8.variant.weights_gb == pytest.approx(0.57, abs=0.02)
    weights = fp4.variant.weights_gb / fp8.variant.weights_gb
    step = float(e4.decode.step_ms[0]) / float(e8.decode.step_ms[0])
    assert weights < step < weights + 0.05  # the weights' bytes, plus the same KV read
    assert fp4.tflops == 9000.0 and fp8.tflops == 4500.0
    on_h100 = make_scenario("llama-3.1-70b-nvfp4", "h100-sxm", n_gpus=2, tp=2)
    assert on_h100.tflops == 989.0  # W4A16 there


def test_the_planner_offers_nvfp4_on_blackwell() -> None:
    """The search tries every generic format: on B200s an NVFP4 replica steps faster than the
    FP8 one of the same layout (fewer bytes a step)."""
    wl = Workload(peak_concurrency=64.0, context_tokens=4096, prompt_tokens=2000,
                  output_tokens=500)
    p = plan(PlanInputs(model="llama-3.1-70b", workload=wl, gpus=("b200",),
                        formats=("fp8", "nvfp4"), kv_dtypes=("fp8",)), keep_all=True)
    by = {(o.weights, o.n_gpus, o.tp): o for o in p.all_options}
    fp4, fp8 = by[("nvfp4", 1, 1)], by[("fp8", 1, 1)]
    assert fp4.weights_gb < 0.6 * fp8.weights_gb and fp4.tpot_ms < fp8.tpot_ms


def _prefill(weights: str, **knobs: Any) -> float:
    lay = ep_layout("gb200", 2)
    s = ep_setup("deepseek-v3", "gb200", lay, context_tokens=2048, weights=weights,
                 kv_dtype="fp8")
    return prefill_tok_s_per_gpu(s, 2048, knobs=replace(SPEC_KNOBS, **knobs))


def test_mla_and_the_dense_layers_stay_at_the_fp8_peak_with_nvfp4_experts() -> None:
    """`dense_dtype` fp8: per prompt token the shared GEMMs, 2 S' FLOPs (S' = the parameters
    outside the routed experts less the looked-up embedding), take 2 S' / F8 instead of 2 S' /
    F4 (GB200: 5,000 and 10,000 TFLOP/s); FP8 weights run there anyway."""
    m = default_catalog().variant("deepseek-v3", "nvfp4").model
    shared = (m.params_total_b - m.expert_params_b - m.lookup_params_b) * 1e9
    slower = 1 / _prefill("nvfp4", dense_dtype="fp8") - 1 / _prefill("nvfp4")
    assert slower == pytest.approx(2 * shared * (1 / 5000e12 - 1 / 10000e12), rel=1e-9)
    assert _prefill("fp8", dense_dtype="fp8") == pytest.approx(_prefill("fp8"), rel=1e-12)
    assert planning_ep_knobs().dense_dtype == "fp8"


def test_a_custom_gpu_states_its_fp4_rate(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    table = cc.gpu_form_table(
        key="my-blackwell", name="My Blackwell", memory_gb=96, memory_type="GDDR7",
        bandwidth_gb_s=1800, bf16_tflops=250, fp8_tflops=500, int8_tops=None,
        interconnect="PCIe 5.0", interconnect_kind="pcie", interconnect_gb_s=50,
        price_per_hour=3, currency="USD", price_source="test", source="test", as_of="2026-12",
        fp4_tflops=1000)
    assert table["fp4_tflops"] == 1000
    no_fp4 = cc.gpu_form_table(**{**{k: table[k] for k in (
        "key", "name", "memory_gb", "memory_type", "bandwidth_gb_s", "bf16_tflops",
        "fp8_tflops", "interconnect", "interconnect_kind", "interconnect_gb_s",
        "price_per_hour", "currency", "price_source", "source", "as_of")},
        "int8_tops": None, "fp4_tflops": 0})
    assert "fp4_tflops" not in no_fp4
