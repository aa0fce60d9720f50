"""The scorecard's calibrated decode step is the event model's TPOT (issue 25): a closed loop's
measured TPOT and ITL hold the decode steps and the other requests' prefills that stall them, so
the prediction they are scored against must too; the spec sheet keeps F4's bare step (the bound).
"""

from __future__ import annotations

import math

import pytest

from capacity.fit import validate, validate_formulas
from capacity.fit.measured import run_scenario
from capacity.fit.validate import Metric, Prediction, Queued, pick


def _prediction(queued: tuple[Queued, ...] | None) -> Prediction:
    return Prediction(step_ms=(10.0,), ttft_ms=(50.0,), tok_s=(400.0,), e2e_ms=(1040.0,),
                      c_vram=64, queued=queued)


def _queued(tpot_mean_ms: float, tpot_median_ms: float) -> Queued:
    # 100 output tokens; mean TTFT 100 ms, mean E2E 100 + 99 x 12.5 = 1337.5 ms
    return Queued(ttft_mean_ms=100.0, ttft_median_ms=80.0, e2e_mean_ms=1337.5,
                  e2e_median_ms=1300.0, tok_s=350.0, tpot_mean_ms=tpot_mean_ms,
                  tpot_median_ms=tpot_median_ms)


def test_step_is_the_event_models_tpot_in_the_rows_statistic() -> None:
    p = _prediction((_queued(12.5, 12.0),))
    assert pick(p, Metric.STEP, 0, "mean") == 12.5  # (1337.5 - 100) / 99, not F4's 10 ms
    assert pick(p, Metric.STEP, 0, "median") == 12.0
    assert pick(p, Metric.TTFT, 0, "median") == 80.0
    assert pick(p, Metric.E2E, 0, "mean") == 1337.5
    assert pick(p, Metric.THROUGHPUT, 0) == 350.0


def test_step_falls_back_to_f4_without_the_event_model() -> None:
    assert pick(_prediction(None), Metric.STEP, 0, "mean") == 10.0
    assert pick(_prediction(None), Metric.TTFT, 0) == 50.0
    # a level the event model did not give a TPOT (NaN): F4's step
    assert pick(_prediction((_queued(math.nan, math.nan),)), Metric.STEP, 0, "median") == 10.0


def test_formulas_are_reexported_unchanged() -> None:
    assert validate.relative_error is validate_formulas.relative_error
    assert validate.saturated_levels is validate_formulas.saturated_levels
    # 4 clients, 128 tokens, TTFT 20 ms, step 10 ms: 4 x 128 / (0.02 + 127 x 0.01) s
    assert validate.closed_loop_tok_s(4, 128, 20.0, 10.0) == pytest.approx(512 / 1.29)
    assert validate.e2e_ms(128, 20.0, 6.0) == pytest.approx(20.0 + 127 * 6.0)


def test_one_client_has_no_prefill_stalls_many_with_long_prompts_do() -> None:
    # one client: nothing interleaves, the event model's TPOT is the bare step. Eight clients,
    # 4,096-token prompts, 64 output tokens, SGLang's profile (whole prompts before the next
    # decode step, scheduled one step ahead): the GPU never idles, so a request's E2E is the
    # cycle in which all eight prefill once (P each, F6 alone: 242.8 ms) and 64 decode steps
    # run, 56 at batch 8 (6.34 ms) and 8 at batch 7, each request's wait for the step fixed
    # before it came: 8 x 242.8 + 56 x 6.34 + 8 x s(7) = 2,347 ms, TTFT = P + s(7). The
    # prefills a request does not wait for before its first token stall its decode:
    # TPOT = (E2E - TTFT) / 63 above the bare step.
    s = run_scenario("qwen3-8b-bf16", "h100-sxm", prompt_tokens=4096, output_tokens=64)
    p = validate.predict(s, [1, 7, 8], 4096, 64, "sglang")
    assert p.queued is not None
    one, _, eight = p.queued
    assert one.tpot_mean_ms == pytest.approx(p.step_ms[0], rel=1e-6)
    assert pick(p, Metric.STEP, 0, "mean") == one.tpot_mean_ms
    prefill_ms, step7_ms, step8_ms = p.ttft_ms[0], p.step_ms[1], p.step_ms[2]
    assert eight.e2e_mean_ms == pytest.approx(8 * prefill_ms + 56 * step8_ms + 8 * step7_ms,
                                              rel=1e-6)
    assert eight.ttft_mean_ms == pytest.approx(prefill_ms + step7_ms, rel=1e-6)
    assert eight.tpot_mean_ms == pytest.approx((eight.e2e_mean_ms - eight.ttft_mean_ms) / 63)
    assert eight.tpot_mean_ms > step8_ms + prefill_ms / 63  # at least one other prefill
    assert pick(p, Metric.STEP, 2, "mean") == eight.tpot_mean_ms
