"""The typical basis with the prefill curve F6c (data/engines.toml) and the scorecard's typical section.

Expected values are worked by hand in the comments, from the numbers in the data file.
"""

from __future__ import annotations

import statistics

import pytest

from capacity.catalog.loader import default_catalog
from capacity.catalog.matmul import (
    UNMEASURED_CEILING,
    matmul_ceiling,
    measured_matmul,
    typical_ceiling,
    typical_mfu,
)
from capacity.fit import validate_typical as vt
from capacity.fit.planning import scenario_with_basis, with_basis
from capacity.fit.typical import parse_engines, typical_efficiency
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.detail import option_scenario
from capacity.plan.options import PlanInputs
from capacity.plan.search import plan
from tests.shipped import shipped


def test_typical_knobs_are_one_set_for_every_gpu() -> None:
    typ = typical_efficiency("vllm")
    # data/engines.toml: plateau 0.706 of the GPU's measured matmul ceiling (median of the
    # published groups' 0.785 and 0.628 on F6c's curve of sharpness 2.5), m_half 262 (XLA's
    # H100 matmul table), eta_bw 1 of each GPU's copy ceiling and 77.3 us per layer (F11),
    # 7.84 ms outside the GPU
    assert (typ.typical["eta_bw"], typ.typical["mfu"], typ.typical["mfu_half_tokens"],
            typ.typical["layer_overhead_ms"]) == (1.0, 0.706, 262.0, 0.0773)
    assert typ.typical["request_latency_ms"] == 7.84
    wl = Workload(peak_concurrency=8.0, context_tokens=4096, prompt_tokens=1000,
                  output_tokens=200, headroom=0.0)
    for gpus in (("h100-sxm",), ("a100-80gb-sxm",), ("h100-sxm", "a100-80gb-sxm"), None):
        inp = with_basis(PlanInputs(model="llama-3.1-8b-bf16", workload=wl, gpus=gpus),
                         "typical:vllm")
        assert (inp.eta_bw, inp.mfu, inp.mfu_half_tokens, inp.layer_overhead_ms,
                inp.request_latency_ms) == (1.0, 0.706, 262.0, 0.0773, 7.84)
        # an option runs the plateau as a share of its own GPU's ceiling, whatever is searched
        # beside it: H100 bf16 0.706 x 794.5 / 989, A100 0.706 x 271.2 / 312
        assert inp.mfu_on(default_catalog().gpu("h100-sxm"), "bf16") == pytest.approx(
            0.706 * 794.5 / 989)
        assert inp.mfu_on(default_catalog().gpu("a100-80gb-sxm"), "bf16") == pytest.approx(
            0.706 * 271.2 / 312)


def test_an_engines_file_without_the_curve_keeps_a_constant_mfu() -> None:
    text = "\n".join(f"[e.{k}]\ntypical = 0.5\nlow = 0.5\nhigh = 0.5" for k in (
        "eta_bw", "eff", "mfu", "step_overhead_ms", "prefill_overhead_ms",
        "draft_overhead_ms", "verify_overhead_ms"))
    typ = parse_engines('[e]\nname = "E"\nsource = "s"\nas_of = "2026"\n' + text)["e"]
    assert typ.typical["mfu_half_tokens"] == 0.0 and typ.typical["mfu"] == 0.5


@pytest.mark.parametrize(("gpu", "searched"), [
    ("h100-sxm", ("h100-sxm",)), ("mi300x", ("mi300x",)), ("mi300x", ("h100-sxm", "mi300x"))])
def test_every_surface_resolves_the_same_typical_knobs(gpu: str, searched: tuple[str, ...]
                                                       ) -> None:
    # the plateau is a share of each GPU's own matmul ceiling (MI300X 0.511, H100 0.803): an
    # option's prefill is the Explorer's of the same deployment, whatever is searched beside it
    wl = Workload(peak_concurrency=8.0, context_tokens=4096, prompt_tokens=1000,
                  output_tokens=200, headroom=0.0)
    inp = with_basis(PlanInputs(model="llama-3.1-8b-bf16", workload=wl, gpus=searched,
                                allow_tp=False, max_gpus=1), "typical:vllm")
    o = next(x for x in plan(inp, keep_all=True).all_options if x.gpu == gpu)
    planner = option_scenario(inp, o)
    explorer = scenario_with_basis(make_scenario("llama-3.1-8b-bf16", gpu,
                                                 weights=o.weights, kv_dtype=o.kv_dtype,
                                                 context_tokens=4096, prompt_tokens=1000),
                                   "typical:vllm")
    a, b = evaluate(planner, [1]), evaluate(explorer, [1])
    assert float(a.ttft_s) == pytest.approx(float(b.ttft_s), rel=1e-12)
    assert float(a.decode.step_ms[0]) == pytest.approx(float(b.decode.step_ms[0]), rel=1e-12)
    # the GPU's part of it: the TTFT also holds the basis' 7.84 ms outside the GPU
    assert o.prefill_ms == pytest.approx(float(a.prefill_s) * 1e3, rel=1e-9)
    assert float(a.ttft_s) * 1e3 == pytest.approx(o.prefill_ms + 7.84, rel=1e-9)


def test_typical_prefill_is_never_faster_than_the_spec_sheet() -> None:
    s = make_scenario("llama-3.1-8b-bf16", "h100-sxm", context_tokens=4096, prompt_tokens=200)
    spec = float(evaluate(scenario_with_basis(s, "spec"), [1]).ttft_s)
    typ = float(evaluate(scenario_with_basis(s, "typical:vllm"), [1]).ttft_s)
    # 200 tokens at plateau 0.706 x 0.803 = 0.567, m_half 262: MFU 0.567 / (1 + 1.31^2.5)^0.4
    # = 0.367 (+ 3.5 ms and 7.84 ms outside the GPU), the chapter's count of the FLOPs
    assert typ > spec / (0.706 * 794.5 / 989 / (1 + (262 / 200) ** 2.5) ** 0.4)


def test_group_plateau_hand_value() -> None:
    # NIM, L = 5000 at C = 1: spec TTFT / measured = 0.534 -> over F6c's curve at 5,000
    # tokens, 0.534 x (1 + (262 / 5000)^2.5)^0.4 = 0.53413; at 500 tokens the curve matters:
    # 0.534 x (1 + 0.524^2.5)^0.4 = 0.534 x 1.07637 = 0.57478
    assert vt.group_plateau(53.4, 100.0, 5000, 262) == pytest.approx(
        0.534 * (1 + (262 / 5000) ** 2.5) ** 0.4)
    assert vt.group_plateau(53.4, 100.0, 500, 262) == pytest.approx(
        0.534 * (1 + (262 / 500) ** 2.5) ** 0.4)
    # an MoE row's weight ratio multiplies m_half: R 2 at 1,000 tokens is m_half 524 there
    assert vt.group_plateau(53.4, 100.0, 1000, 262, 2.0) == pytest.approx(
        0.534 * (1 + (524 / 1000) ** 2.5) ** 0.4)


def test_held_out_knobs_rules() -> None:
    ev = vt.Evidence
    engine = {"eta_bw": 0.65, "mfu": 0.594, "mfu_half_tokens": 262.0}
    others = [ev(plateaus=()), ev(plateaus=(0.9, 0.7)), ev(plateaus=(0.5,))]
    k = vt.held_out_knobs(others, engine)
    # the median of the group medians (0.8, 0.5) = 0.65; the rest are the file's
    assert k["mfu"] == pytest.approx(0.65)
    assert (k["eta_bw"], k["mfu_half_tokens"]) == (0.65, 262.0)
    # no other group with a C = 1 TTFT: the file's plateau
    assert vt.held_out_knobs([ev(plateaus=())], engine)["mfu"] == 0.594
    # capped at the peak
    assert vt.held_out_knobs([ev(plateaus=(1.4,))], engine)["mfu"] == 1.0


@pytest.mark.slow
def test_typical_section_on_the_shipped_rows() -> None:
    card = shipped("typical")
    assert card.rows and {r.metric for r in card.rows} >= {"step", "ttft", "throughput"}
    # the NIM group's plateau is held out: its knobs come from the A100 group alone, whose
    # plateau is median(0.554, 0.537) = 0.546 of the spec sheet (file header; F6c's curve is
    # 1.000 at 16,000 tokens), 0.546 / 0.869 = 0.628 of the A100's matmul ceiling; not the
    # file's 0.706
    nim = next(r for r in card.rows if "(NIM)" in r.group)
    mfu = dict(nim.knobs)["mfu"]
    assert 0.61 < mfu < 0.65 and mfu != pytest.approx(0.706, abs=1e-3)
    md = vt.markdown(card)
    assert "Typical basis, nobody measured" in md
    assert card.error("ttft", True, False).n == 18  # the original rows; added ones apart


def test_an_unmeasured_fp8_ceiling_is_the_gpus_bf16_share_up_to_the_median() -> None:
    """FP8_TRACKS_BF16: the MI300X is measured in bf16 alone (668.4 of 1,307.4: 0.511), so its
    fp8 GEMMs take 0.511, not the median 0.803; the RTX 4090's bf16 share is 1 (a boosting
    card), so its fp8 takes the median; an L40S, measured in neither, the median; a measured
    fp8 figure (H100: 1,402.6 of 1,979) is its own."""
    cat = default_catalog()
    assert typical_ceiling(cat.gpu("mi300x"), "fp8") == pytest.approx(668.4 / 1307.4)
    assert typical_ceiling(cat.gpu("rtx-4090"), "fp8") == UNMEASURED_CEILING
    assert typical_ceiling(cat.gpu("l40s"), "fp8") == UNMEASURED_CEILING
    assert typical_ceiling(cat.gpu("h100-sxm"), "fp8") == pytest.approx(1402.6 / 1979)
    # the seven devices of the MAMF table measured in both: fp8 share / bf16 share 0.88-1.04
    ratios = [(1402.6 / 1979) / (794.5 / 989), (1453.4 / 1979) / (794.5 / 989),
              (1535.0 / 1979) / (828.6 / 989), (3432.5 / 4500) / (1745.0 / 2250),
              (3615.6 / 5000) / (1822.0 / 2500), (826.5 / 865) / (418.7 / 432),
              (1289.5 / 1677) / (1243.0 / 1677)]
    assert 0.88 <= min(ratios) and max(ratios) <= 1.04
    assert statistics.median(ratios) == pytest.approx(0.98, abs=0.01)


def test_the_typical_plateau_is_a_share_of_the_measured_matmul_ceiling() -> None:
    cat = default_catalog()
    h100, mi300x, rtx4090 = cat.gpu("h100-sxm"), cat.gpu("mi300x"), cat.gpu("rtx-4090")
    # data/matmul_ceilings.toml: H100 SXM bf16 794.5 of 989, fp8 1402.6 of 1979; MI300X 668.4
    # of the catalog's 1307.4; the RTX 4090 reaches its spec sheet (1); an L40S is not
    # measured: the data-centre GPUs' median share, 0.803
    assert typical_ceiling(h100, "bf16") == pytest.approx(794.5 / 989)
    assert typical_ceiling(h100, "fp8") == pytest.approx(1402.6 / 1979)
    assert typical_ceiling(mi300x, "bf16") == pytest.approx(668.4 / 1307.4)
    assert typical_ceiling(rtx4090, "bf16") == 1.0
    assert typical_ceiling(cat.gpu("l40s"), "bf16") == UNMEASURED_CEILING
    assert typical_mfu(0.706, h100, "bf16") == pytest.approx(0.706 * 794.5 / 989)   # 0.567
    assert typical_mfu(0.706, mi300x, "bf16") == pytest.approx(0.706 * 668.4 / 1307.4)  # 0.361
    assert typical_mfu(1.5, h100, "bf16") == 1.0  # never past the spec sheet
    # the share assumed where nothing is measured: the median of the bundled bf16 shares
    shares = [matmul_ceiling(g, "bf16") for g in cat.gpus.values()
              if measured_matmul(g.key) is not None]
    assert len(shares) == 10
    # ... below the spec sheet: the GeForce cards at theirs (their clocks boost past the
    # reference) are left out
    assert UNMEASURED_CEILING == pytest.approx(statistics.median(
        x for x in shares if x is not None and x < 1), abs=5e-4)
    # a scenario on the typical basis runs its GPU's plateau: MI300X prefill at 0.361 of its
    # spec sheet, not the H100's 0.567
    for gpu, want in (("h100-sxm", 0.706 * 794.5 / 989), ("mi300x", 0.706 * 668.4 / 1307.4)):
        s = scenario_with_basis(make_scenario("llama-3.1-8b-bf16", gpu, context_tokens=4096),
                                "typical:vllm")
        assert s.mfu == pytest.approx(want)


def test_the_disaggregated_pools_prefill_as_the_explorer_does() -> None:
    # the disaggregated search prices a prefill replica with the plateau of its own GPU (an
    # MI300X 0.706 x 0.511, an H100 0.706 x 0.803), as the Explorer's Scenario of it (its GPU
    # time: the TTFT also holds the basis' time outside the GPU)
    from capacity.plan import disagg

    wl = Workload(peak_concurrency=8.0, context_tokens=4096, prompt_tokens=1000,
                  output_tokens=200, headroom=0.0)
    inp = with_basis(PlanInputs(model="llama-3.1-8b-bf16", workload=wl,
                                gpus=("h100-sxm", "mi300x")), "typical:vllm")
    _, units, _ = disagg._units(inp, default_catalog())
    seen = set()
    for u in units:
        if u.tp != 1:
            continue
        s = scenario_with_basis(make_scenario("llama-3.1-8b-bf16", u.gpu.key, weights=u.weights,
                                              kv_dtype=u.kv, context_tokens=4096,
                                              prompt_tokens=1000), "typical:vllm")
        assert u.prefill_ms == pytest.approx(float(evaluate(s, [1]).prefill_s) * 1e3, rel=1e-9)
        seen.add(u.gpu.key)
    assert seen == {"h100-sxm", "mi300x"}


def test_the_explorer_says_where_the_plateau_comes_from() -> None:
    # the caption of a typical prediction names the share of the GPU's matmul ceiling and the
    # ceiling: measured for an MI300X (668.4 of 1307.4 TFLOP/s) and an RTX 4090 (its spec
    # sheet), the median for an L40S
    from app.explorer_view import prediction_caption

    mi = scenario_with_basis(make_scenario("llama-3.1-8b-bf16", "mi300x", context_tokens=4096),
                             "typical:vllm")
    en = prediction_caption(mi, "typical:vllm", "en")
    assert ("prefill plateau 0.36 = 0.71 x 0.511 and decode compute eff 0.36 = 0.71 x 0.511, "
            "the MI300X's fastest measured GEMM as a share of its spec sheet") in en
    assert "0.71 × 0.511" in prediction_caption(mi, "typical:vllm", "zh")
    # SGLang's eff is its own share of the same ceiling (0.374 x 0.511 = 0.19)
    sg = prediction_caption(scenario_with_basis(mi, "typical:sglang"), "typical:sglang", "en")
    assert "decode compute eff 0.19 = 0.37 x 0.511" in sg
    rtx = scenario_with_basis(make_scenario("llama-3.1-8b-bf16", "rtx-4090", context_tokens=4096),
                              "typical:vllm")
    assert "0.71 x 1.000, the RTX 4090's fastest measured GEMM" in prediction_caption(
        rtx, "typical:vllm", "en")
    l40s = scenario_with_basis(make_scenario("llama-3.1-8b-bf16", "l40s", context_tokens=4096),
                               "typical:vllm")
    assert "(the L40S's is not measured)" in prediction_caption(l40s, "typical:vllm", "en")
    # a precision measured only in bf16 takes that share, and says so (not "the median")
    for model, gpu, share, dtype in (("llama-3.1-8b-fp8", "mi300x", "0.511", "FP8"),):
        low = scenario_with_basis(make_scenario(model, gpu, context_tokens=4096), "typical:vllm")
        text = prediction_caption(low, "typical:vllm", "en")
        assert (f"0.71 x {share}, the {low.gpu.name}'s fastest measured BF16 GEMM as a share of "
                f"its spec sheet (its {dtype} GEMM is not measured") in text, text
        assert "median of the measured GPUs' fastest GEMM" not in text
    # NVFP4 without FP4 tensor cores runs its GEMMs in BF16 (W4A16): that measured share
    hop = scenario_with_basis(make_scenario("llama-3.1-8b-nvfp4", "h100-sxm", context_tokens=4096),
                              "typical:vllm")
    assert ("0.71 x 0.803, the H100 SXM's fastest measured GEMM as a share of its spec sheet;"
            in prediction_caption(hop, "typical:vllm", "en"))
    # NVFP4 on Blackwell: the FP8 GEMM's rate over the FP4 peak (`FP4_AT_FP8_RATE`)
    fp4 = scenario_with_basis(make_scenario("llama-3.1-8b-nvfp4", "b200", context_tokens=4096),
                              "typical:vllm")
    assert ("0.71 x 0.381, the B200's FP8 GEMM rate as a share of its FP4 peak"
            in prediction_caption(fp4, "typical:vllm", "en"))
    # the spec sheet and the chapter's say nothing of it
    spec = scenario_with_basis(mi, "spec")
    assert "plateau" not in prediction_caption(spec, "spec", "en")
    # the per-linear-attention-layer prefill time is named only for a model that has such
    # layers (Qwen3.5-9B's 24 Gated DeltaNet layers; Llama-3.1-8B has none)
    assert "linear-attention layer" not in en
    qwen = scenario_with_basis(make_scenario("qwen3.5-9b", "h100-sxm", context_tokens=4096),
                               "typical:vllm")
    assert "0.2 ms per linear-attention layer" in prediction_caption(qwen, "typical:vllm", "en")
