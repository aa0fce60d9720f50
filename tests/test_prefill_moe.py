"""F6c for MoE models: a prefill pass's expert GEMMs read every expert the pass touches while
its FLOPs count k experts per token, so the pass reaches its plateau as if m_half were
m_half x R(m) (`capacity.model.moe.Routing.gemm_weight_ratio`). Every expected value is
computed by hand in the comments."""

from __future__ import annotations

import pytest

from capacity.catalog.loader import default_catalog
from capacity.model.forward_pass import pass_slowdown
from capacity.model.moe import DENSE, Routing, routing_of
from capacity.model.prefill import PrefillFlops, prefill_seconds_by_parts, step_mfu
from capacity.model.scenario import evaluate, make_scenario
from capacity.plan.events import service_from_scenario

TOY = Routing(expert_fraction=0.5, experts=4, active=1)
"""Half the weights in 4 experts, one per token: one token uses 0.5 + 0.5 / 4 = 0.625 of W."""


def test_weight_ratio_hand_values() -> None:
    # m = 1: one token reads what it uses -> 1
    # m = 2: touched share 1 - 0.75^2 = 0.4375 -> (0.5 + 0.21875) / 0.625 = 1.15
    # m = 100: every expert (1 - 0.75^100 ~ 1) -> 1 / 0.625 = 1.6
    got = TOY.gemm_weight_ratio([1, 2, 100])
    assert got.tolist() == pytest.approx([1.0, 1.15, 1.6])
    assert DENSE.gemm_weight_ratio([1, 5000]).tolist() == [1.0, 1.0]


def test_gpt_oss_120b_ratio() -> None:
    # the catalog's gpt-oss-120b: f = 115.303 / 116.8 (expert / total parameters), E 128, k 4;
    # a 5,000-token pass touches every expert: 1 / ((1 - f) + f x 4 / 128) = 22.90
    r = routing_of(default_catalog().models["gpt-oss-120b"])
    f = 115.30322580645162 / 116.8
    assert (r.experts, r.active, r.expert_fraction) == (128, 4, pytest.approx(f))
    assert float(r.gemm_weight_ratio(5000)) == pytest.approx(1 / ((1 - f) + f * 4 / 128))
    assert float(r.gemm_weight_ratio(5000)) == pytest.approx(22.90, abs=0.01)
    assert routing_of(default_catalog().models["llama-3.1-8b"]) is DENSE


def test_step_mfu_and_slowdown_with_routing() -> None:
    # plateau 0.7, m_half 128, TOY at 100 tokens (R 1.6): m_half R / m = 2.048, so
    # 0.7 / (1 + 2.048^2.5)^0.4 = 0.7 / 2.1783 = 0.32137
    assert float(step_mfu(100, mfu=0.7, half_tokens=128, routing=TOY)) == pytest.approx(
        0.7 / (1 + 2.048 ** 2.5) ** 0.4) == pytest.approx(0.321366, abs=1e-6)
    # dense: 0.7 / (1 + 1.28^2.5)^0.4
    assert float(step_mfu(100, mfu=0.7, half_tokens=128)) == pytest.approx(
        0.7 / (1 + 1.28 ** 2.5) ** 0.4)
    # slowdown = (1 + (m_half R / m)^2.5)^0.4 - 1: 1.1783 (dense 0.5770); none without a curve
    assert pass_slowdown(100, 128, TOY) == pytest.approx((1 + 2.048 ** 2.5) ** 0.4 - 1)
    assert pass_slowdown(100, 128) == pytest.approx((1 + 1.28 ** 2.5) ** 0.4 - 1)
    assert pass_slowdown(100, 128, TOY) > pass_slowdown(100, 128)
    assert pass_slowdown(100, 0.0, TOY) == 0.0


def test_by_parts_with_routing() -> None:
    # 1e13 FLOP linear on 100 TFLOP/s, plateau 0.6, m_half 250, 1,000 tokens, TOY (R 1.6):
    # MFU 0.6 / (1 + 0.4^2.5)^0.4 = 0.577306 -> 1e13 / 5.77306e13 = 0.173218 s (dense, 0.25:
    # 0.168731 s)
    pf = PrefillFlops(prompt_tokens=1000.0, linear_flops=1e13, attention_flops=0.0)  # type: ignore[arg-type]
    t = prefill_seconds_by_parts(pf, 100.0, 0.6, None, 0.0, half_tokens=250.0, routing=TOY)
    assert float(t) == pytest.approx(1e13 / (1e14 * 0.6 / (1 + 0.4 ** 2.5) ** 0.4))
    assert float(t) == pytest.approx(0.173218, abs=1e-5)


def test_an_moe_prompt_prefills_slower_on_a_curve_and_not_on_the_spec_sheet() -> None:
    """gpt-oss-120b on one H200, a 2,000-token prompt: with a curve (plateau 0.6, m_half 262)
    the GEMMs run at 0.6 / (1 + (262 R s / 2000)^2.5)^0.4 with R = 22.90 and the H200's scale for
    these weights, s = (989 x b / 2 / 4800) / (989 / 3350) = 0.2065 with b = (69.13 - 0.343) GB /
    (116.8 - 0.579) B = 0.5919 bytes per GEMM parameter (`gemm_read_scale`); the spec sheet (no
    curve) is unchanged, so it stays the upper bound."""
    s = make_scenario("gpt-oss-120b-mxfp4", "h200-sxm", n_gpus=1, context_tokens=4096,
                      prompt_tokens=2000, mfu=0.6, mfu_half_tokens=262.0, attn_mfu=0.6)
    r = float(s.routing.gemm_weight_ratio(2000))
    b = (69.13e9 - s.variant.lookup_bytes) / ((116.8 - 0.57913344) * 1e9)
    assert b == pytest.approx(0.5919, abs=1e-4)
    assert s.routing.read_scale == pytest.approx(3350 / 4800 * b / 2, rel=1e-12)
    ev = evaluate(s, [1])
    dense_like = evaluate(s.with_(mfu_half_tokens=0.0), [1])
    # the linear part at the plateau, its attention part the same in both
    linear_plateau = float(ev.prefill.linear_flops) / (s.tflops * s.tp * 1e12 * 0.6)
    ridge = 262.0 * r * (3350 / 4800 * b / 2) / 2000     # 1239 tokens over 2,000: 0.62
    extra = linear_plateau * ((1 + ridge ** 2.5) ** 0.4 - 1)    # 11% more than at the plateau
    assert float(ev.prefill_s) == pytest.approx(float(dense_like.prefill_s) + extra, rel=1e-9)
    assert float(ev.prefill_s) > 1.05 * float(dense_like.prefill_s) - 1e-12
    # the event model's whole-prompt prefill is the same number (one computation)
    svc = service_from_scenario(s, output_tokens=16, engine="sglang")
    assert svc.prefill_ms == pytest.approx(float(ev.prefill_s) * 1e3)
    assert svc.routing == s.routing


def test_show_math_substitutes_the_curves_mfu() -> None:
    """On a basis with F6c's curve the TTFT line substitutes MFU(L), so its numbers give its
    result: gpt-oss-120b MXFP4 on an H200, 2,000 tokens, plateau 0.6, m_half 262, R 22.90 x
    the H200's scale for these weights 0.2065 (`gemm_read_scale`) = 4.730 -> MFU(L) =
    0.6 / (1 + (262 x 4.730 / 2000)^2.5)^0.4 = 0.5399."""
    from capacity.report.explain import show_math

    s = make_scenario("gpt-oss-120b-mxfp4", "h200-sxm", n_gpus=1, context_tokens=4096,
                      prompt_tokens=2000, mfu=0.6, mfu_half_tokens=262.0)
    line = next(m for m in show_math(s, 1) if m.key == "ttft").substituted
    eff = 0.6 / (1 + (262 * float(s.routing.gemm_weight_ratio(2000)) * s.routing.read_scale
                      / 2000) ** 2.5) ** 0.4
    assert s.routing.read_scale == pytest.approx(0.2065, abs=1e-4)
    assert eff == pytest.approx(0.5399, abs=1e-4)
    assert "MFU(L) = 0.6 / (1 + (262 x 4.73 / 2,000)^2.5)^(1/2.5), F6c" in line, line
    assert f"{eff:.4g}"[:5] in line, line
    # without the curve: the plateau alone, as before
    flat = next(m for m in show_math(s.with_(mfu_half_tokens=0.0), 1) if m.key == "ttft")
    assert "MFU(L)" not in flat.substituted and " x 0.6) = " in flat.substituted


def test_the_cli_names_the_mfu_its_ttft_used(capsys: pytest.CaptureFixture[str]) -> None:
    """`capacity plan`'s prefill line names MFU(L) on a curve (it named the plateau while its
    seconds used the curve); the chapter's line is unchanged (docs/method.md)."""
    from capacity.cli.main import main

    assert main(["plan", "--model", "gpt-oss-20b-mxfp4", "--basis", "typical:vllm"]) == 0
    # gpt-oss-20b MXFP4 on an RTX 4090: R 5.806 x (165.2 x b / 2 / 1008) / (989 / 3350), b =
    # (14.46 - 0.401) GB / (20.9 - 0.579) B = 0.6919 bytes per GEMM parameter: 5.806 x 0.19204 =
    # 1.115; the plateau 0.706 of the RTX 4090's matmul ceiling (its bf16 GEMMs reach the spec
    # sheet: 1) = 0.706; its routed experts (X k / E / A = 19.771 x 4 / 32 / 3.6 = 0.6865 of
    # the arithmetic) at the engines file's expert GEMM share 0.315 (since 2026-12-07): F =
    # 0.3135 + 0.6865 / 0.315 = 2.493, plateau 0.706 / 2.493 = 0.2832, m_half 262 / 2.493 =
    # 105.1; 0.2832 / (1 + (105.1 x 1.115 / 8192)^2.5)^0.4 = 0.2832 (8,192 tokens are far above
    # this pass's ridge of 117); 0.506 s at 0.7059 before -> 0.506 x 0.7059 / 0.2832 = 1.261 s
    assert "8192-token prompt at MFU 0.2832 [MFU(L) = 0.2832 / (1 + (105.1 x 1.115 / 8,192)" \
           "^2.5)^(1/2.5), F6c; MFU and m_half / 2.493: the routed experts' GEMMs at 0.315 of " \
           "the dense plateau]: 1.261 s linear" in capsys.readouterr().out
    assert main(["plan"]) == 0
    assert "8192-token prompt at MFU 0.3: 2.975 s linear, 3.064 s with attention" in \
        capsys.readouterr().out
