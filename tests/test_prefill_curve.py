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
from capacity.model.prefill import (
    MFU_CURVE_SHARPNESS,
    PrefillFlops,
    prefill_seconds_by_parts,
    step_mfu,
)
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.detail import option_scenario
from capacity.plan.options import PlanInputs
from capacity.plan.search import plan


def test_step_mfu_hand_values() -> None:
    # plateau 0.7, m_half 128, sharpness k = 2.5: at the ridge 0.7 / 2^(1/2.5) = 0.53050;
    # at 2,048 tokens 0.7 / (1 + (128 / 2048)^2.5)^0.4 = 0.69973; at 32 tokens, below the
    # ridge, 0.7 / (1 + 4^2.5)^0.4 = 0.7 / 33^0.4 = 0.17286 (the read sets the time: about
    # 0.7 x 32 / 128 = 0.175)
    assert MFU_CURVE_SHARPNESS == 2.5
    got = step_mfu([128, 2048, 32], mfu=0.7, half_tokens=128)
    assert got[0] == pytest.approx(0.7 / 2 ** 0.4) == pytest.approx(0.530501, abs=1e-6)
    assert got[1] == pytest.approx(0.7 / (1 + (128 / 2048) ** 2.5) ** 0.4)
    assert got[1] == pytest.approx(0.699727, abs=1e-6)
    assert got[2] == pytest.approx(0.7 / 33 ** 0.4) == pytest.approx(0.172859, abs=1e-6)
    assert step_mfu(5, mfu=0.4, half_tokens=0.0) == pytest.approx(0.4)  # 0: constant
    with pytest.raises(InputError):
        step_mfu(5, mfu=0.4, half_tokens=-1.0)


def test_by_parts_runs_gemms_at_the_curve() -> None:
    # 1e13 FLOP linear + 1e12 attention on 100 TFLOP/s, plateau 0.6, m_half 250, 1,000
    # tokens: MFU(m) = 0.6 / (1 + 0.25^2.5)^0.4 = 0.6 / 1.012377 = 0.592660; linear
    # 1e13 / 5.92660e13 = 0.168731 s; attention at attn_mfu 0.5: 1e12 / 5e13 = 0.02 s;
    # + t0 0.01 s = 0.198731 s
    pf = PrefillFlops(prompt_tokens=1000.0, linear_flops=1e13, attention_flops=1e12)  # type: ignore[arg-type]
    mfu = 0.6 / (1 + 0.25 ** 2.5) ** 0.4
    assert mfu == pytest.approx(0.592660, abs=1e-6)
    t = prefill_seconds_by_parts(pf, 100.0, 0.6, 0.5, 0.01, half_tokens=250.0)
    assert float(t) == pytest.approx(0.01 + 1e13 / (1e14 * mfu) + 0.02)
    assert float(t) == pytest.approx(0.198731, abs=1e-6)
    # attention at MFU too (attn_mfu None): 1.1e13 / 5.92660e13 = 0.185604 s
    t = prefill_seconds_by_parts(pf, 100.0, 0.6, None, half_tokens=250.0)
    assert float(t) == pytest.approx(1.1e13 / (1e14 * mfu))
    # the step's tokens may differ from the prompt's (a chunk): 250 tokens, the ridge -> MFU
    # 0.6 / 2^0.4 = 0.454715
    t = prefill_seconds_by_parts(pf, 100.0, 0.6, 0.5, half_tokens=250.0, step_tokens=250.0)
    assert float(t) == pytest.approx(1e13 / (1e14 * 0.6 / 2 ** 0.4) + 0.02)


def test_scenario_ttft_at_a_given_half_tokens() -> None:
    # linear: 2 x 9e9 x 8192 = 1.47456e14 FLOP; m_half 2048 for the seed's AWQ weights (5.7 GB
    # for 9.0 B parameters, 0.6333 bytes each, bf16 arithmetic) on the RTX 4090 is
    # 2048 x (165.2 x 0.6333 / 2 / 1008) / (989 / 3350) = 2048 x 0.175793 = 360.0 tokens
    # (`gemm_read_scale`), so the MFU is 0.3 / (1 + (360.0 / 8192)^2.5)^0.4 = 0.3 / 1.000162
    # = 0.299951 and 1.47456e14 / (165.2e12 x 0.299951) = 2.97578 s (2.97530 s at 0.3)
    s = make_scenario(mfu_half_tokens=2048)
    ev = evaluate(s, [1])
    half = 2048 * (165.2e12 / 1008e9) / (989e12 / 3350e9) * (5.7 / 9.0) / 2
    assert half == pytest.approx(360.0, abs=0.1)
    slow = (1 + (half / 8192) ** 2.5) ** 0.4
    assert slow == pytest.approx(1.000162, abs=1e-6)
    assert float(ev.ttft_linear_s) == pytest.approx(1.47456e14 / (165.2e12 * 0.3 / slow),
                                                    rel=1e-9)
    assert float(ev.ttft_linear_s) == pytest.approx(2.97578, abs=1e-5)
    # the attention runs at the same step MFU (attn_mfu None): the whole TTFT grows by
    # (1 + (m_half / m)^2.5)^0.4 = 1.000162 over the constant-MFU chapter's
    flat = evaluate(make_scenario(), [1])
    assert float(ev.ttft_s) == pytest.approx(slow * float(flat.ttft_s), rel=1e-12)
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
    # and (1 + (500 s / 2000)^2.5)^0.4 = 1.000162 times slower than at a constant MFU 0.5, s
    # the RTX 4090's scale for Qwen3.5-9B AWQ (0.6333 bytes per parameter) 0.175793
    # (`gemm_read_scale`): m_half 87.9 tokens
    s_awq = (165.2e12 / 1008e9) / (989e12 / 3350e9) * (5.7 / 9.0) / 2
    slow = (1 + (500 * s_awq / 2000) ** 2.5) ** 0.4
    assert slow == pytest.approx(1.000162, abs=1e-6)
    flat = option_scenario(PlanInputs(model=inp.model, workload=wl, mfu=0.5), o)
    assert ttft == pytest.approx(slow * float(evaluate(flat, [1]).ttft_s), rel=1e-12)


def test_the_sharpness_is_the_fit_of_our_own_h200s_gemms() -> None:
    """`MFU_CURVE_SHARPNESS` refitted from the committed probe file: each model's four weight
    GEMMs of a layer, summed per row count m, fitted as t(1) (1 + (m / m_r)^k)^(1/k) over m_r;
    of the grid of k, 2.5 has the least median error (mean of the two models), about 2%, and
    the sum's k = 1 is several times worse."""
    import json
    from collections import defaultdict
    from pathlib import Path

    import numpy as np

    probe = Path(__file__).resolve().parents[1] / "data/reference/gpu_probe/h200-sxm-20261204.jsonl"
    per: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for line in probe.read_text().splitlines():
        r = json.loads(line)
        if r["kind"] == "gemm":
            per[r["model"]][int(r["m"])] += float(r["ms"])
    assert set(per) == {"llama-3.1-8b", "qwen3-32b"}

    def error(k: float) -> float:
        errs = []
        for times in per.values():
            m = np.array(sorted(times), dtype=float)
            t = np.array([times[int(x)] for x in m])
            t1 = float(np.median(t[m <= 8]))
            errs.append(min(float(np.median(np.abs(t1 * (1 + (m / mr) ** k) ** (1 / k) / t - 1)))
                            for mr in np.arange(100.0, 400.0, 2.0)))
        return float(np.mean(errs))

    grid = {k: error(k) for k in (1.0, 1.5, 2.0, 2.5, 3.0, 4.0)}
    assert min(grid, key=lambda k: grid[k]) == MFU_CURVE_SHARPNESS
    assert grid[2.5] < 0.025
    assert grid[1.0] > 4 * grid[2.5]
