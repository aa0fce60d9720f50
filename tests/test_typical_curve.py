"""The typical basis with the prefill curve F6c (data/engines.toml) and the scorecard's typical section.

Expected values are worked by hand in the comments, from the numbers in the data file.
"""

from __future__ import annotations

import pytest

from capacity.fit import validate_typical as vt
from capacity.fit.planning import (
    parse_engines,
    scenario_with_basis,
    typical_efficiency,
    with_basis,
)
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.detail import option_scenario
from capacity.plan.options import PlanInputs
from capacity.plan.search import plan


def test_typical_knobs_are_one_set_for_every_gpu() -> None:
    typ = typical_efficiency("vllm")
    # data/engines.toml: plateau 0.619 (median of the published groups' 0.691 and 0.547),
    # m_half 262 (XLA's H100 matmul table), eta_bw 0.882 and 68.9 us per layer (F11)
    assert (typ.typical["eta_bw"], typ.typical["mfu"], typ.typical["mfu_half_tokens"],
            typ.typical["layer_overhead_ms"]) == (0.882, 0.619, 262.0, 0.0689)
    wl = Workload(peak_concurrency=8.0, context_tokens=4096, prompt_tokens=1000,
                  output_tokens=200, headroom=0.0)
    for gpus in (("h100-sxm",), ("a100-80gb-sxm",), ("h100-sxm", "a100-80gb-sxm"), None):
        inp = with_basis(PlanInputs(model="llama-3.1-8b-bf16", workload=wl, gpus=gpus),
                         "typical:vllm")
        assert (inp.eta_bw, inp.mfu, inp.mfu_half_tokens, inp.layer_overhead_ms) == (
            0.882, 0.619, 262.0, 0.0689)


def test_an_engines_file_without_the_curve_keeps_a_constant_mfu() -> None:
    text = "\n".join(f"[e.{k}]\ntypical = 0.5\nlow = 0.5\nhigh = 0.5" for k in (
        "eta_bw", "eff", "mfu", "step_overhead_ms", "prefill_overhead_ms",
        "draft_overhead_ms", "verify_overhead_ms"))
    typ = parse_engines('[e]\nname = "E"\nsource = "s"\nas_of = "2026"\n' + text)["e"]
    assert typ.typical["mfu_half_tokens"] == 0.0 and typ.typical["mfu"] == 0.5


def test_every_surface_resolves_the_same_typical_knobs() -> None:
    wl = Workload(peak_concurrency=8.0, context_tokens=4096, prompt_tokens=1000,
                  output_tokens=200, headroom=0.0)
    inp = with_basis(PlanInputs(model="llama-3.1-8b-bf16", workload=wl, gpus=("h100-sxm",),
                                allow_tp=False, max_gpus=1), "typical:vllm")
    o = plan(inp).options[0]
    planner = option_scenario(inp, o)
    explorer = scenario_with_basis(make_scenario("llama-3.1-8b-bf16", "h100-sxm",
                                                 weights=o.weights, kv_dtype=o.kv_dtype,
                                                 context_tokens=4096, prompt_tokens=1000),
                                   "typical:vllm")
    a, b = evaluate(planner, [1]), evaluate(explorer, [1])
    assert float(a.ttft_s) == pytest.approx(float(b.ttft_s), rel=1e-12)
    assert float(a.decode.step_ms[0]) == pytest.approx(float(b.decode.step_ms[0]), rel=1e-12)
    assert o.prefill_ms == pytest.approx(float(a.ttft_s) * 1e3, rel=1e-9)


def test_typical_prefill_is_never_faster_than_the_spec_sheet() -> None:
    s = make_scenario("llama-3.1-8b-bf16", "h100-sxm", context_tokens=4096, prompt_tokens=200)
    spec = float(evaluate(scenario_with_basis(s, "spec"), [1]).ttft_s)
    typ = float(evaluate(scenario_with_basis(s, "typical:vllm"), [1]).ttft_s)
    # 200 tokens at plateau 0.594, m_half 262: MFU 0.594 x 200 / 462 = 0.257 (+ 3.5 ms)
    assert typ > spec / (0.594 * 200 / 462)


def test_group_plateau_hand_value() -> None:
    # NIM, L = 5000 at C = 1: spec TTFT / measured = 0.534 -> 0.534 x 5262 / 5000 = 0.56198
    assert vt.group_plateau(53.4, 100.0, 5000, 262) == pytest.approx(0.534 * 5262 / 5000)


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
    card = vt.typical_scorecard()
    assert card.rows and {r.metric for r in card.rows} >= {"step", "ttft", "throughput"}
    # the NIM group's plateau is held out: its knobs come from the A100 group alone, whose
    # plateau is median(0.554 x 16262/16000, 0.537 x 16262/16000) (file header), not 0.634
    nim = next(r for r in card.rows if "(NIM)" in r.group)
    mfu = dict(nim.knobs)["mfu"]
    assert 0.53 < mfu < 0.58 and mfu != pytest.approx(0.634, abs=1e-3)
    md = vt.markdown(card)
    assert "Typical basis, nobody measured" in md
    assert card.error("ttft", True, False).n == 18  # the original rows; added ones apart
