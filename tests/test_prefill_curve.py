"""F6c: prefill GEMM efficiency that rises with the tokens per forward pass (issue 32).

Every expected value is computed by hand in the comments: the chapter's seed is Qwen3.5-9B
(9e9 active parameters, F6's count) on one RTX 4090 (165.2 dense TFLOP/s for its AWQ
weights' fp16 compute), an 8,192-token prompt, plateau MFU 0.3.
"""

from __future__ import annotations

import math

import pytest

from capacity.errors import InputError
from capacity.model.basis import CHAPTER_KNOBS, KNOB_FIELDS, SPEC_KNOBS, knobs_of
from capacity.model.prefill import PrefillFlops, prefill_seconds_by_parts, step_mfu
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.detail import option_scenario
from capacity.plan.options import PlanInputs
from capacity.plan.search import plan


def test_step_mfu_hand_values() -> None:
    # plateau 0.7, m_half 128: 0.7 x 128 / 256 = 0.35; 0.7 x 2048 / 2176 = 0.65882...
    got = step_mfu([128, 2048], mfu=0.7, half_tokens=128)
    assert got[0] == pytest.approx(0.35)
    assert got[1] == pytest.approx(0.7 * 2048 / 2176)
    assert step_mfu(5, mfu=0.4, half_tokens=0.0) == pytest.approx(0.4)  # 0: constant
    with pytest.raises(InputError):
        step_mfu(5, mfu=0.4, half_tokens=-1.0)


def test_by_parts_runs_gemms_at_the_curve() -> None:
    # 1e13 FLOP linear + 1e12 attention on 100 TFLOP/s, plateau 0.6, m_half 250, 1,000
    # tokens: MFU(m) = 0.6 x 1000 / 1250 = 0.48; linear 1e13 / 4.8e13 = 0.208333 s;
    # attention at attn_mfu 0.5: 1e12 / 5e13 = 0.02 s; + t0 0.01 s = 0.238333 s
    pf = PrefillFlops(prompt_tokens=1000.0, linear_flops=1e13, attention_flops=1e12)  # type: ignore[arg-type]
    t = prefill_seconds_by_parts(pf, 100.0, 0.6, 0.5, 0.01, half_tokens=250.0)
    assert float(t) == pytest.approx(0.01 + 1e13 / 4.8e13 + 0.02)
    # attention at MFU too (attn_mfu None): 1.1e13 / 4.8e13 = 0.229167 s
    t = prefill_seconds_by_parts(pf, 100.0, 0.6, None, half_tokens=250.0)
    assert float(t) == pytest.approx(1.1e13 / 4.8e13)
    # the step's tokens may differ from the prompt's (a chunk): 250 tokens -> MFU 0.3
    t = prefill_seconds_by_parts(pf, 100.0, 0.6, 0.5, half_tokens=250.0, step_tokens=250.0)
    assert float(t) == pytest.approx(1e13 / 3e13 + 0.02)


def test_scenario_ttft_at_a_given_half_tokens() -> None:
    # linear: 2 x 9e9 x 8192 = 1.47456e14 FLOP; m_half 2048 for the seed's AWQ weights (5.7 GB
    # for 9.0 B parameters, 0.6333 bytes each, bf16 arithmetic) on the RTX 4090 is
    # 2048 x (165.2 x 0.6333 / 2 / 1008) / (989 / 3350) = 2048 x 0.175793 = 360.0 tokens
    # (`gemm_read_scale`), so the MFU is 0.3 x 8192 / 8552.0 = 0.28737 and
    # 1.47456e14 / (165.2e12 x 0.28737) = 3.1060 s (2.97530 s at 0.3)
    s = make_scenario(mfu_half_tokens=2048)
    ev = evaluate(s, [1])
    half = 2048 * (165.2e12 / 1008e9) / (989e12 / 3350e9) * (5.7 / 9.0) / 2
    assert half == pytest.approx(360.0, abs=0.1)
    assert float(ev.ttft_linear_s) == pytest.approx(
        1.47456e14 / (165.2e12 * 0.3 * 8192 / (8192 + half)), rel=1e-9)
    # the attention runs at the same step MFU (attn_mfu None): the whole TTFT grows by
    # (m + m_half) / m = 8552.0 / 8192 = 1.0439 over the constant-MFU chapter's
    flat = evaluate(make_scenario(), [1])
    assert float(ev.ttft_s) == pytest.approx((8192 + half) / 8192 * float(flat.ttft_s),
                                             rel=1e-12)
    assert float(flat.ttft_linear_s) == pytest.approx(1.47456e14 / (165.2e12 * 0.3), rel=1e-9)


def test_half_tokens_is_validated_and_a_knob() -> None:
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(InputError, match="half-efficiency"):
            make_scenario(mfu_half_tokens=bad)
    assert "mfu_half_tokens" in KNOB_FIELDS
    assert CHAPTER_KNOBS["mfu_half_tokens"] == 0.0 and SPEC_KNOBS["mfu_half_tokens"] == 0.0
    assert knobs_of(make_scenario(mfu_half_tokens=64.0))["mfu_half_tokens"] == 64.0


def test_planner_and_explorer_share_the_curve() -> None:
    # one surface, one number: the planner's prefill time of its option is the option's
    # scenario's TTFT (no TP, so no communication term)
    wl = Workload(peak_concurrency=4.0, context_tokens=4096, prompt_tokens=2000,
                  output_tokens=200, headroom=0.0)
    inp = PlanInputs(model="qwen3.5-9b-awq", workload=wl, gpus=("rtx-4090",), allow_tp=False,
                     max_gpus=1, mfu=0.5, mfu_half_tokens=500.0)
    p = plan(inp)
    o = next(x for x in p.options if x.tp == 1)
    s = option_scenario(inp, o)
    assert s.mfu_half_tokens == 500.0
    ttft = float(evaluate(s, [1]).ttft_s)
    assert o.prefill_ms == pytest.approx(ttft * 1e3, rel=1e-9)
    # and (2000 + 500 s) / 2000 times slower than at a constant MFU 0.5, s the RTX 4090's scale
    # for Qwen3.5-9B AWQ (0.6333 bytes per parameter) 0.175793 (`gemm_read_scale`)
    s_awq = (165.2e12 / 1008e9) / (989e12 / 3350e9) * (5.7 / 9.0) / 2
    flat = option_scenario(PlanInputs(model=inp.model, workload=wl, mfu=0.5), o)
    assert ttft == pytest.approx((2000 + 500 * s_awq) / 2000 * float(evaluate(flat, [1]).ttft_s),
                                 rel=1e-12)
