"""The queueing closed forms (capacity/plan/queueing.py): the cases mutation testing found unchecked.

`python3 dev.py mutate capacity/plan/queueing.py` (docs/testing.md) left these mutants alive: the
M/D/1 wait's input checks at 0, the chunked prompt's budget floor of one token, and in
`analytic_latency` the batched path's numbers one by one (the residual half step, the decode
time's variance, the duration, the rate returned), a request of one or two tokens (no decode
step, one decode step), a load past saturation, the prompt length that chunked prefill
needs, and the chunked path's duration, its fixed point and its share of the GPU at saturation.
Every expected value is computed by hand below, on steps whose parts are known by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from capacity.errors import InputError
from capacity.plan.queueing import (
    AnalyticLatency,
    StepModel,
    analytic_latency,
    chunk_cost,
    md1_mean_wait_ms,
    wait_quantile_ms,
)


def hand_step(compute_ms: float = 3.0) -> StepModel:
    """W 9e9 B over 1000 GB/s = 9 ms of memory (no KV), 2 x P x b / F = `compute_ms` x b ms of
    arithmetic, t0 1 ms: s(b) = 1 + max(9, compute_ms x b) = 10 ms while the batch is small."""
    return StepModel(weights_bytes=9e9, kv_request_bytes=0.0, bandwidth_gb_s=1000.0,
                     tflops=1.0, params_active_b=1.5 * compute_ms / 3.0, overhead_ms=1.0)


# -- M/D/1 ---------------------------------------------------------------------------------------

def test_md1_accepts_zero_load_and_zero_service() -> None:
    assert md1_mean_wait_ms(0.0, 100.0) == 0.0       # nobody waits
    assert md1_mean_wait_ms(0.5, 0.0) == 0.0         # no service time, no wait
    assert md1_mean_wait_ms(0.5, 0.5) == 0.25        # 0.5 x 0.5 / (2 x 0.5)
    assert md1_mean_wait_ms(0.5, 100.0) == 50.0      # 0.5 x 100 / (2 x 0.5)
    assert md1_mean_wait_ms(1.0, 5.0) == math.inf


@pytest.mark.parametrize(("rho", "service"), [(-0.1, 5.0), (0.5, -1.0)])
def test_md1_refuses_a_negative_input(rho: float, service: float) -> None:
    with pytest.raises(InputError, match=r"^utilization and service time must be >= 0$"):
        md1_mean_wait_ms(rho, service)


# -- chunk costs ---------------------------------------------------------------------------------

def test_a_budget_below_the_batch_still_carries_one_prompt_token_a_step() -> None:
    # budget 2 - C 1.5 = 0.5 token -> at least 1 a step: P = 4 tokens in k = 4 chunks of
    # x = 8 / 4 = 2 ms, each adding max(9, 4.5 + 2) - 9 = 0 to s = 10 ms (compute 3 x 1.5 =
    # 4.5 ms): own 4 x 10 = 40 ms, service 4 x (10 + 0) = 40 ms, nothing added
    cc = chunk_cost(step=hand_step(), concurrency=np.array([1.5]), prefill_ms=np.array([8.0]),
                    budget_tokens=np.array([2.0]), prompt_tokens=4.0)
    assert float(cc.own_ms[0]) == pytest.approx(40.0)
    assert float(cc.service_ms[0]) == pytest.approx(40.0)
    assert float(cc.added_ms[0]) == 0.0
    assert float(cc.full_added_ms[0]) == 0.0


# -- analytic_latency, batched prefill ----------------------------------------------------------

LAM = 0.005
"""5 requests/s = 0.005 per ms; prefill t = 20 ms: rho = 0.1; s = 10 ms; C = 1."""
WQ = 0.1 * 20 / (2 * 0.9)                       # M/D/1 wait: 10/9 ms
BATCHING = (1 + 2 * 0.1) / (1 + 0.1)            # 12/11
LAM_X = LAM * (0.9 * 10 + 0.1 * 20) / (1 - 0.1 ** 2)   # 0.055 / 0.99 = 1/18
BACKLOG = 0.1 * 20 * (1 + LAM_X)                # 19/9 ms
VAR_BACKLOG = 20 * 20 * (0.1 * (1 + LAM_X) + 0.1 ** 2 * LAM_X)   # 400 x 1.91 / 18


def batched(output_tokens: int, rate: float = 5.0, quantile: float = 0.99) -> AnalyticLatency:
    return analytic_latency(rate_per_s=np.array([rate]), step=hand_step(),
                            prefill_ms=np.array([20.0]), output_tokens=output_tokens,
                            quantile=quantile, concurrency=np.array([1.0]))


def test_batched_path_by_hand() -> None:
    an = batched(11)
    assert float(an.rate_per_s[0]) == pytest.approx(5.0)
    assert float(an.prefill_share[0]) == pytest.approx(0.1)
    assert float(an.step_ms[0]) == pytest.approx(10.0)
    # E[TTFT] = t + f (s/2 + W) = 20 + 12/11 x (5 + 10/9) = 20 + 660/99 = 26.667 ms
    ttft = 20 + BATCHING * (0.5 * 10 + WQ)
    assert ttft == pytest.approx(20 + 660 / 99)
    assert float(an.ttft_mean_ms[0]) == pytest.approx(ttft)
    # p99: W_q = W / rho x ln(rho / 0.01) = (100/9) ln 10 = 25.584 ms; t + f (0.99 s + W_q)
    wq99 = WQ / 0.1 * math.log(0.1 / (1 - 0.99))
    assert wq99 == pytest.approx(25.584279, rel=1e-6)
    assert float(an.ttft_q_ms[0]) == pytest.approx(20 + BATCHING * (0.99 * 10 + wq99))
    # decode: 10 steps of 10 ms + the backlog 19/9 ms, over 1 - r = 0.9
    x = 10 * 10 + BACKLOG
    assert float(an.decode_mean_ms[0]) == pytest.approx(x / 0.9)       # 113.457 ms
    assert float(an.tpot_ms[0]) == pytest.approx(x / 0.9 / 10)         # 11.346 ms
    # variance: Var(B) / (1 - r)^2 + x lambda t^2 / (1 - r)^3
    var = VAR_BACKLOG / 0.9 ** 2 + x * LAM * 400 / 0.9 ** 3
    assert var == pytest.approx(52.4005487 + 280.1402, rel=1e-6)
    assert float(an.decode_var_ms2[0]) == pytest.approx(var)
    assert float(an.tpot_q_ms[0]) > float(an.tpot_ms[0])
    # GPU time a request: t + 10 steps of 10 ms shared by 1 = 120 ms x 0.005 = 0.6
    assert float(an.utilization[0]) == pytest.approx(0.6)
    # time in the server: (TTFT + 11 x TPOT) / 1000 s
    assert float(an.duration_s[0]) == pytest.approx((ttft + 11 * x / 9) / 1e3)
    assert not bool(an.saturated[0])


def test_two_tokens_is_one_decode_step() -> None:
    an = batched(2)
    # one step of 10 ms + the backlog 19/9, over 0.9; TPOT = that / 1 step
    x = 10 + BACKLOG
    assert float(an.tpot_ms[0]) == pytest.approx(x / 0.9)             # 13.457 ms
    # the request stays its TTFT and 2 TPOTs: (26.667 + 2 x 13.457) / 1000 s
    ttft = 20 + BATCHING * (0.5 * 10 + WQ)
    assert float(an.duration_s[0]) == pytest.approx((ttft + 2 * x / 0.9) / 1e3)
    assert float(an.decode_var_ms2[0]) == pytest.approx(
        VAR_BACKLOG / 0.81 + x * LAM * 400 / 0.729)


def test_one_token_has_no_decode_time() -> None:
    an = batched(1)
    # no decode step: no backlog, no variance; the request ends with its first token
    assert float(an.decode_mean_ms[0]) == 0.0
    assert float(an.decode_var_ms2[0]) == 0.0
    assert float(an.tpot_ms[0]) == 0.0
    ttft = 20 + BATCHING * (0.5 * 10 + WQ)
    assert float(an.duration_s[0]) == pytest.approx(ttft / 1e3)
    # GPU time: the prefill alone, 20 ms x 0.005 = 0.1
    assert float(an.utilization[0]) == pytest.approx(0.1)


def test_prefill_past_full_load_has_infinite_decode_moments() -> None:
    # 100 /s x 20 ms = rho 2: decoding never resumes; utilisation 0.1 x (20 + 100) = 12
    an = batched(11, rate=100.0)
    assert bool(an.saturated[0])
    assert float(an.utilization[0]) == pytest.approx(12.0)
    assert float(an.prefill_share[0]) == pytest.approx(2.0)
    for field in (an.decode_mean_ms, an.decode_var_ms2, an.duration_s, an.ttft_mean_ms,
                  an.ttft_q_ms, an.tpot_ms, an.tpot_q_ms):
        assert math.isinf(float(field[0]))


def test_past_full_load_the_fixed_point_is_not_looked_for() -> None:
    # rho 2 and no concurrency given: saturated, every latency infinite
    an = analytic_latency(rate_per_s=np.array([100.0]), step=hand_step(),
                          prefill_ms=np.array([20.0]), output_tokens=11)
    assert bool(an.saturated[0])
    assert math.isinf(float(an.ttft_mean_ms[0])) and math.isinf(float(an.duration_s[0]))


@pytest.mark.parametrize(("output_tokens", "util"), [(29, 1.5), (19, 1.0), (201, 10.1)])
def test_more_gpu_time_than_the_arrivals_leave_is_saturated(output_tokens: int,
                                                             util: float) -> None:
    # rho 0.1 < 1, but the GPU time a request is 20 + (output - 1) x 10 ms at C = 1:
    # 29 tokens -> 300 ms x 0.005 = 1.5; 19 -> 200 ms -> 1.0 exactly; 201 -> 2020 ms -> 10.1
    an = batched(output_tokens)
    assert float(an.utilization[0]) == pytest.approx(util)
    assert bool(an.saturated[0])
    for field in (an.ttft_mean_ms, an.ttft_q_ms, an.tpot_ms, an.tpot_q_ms, an.duration_s):
        assert math.isinf(float(field[0]))


def test_decode_moments_between_one_and_two_prefill_loads_are_infinite() -> None:
    # 75 /s x 20 ms = rho 1.5: prefills alone outrun the GPU, decoding never ends
    an = batched(11, rate=75.0)
    assert bool(an.saturated[0])
    assert math.isinf(float(an.decode_mean_ms[0])) and math.isinf(float(an.decode_var_ms2[0]))


def test_a_concurrency_that_passes_its_limit_is_saturated() -> None:
    # 1 /s: the fixed point is C = 1 x ~0.15 s, past a limit of 0.01: not converged
    an = analytic_latency(rate_per_s=np.array([1.0]), step=hand_step(),
                          prefill_ms=np.array([20.0]), output_tokens=11, limit=0.01)
    assert bool(an.saturated[0])
    assert float(an.concurrency[0]) == pytest.approx(0.01)
    free = analytic_latency(rate_per_s=np.array([1.0]), step=hand_step(),
                            prefill_ms=np.array([20.0]), output_tokens=11)
    assert not bool(free.saturated[0])


def test_a_given_integer_concurrency_comes_back_as_floats() -> None:
    an = analytic_latency(rate_per_s=np.array([5.0, 5.0]), step=hand_step(),
                          prefill_ms=np.array([20.0, 20.0]), output_tokens=11,
                          concurrency=np.array([1, 1]))
    assert an.concurrency.dtype == np.float64
    assert an.concurrency.tolist() == [1.0, 1.0]


def test_tpot_percentile_is_the_moment_matched_gamma() -> None:
    # 2 tokens: one decode step, mean m = (10 + 19/9) / 0.9 ms and variance v (hand, above);
    # the gamma with those moments: shape m^2 / v, scale v / m; p99 of it over 1 step
    an = batched(2)
    x = 10 + BACKLOG
    m, v = x / 0.9, VAR_BACKLOG / 0.81 + x * LAM * 400 / 0.729
    p99 = stats.gamma.ppf(0.99, m * m / v, scale=v / m)
    assert float(an.tpot_q_ms[0]) == pytest.approx(p99, rel=1e-4)


def test_without_the_tpot_percentile_it_is_nan() -> None:
    an = analytic_latency(rate_per_s=np.array([5.0]), step=hand_step(),
                          prefill_ms=np.array([20.0]), output_tokens=11,
                          concurrency=np.array([1.0]), tpot_quantile=False)
    assert math.isnan(float(an.tpot_q_ms[0]))
    assert float(an.tpot_ms[0]) == pytest.approx((100 + BACKLOG) / 0.9 / 10)


# -- the exponential-tail wait quantile ----------------------------------------------------------

def test_wait_quantile_by_hand() -> None:
    # rho 0.2 > 1 - 0.9: 5 / 0.2 x ln(0.2 / 0.1) = 25 ln 2 = 17.329 ms; rho 0.05 < 0.1: 0;
    # rho 0 (an idle queue, mean wait 1 ms given): 0, without a division warning;
    # rho 1 and 1.5: infinite, whatever the mean wait given
    w = wait_quantile_ms([5.0, 5.0, 1.0, 5.0, 5.0], [0.2, 0.05, 0.0, 1.0, 1.5], 0.9)
    assert w[0] == pytest.approx(25 * math.log(2))
    assert w[1] == 0.0 and w[2] == 0.0
    assert math.isinf(w[3]) and math.isinf(w[4])
    assert w.dtype == np.float64


# -- analytic_latency, mixed chunked prefill -----------------------------------------------------

def chunked(rate: float, concurrency: float | None = 1.0, prompt_tokens: int | None = 1280,
            chunk: float = 513.0) -> AnalyticLatency:
    return analytic_latency(rate_per_s=np.array([rate]), step=hand_step(),
                            prefill_ms=np.array([30.0]), output_tokens=11,
                            concurrency=None if concurrency is None else np.array([concurrency]),
                            chunk_tokens=np.array([chunk]), prompt_tokens=prompt_tokens)


@pytest.mark.parametrize("prompt", [None, 0])
def test_chunked_prefill_needs_a_prompt_length(prompt: int | None) -> None:
    with pytest.raises(InputError, match=r"^chunked prefill in the analytic path needs the "
                                         r"prompt length$"):
        chunked(5.0, prompt_tokens=prompt)


def test_a_one_token_prompt_is_enough_for_chunked_prefill() -> None:
    # P = 1 in a budget of 512 a step: one chunk of the whole 30 ms, which adds
    # max(9, 3 + 30) - 9 = 24 ms to its one step: own = 10 + 24 = 34 ms
    an = chunked(0.001, prompt_tokens=1)
    assert float(an.ttft_mean_ms[0]) == pytest.approx(34 + 5, abs=0.05)  # + s/2 + ~0 wait


def test_chunked_duration_by_hand() -> None:
    # tests/test_queueing.py's hand case (lambda 5 /s, C = 1, B - C = 512, P = 1280, t = 30):
    # E[TTFT] = 52 ms, TPOT 10.761398 ms, so a request stays (52 + 11 x 10.761398) / 1000 s
    an = chunked(5.0)
    assert float(an.duration_s[0]) == pytest.approx((52 + 11 * 10.761398) / 1e3, rel=1e-6)


def test_chunked_ttft_percentile_by_hand() -> None:
    # the hand case: rho' = 0.005 x 40 = 0.2, W' = 0.2 x 40 / (2 x 0.8) = 5 ms; p90:
    # W'_q = 5 / 0.2 x ln(0.2 / 0.1) = 25 ln 2 ms; TTFT_q = own 42 + 0.9 x s 10 + W'_q
    an = chunked(5.0)
    assert float(an.ttft_q_ms[0]) == pytest.approx(42 + 9 + 25 * math.log(2))


def test_chunked_prompts_past_the_budget_saturate_a_large_batch() -> None:
    # C = 100 on a step whose arithmetic is 0.03 ms a sequence (3 ms at C = 100, s = 10 ms),
    # budget 612 - 100 = 512: the same chunk costs as the hand case (service 40 ms, a_f 15 ms).
    # 30 /s: rho' = 1.2 >= 1 although the GPU time is 0.03 x (15 + 10 x 10 / 100) = 0.48
    hot = analytic_latency(rate_per_s=np.array([30.0]), step=hand_step(compute_ms=0.03),
                           prefill_ms=np.array([30.0]), output_tokens=11,
                           concurrency=np.array([100.0]), chunk_tokens=np.array([612.0]),
                           prompt_tokens=1280)
    assert float(hot.utilization[0]) == pytest.approx(0.48)
    assert float(hot.prefill_share[0]) == pytest.approx(0.45)
    assert bool(hot.saturated[0])
    assert math.isinf(float(hot.tpot_ms[0]))
    # 25 /s: rho' = 0.025 x 40 = 1 exactly: saturated too
    edge = analytic_latency(rate_per_s=np.array([25.0]), step=hand_step(compute_ms=0.03),
                            prefill_ms=np.array([30.0]), output_tokens=11,
                            concurrency=np.array([100.0]), chunk_tokens=np.array([612.0]),
                            prompt_tokens=1280)
    assert bool(edge.saturated[0])
    assert math.isinf(float(edge.tpot_ms[0]))


def test_chunked_fixed_point_counts_its_own_first_token() -> None:
    # C found by the fixed point: Little's law C = lambda x duration, and the duration is the
    # chunked TTFT plus 11 TPOTs (the fixed point's own duration, not the batched path's)
    an = chunked(5.0, concurrency=None)
    dur = float(an.duration_s[0])
    assert dur == pytest.approx((float(an.ttft_mean_ms[0]) + 11 * float(an.tpot_ms[0])) / 1e3,
                                rel=1e-6)
    assert float(an.concurrency[0]) == pytest.approx(5.0 * dur, rel=1e-3)


def test_chunked_share_when_the_budget_is_always_busy() -> None:
    # 30 /s: rho' = 0.03 x 40 = 1.2 -> the budget is always in use (capped at 1): a prompt
    # stalls a decoding request a' = full_added = 2.5 x 6 = 15 ms: share 0.03 x 15 = 0.45;
    # GPU time 15 + 10 x 10 / 1 = 115 ms x 0.03 = 3.45
    an = chunked(30.0)
    assert bool(an.saturated[0])
    assert float(an.prefill_share[0]) == pytest.approx(0.45)
    assert float(an.utilization[0]) == pytest.approx(3.45)


def test_load_of_exactly_one_is_saturated_without_a_warning() -> None:
    # 50 requests/s x 20 ms of prefill each = rho 1 exactly: saturated (infinite TTFT), and
    # the decode stall's divisor 1 - r^2 is not evaluated at 0 (no divide-by-zero warning)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        an = batched(11, rate=50.0)
    assert float(an.prefill_share[0]) == pytest.approx(1.0)
    assert math.isinf(float(an.ttft_mean_ms[0]))
