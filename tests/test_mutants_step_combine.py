"""Tests written to kill mutmut survivors in capacity/model/step_combine.py (issue 28): the step's
combination of its terms (F4, F4b, F4c), `per_token` (F12) and the batch-one factor. Every
expected value is computed by hand in the comment beside it, not read off the code."""

from __future__ import annotations

import math

import numpy as np
import pytest

from capacity.errors import InputError
from capacity.model.step_combine import (
    DEFAULT_STEP_METHOD,
    RIDGE_SHARPNESS_MAX,
    StepMethod,
    StepParts,
    bandwidth_term_ms,
    check_ridge_sharpness,
    combine_step,
    compute_term_ms,
    counts_as_engines,
    mixed_step_time_ms,
    per_token,
    ridge_ms,
    step_method,
    step_time_ms,
)

B = np.array([0.0, 1.0, 2.0])
"""Batches 0, 1 and 2: 0 has no floor, 1 takes `batch1_factor`, 2 neither."""


def _terms(**over: object) -> dict[str, object]:
    """Peak terms (ms) over B: W/BW 8, b KV/BW 2b, 2Pb/F [0, 3, 30], b A/F 0.5b, KV/BW 0.5."""
    kw: dict[str, object] = dict(weight_peak_ms=8.0, kv_peak_ms=2.0 * B,
                                 gemm_peak_ms=np.array([0.0, 3.0, 30.0]),
                                 attention_peak_ms=0.5 * B, kv_request_peak_ms=0.5,
                                 comm_ms=0.4, batch=B)
    kw.update(over)
    return kw


def _close(got: object, want: list[float]) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=1e-12, atol=1e-12)


# -- small formulas ---------------------------------------------------------------------------


def test_bandwidth_and_compute_terms_by_hand() -> None:
    # 2e9 B / (1000 x 1e9 B/s) = 2e-3 s = 2 ms; / eta_bw 0.8 -> 2.5 ms
    _close(bandwidth_term_ms([2e9, 4e9], 1000.0, 0.8), [2.5, 5.0])
    _close(bandwidth_term_ms(2e9, 1000.0), [2.0])
    # 4e12 FLOP / (100 x 1e12 FLOP/s) = 0.04 s = 40 ms; / eff 0.5 -> 80 ms
    _close(compute_term_ms([4e12, 1e12], 100.0, 0.5), [80.0, 20.0])
    _close(compute_term_ms(4e12, 100.0), [40.0])
    assert bandwidth_term_ms(2e9, 1000.0).dtype == np.float64
    assert compute_term_ms(4e12, 100.0).dtype == np.float64


def test_step_time_overlaps_memory_and_arithmetic() -> None:
    # t0 1 + max(10, 3) + comm 0.5 = 11.5; 1 + max(2, 8) + 0.5 = 9.5
    out = step_time_ms(bandwidth_ms=np.array([10.0, 2.0]), compute_ms=np.array([3.0, 8.0]),
                       comm_ms=0.5, overhead_ms=1.0)
    _close(out, [11.5, 9.5])
    assert out.dtype == np.float64
    # sharpness 2: sqrt(3^2 + 4^2) = 5; 1 + 5 + 0.5 = 6.5
    _close(step_time_ms(bandwidth_ms=3.0, compute_ms=4.0, comm_ms=0.5, overhead_ms=1.0,
                        ridge_sharpness=2.0), [6.5])


def test_mixed_step_by_hand() -> None:
    kw = dict(bandwidth_ms=10.0, compute_ms=2.0, comm_ms=1.5, overhead_ms=3.0, serial_ms=0.5)
    # 3 + max(10, 2 + 5) + 1.5 + 0.5 = 15; 3 + max(10, 2 + 20) + 1.5 + 0.5 = 27
    assert mixed_step_time_ms(**kw, prefill_ms=5.0) == pytest.approx(15.0)
    assert mixed_step_time_ms(**kw, prefill_ms=20.0) == pytest.approx(27.0)
    # no chunk: F4's 3 + 10 + 1.5 + 0.5 = 15
    assert mixed_step_time_ms(**kw, prefill_ms=0.0) == pytest.approx(15.0)


def test_ridge_edges() -> None:
    # sharpness 0 and inf: the max; 3-4-5 at k = 2; k = 3: (1 + 8)^(1/3) x ... : (1^3 + 2^3)^(1/3)
    # = 9^(1/3) = 2.080084
    a, b = np.array([3.0, 1.0, 0.0]), np.array([4.0, 2.0, 0.0])
    _close(ridge_ms(a, b), [4.0, 2.0, 0.0])
    _close(ridge_ms(a, b, RIDGE_SHARPNESS_MAX), [4.0, 2.0, 0.0])
    _close(ridge_ms(a, b, math.inf), [4.0, 2.0, 0.0])
    out = ridge_ms(a, b, 3.0)
    np.testing.assert_allclose(out, [91.0 ** (1 / 3), 9.0 ** (1 / 3), 0.0], rtol=1e-12)
    assert not np.isnan(out).any() and out.dtype == np.float64
    # both terms 0 at k = 2: 0, not 0/0
    _close(ridge_ms(0.0, 0.0, 2.0), [0.0])
    # large terms do not overflow: 1e200 and 1e200 at k = 2 -> sqrt(2) x 1e200
    assert float(ridge_ms(1e200, 1e200, 2.0)) == pytest.approx(math.sqrt(2) * 1e200)
    assert RIDGE_SHARPNESS_MAX == 0.0


def test_ridge_sharpness_messages() -> None:
    assert check_ridge_sharpness(0.0) is None
    assert check_ridge_sharpness(1.0) is None
    assert check_ridge_sharpness(math.inf) is None
    assert check_ridge_sharpness(0.5) == (
        "the ridge sharpness must be 0 (the max) or >= 1, got 0.5")
    assert check_ridge_sharpness(math.nan) == (
        "the ridge sharpness must be 0 (the max) or >= 1, got nan")
    assert check_ridge_sharpness(0.999) is not None


def test_step_methods_by_name() -> None:
    assert step_method("chapter") is StepMethod.CHAPTER
    assert step_method("operator") is StepMethod.OPERATOR
    assert step_method("bound") is StepMethod.BOUND
    assert DEFAULT_STEP_METHOD is StepMethod.CHAPTER
    assert [m.value for m in StepMethod] == ["chapter", "operator", "bound"]
    with pytest.raises(InputError) as err:
        step_method("roofline")
    assert str(err.value) == "unknown step method 'roofline': use chapter or operator or bound"
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_counts_as_engines() -> None:
    assert counts_as_engines("chapter") is False
    assert counts_as_engines(StepMethod.CHAPTER) is False
    assert counts_as_engines("operator") is True
    assert counts_as_engines(StepMethod.BOUND) is True


# -- combine_step: the chapter's one overlap --------------------------------------------------


def test_chapter_step_with_every_knob() -> None:
    p = combine_step(method="chapter", **_terms(), eta_bw=0.5, eff=0.75, overhead_ms=1.0,
                     seq_overhead_ms=0.1, batch1_factor=1.5,
                     eta_kv=0.25, attn_sat_batch=100.0)  # neither reaches the chapter's step
    # bandwidth (8 + 2b) / 0.5 = [16, 20, 24]; compute [0, 3, 30] / 0.75 = [0, 4, 40]
    _close(p.bandwidth_ms, [16.0, 20.0, 24.0])
    _close(p.compute_ms, [0.0, 4.0, 40.0])
    # step before the batch-one factor: 1 + max + 0.4 + 0.1 b = [17.4, 21.5, 41.6]
    # b = 1: (1.5 - 1) x (21.5 - 0.4) = 10.55 more -> 32.05
    _close(p.step_ms, [17.4, 32.05, 41.6])
    # serial: t_seq b + the batch-one extra = [0, 0.1 + 10.55, 0.2]
    _close(p.serial_ms, [0.0, 10.65, 0.2])
    _close(p.gemm_ms, [0.0, 0.0, 0.0])
    _close(p.attention_ms, [0.0, 0.0, 0.0])
    # the identity step = t0 + max(bandwidth, compute) + comm + serial
    _close(1.0 + np.maximum(p.bandwidth_ms, p.compute_ms) + 0.4 + p.serial_ms, [17.4, 32.05, 41.6])


def test_bound_is_the_chapter_combination() -> None:
    chapter = combine_step(method=StepMethod.CHAPTER, **_terms())
    bound = combine_step(method=StepMethod.BOUND, **_terms())
    # knobs 1, no overheads: max(8 + 2b, [0, 3, 30]) + 0.4 = [8.4, 10.4, 30.4]
    _close(bound.step_ms, [8.4, 10.4, 30.4])
    _close(chapter.step_ms, [8.4, 10.4, 30.4])
    _close(bound.serial_ms, [0.0, 0.0, 0.0])


def test_chapter_ridge_goes_into_serial() -> None:
    # bandwidth 8 + 2b = [8, 10, 12] (knobs 1), compute [6, 0, 16]; k = 2:
    # sqrt(64 + 36) = 10 (+2 over 8), 10 (+0), sqrt(144 + 256) = 20 (+4 over 16)
    p = combine_step(method="chapter", **_terms(gemm_peak_ms=np.array([6.0, 0.0, 16.0])),
                     ridge_sharpness=2.0, overhead_ms=1.0)
    _close(p.serial_ms, [2.0, 0.0, 4.0])
    # 1 + ridge + 0.4 = [11.4, 11.4, 21.4]
    _close(p.step_ms, [11.4, 11.4, 21.4])


def test_batch_one_factor_two_and_one() -> None:
    # factor 2 doubles the b = 1 step less its comm: (2 - 1) x (10.4 - 0.4) = 10 -> 20.4
    p = combine_step(method="chapter", **_terms(), batch1_factor=2.0)
    _close(p.step_ms, [8.4, 20.4, 30.4])
    _close(p.serial_ms, [0.0, 10.0, 0.0])
    # a factor below 1 shortens it: (0.5 - 1) x 10 = -5 -> 5.4
    p = combine_step(method="chapter", **_terms(), batch1_factor=0.5)
    _close(p.step_ms, [8.4, 5.4, 30.4])
    # factor 1 (the default): nothing added, serial all zeros with the batch's shape
    p = combine_step(method="chapter", **_terms(), batch1_factor=1.0)
    _close(p.step_ms, [8.4, 10.4, 30.4])
    assert p.serial_ms.shape == (3,)


def test_batched_overhead_only_from_two_sequences() -> None:
    # chapter, knobs 1: [8.4, 10.4, 30.4]; 3 ms more where b > 1 -> [8.4, 10.4, 33.4]
    p = combine_step(method="chapter", **_terms(), batched_overhead_ms=3.0)
    _close(p.step_ms, [8.4, 10.4, 33.4])
    _close(p.serial_ms, [0.0, 0.0, 3.0])
    # with a factor 0.5 at b = 1: (0.5 - 1) x (10.4 - 0.4) = -5 -> 5.4; the overhead is not
    # part of the b = 1 step the factor scales
    p = combine_step(method="chapter", **_terms(), batched_overhead_ms=3.0, batch1_factor=0.5)
    _close(p.step_ms, [8.4, 5.4, 33.4])
    # operator, knobs 1: gemm max(8, [0, 3, 30]) = [8, 8, 30]; attention max(2b, 0.5b, 0)
    # = [0, 2, 4]; + comm 0.4 = [8.4, 10.4, 34.4]; + 3 at b = 2 -> 37.4
    p = combine_step(method="operator", **_terms(), batched_overhead_ms=3.0)
    _close(p.step_ms, [8.4, 10.4, 37.4])
    # serial = gemm + attn + extra - max(bandwidth, compute): b = 2: 30 + 4 + 3 - max(12, 31)
    _close(p.serial_ms[2:], [6.0])


def test_batch_one_factor_on_a_scalar_batch() -> None:
    # one sequence, scalars: step 8 + 2 = 10 (W + b KV) + comm 1 = 11; x3 less comm:
    # 11 + (3 - 1) x (11 - 1) = 31
    p = combine_step(method="chapter", weight_peak_ms=8.0, kv_peak_ms=2.0, gemm_peak_ms=1.0,
                     attention_peak_ms=0.0, kv_request_peak_ms=2.0, comm_ms=1.0, batch=1,
                     batch1_factor=3.0)
    assert float(p.step_ms) == pytest.approx(31.0)
    assert float(p.serial_ms) == pytest.approx(20.0)
    # the same under the operator method: gemm max(8, 1) = 8, attention max(2, 0, 0) = 2,
    # 8 + 2 + 1 = 11 -> 11 + 2 x 10 = 31
    q = combine_step(method="operator", weight_peak_ms=8.0, kv_peak_ms=2.0, gemm_peak_ms=1.0,
                     attention_peak_ms=0.0, kv_request_peak_ms=2.0, comm_ms=1.0, batch=1,
                     batch1_factor=3.0)
    assert float(q.step_ms) == pytest.approx(31.0)


# -- combine_step: the operator step (F4b) ----------------------------------------------------


def test_operator_step_with_every_knob() -> None:
    p = combine_step(method="operator", **_terms(), eta_bw=0.5, eta_kv=0.25, eff=0.75,
                     attn_sat_batch=6.0, overhead_ms=1.0, seq_overhead_ms=0.1,
                     batch1_factor=1.5)
    # weights 8 / 0.5 = 16; GEMM [0, 3, 30] / 0.75 = [0, 4, 40] -> gemm group max = [16, 16, 40]
    _close(p.gemm_ms, [16.0, 16.0, 40.0])
    # KV 2b / 0.25 = [0, 8, 16]; attention 0.5 b at peak = [0, 0.5, 1];
    # floor KV 0.5 x 6 / 0.25 = 12 where b > 0 -> attention group = [0, 12, 16]
    _close(p.attention_ms, [0.0, 12.0, 16.0])
    # bandwidth 16 + KV = [16, 24, 32]; compute GEMM + attention = [0, 4.5, 41]
    _close(p.bandwidth_ms, [16.0, 24.0, 32.0])
    _close(p.compute_ms, [0.0, 4.5, 41.0])
    # step: 1 + gemm + attention + 0.4 + 0.1 b = [17.4, 29.5, 57.6];
    # b = 1: + 0.5 x (29.5 - 0.4) = 14.55 -> 44.05
    _close(p.step_ms, [17.4, 44.05, 57.6])
    # serial = gemm + attention + t_seq b + extra - max(bandwidth, compute):
    # [16 - 16, 28 + 0.1 + 14.55 - 24, 56 + 0.2 - 41] = [0, 18.65, 15.2]
    _close(p.serial_ms, [0.0, 18.65, 15.2])


def test_operator_eta_kv_defaults_to_eta_bw() -> None:
    p = combine_step(method="operator", **_terms(), eta_bw=0.5, attn_sat_batch=6.0)
    # KV 2b / 0.5 = [0, 4, 8]; floor 0.5 x 6 / 0.5 = 6 where b > 0; attention 0.5 b
    # -> attention group [0, 6, 8]; gemm max(16, [0, 3, 30]) = [16, 16, 30]
    _close(p.attention_ms, [0.0, 6.0, 8.0])
    _close(p.gemm_ms, [16.0, 16.0, 30.0])
    # 0.4 comm: [16.4, 22.4, 38.4]
    _close(p.step_ms, [16.4, 22.4, 38.4])


def test_operator_attention_arithmetic_can_set_the_group() -> None:
    # attention at peak 5b = [0, 5, 10] beats KV 2b and no floor: group [0, 5, 10];
    # attention FLOPs are not divided by eff (0.5): compute = [0, 3, 30] / 0.5 + [0, 5, 10]
    p = combine_step(method="operator", **_terms(attention_peak_ms=5.0 * B), eff=0.5)
    _close(p.attention_ms, [0.0, 5.0, 10.0])
    _close(p.compute_ms, [0.0, 11.0, 70.0])
    # gemm max(8, [0, 6, 60]) = [8, 8, 60]; step 8 + [0, 5, 10] + 0.4 = [8.4, 13.4, 70.4]
    _close(p.step_ms, [8.4, 13.4, 70.4])
    # serial: [8 - 8, 13 - max(10, 11), 70 - max(12, 70)] = [0, 2, 0]
    _close(p.serial_ms, [0.0, 2.0, 0.0])


def test_operator_ridge_on_the_weight_gemms_only() -> None:
    # weights 6, GEMM [8, 0, 0]; k = 2: sqrt(36 + 64) = 10, 6, 6. Attention: KV 2b = [0, 2, 4]
    p = combine_step(method="operator", **_terms(weight_peak_ms=6.0,
                                                 gemm_peak_ms=np.array([8.0, 0.0, 0.0])),
                     ridge_sharpness=2.0)
    _close(p.gemm_ms, [10.0, 6.0, 6.0])
    _close(p.attention_ms, [0.0, 2.0, 4.0])
    _close(p.step_ms, [10.4, 8.4, 10.4])


def test_operator_shapes_broadcast_over_the_batch() -> None:
    # scalar weight and GEMM terms with a batch array: the groups still have the batch's shape
    p = combine_step(method="operator", weight_peak_ms=4.0, kv_peak_ms=np.array([1.0, 2.0]),
                     gemm_peak_ms=1.0, attention_peak_ms=0.0, kv_request_peak_ms=1.0,
                     comm_ms=0.0, batch=np.array([2.0, 4.0]))
    assert p.gemm_ms.shape == (2,) and p.attention_ms.shape == (2,)
    _close(p.gemm_ms, [4.0, 4.0])
    _close(p.attention_ms, [1.0, 2.0])
    for arr in (p.bandwidth_ms, p.compute_ms, p.gemm_ms, p.attention_ms, p.serial_ms, p.step_ms):
        assert arr.dtype == np.float64


# -- per_token (F12) --------------------------------------------------------------------------


def _parts() -> StepParts:
    return StepParts(bandwidth_ms=np.array([10.0, 5.0]), compute_ms=np.array([5.0, 10.0]),
                     gemm_ms=np.array([5.0, 7.5]), attention_ms=np.array([2.5, 1.0]),
                     serial_ms=np.array([0.0, 0.0]), step_ms=np.array([12.0, 12.0]))


def test_per_token_divides_by_tau() -> None:
    p = per_token(_parts(), draft_ms=3.0, accepted_tokens=np.array([2.5, 5.0]),
                  overhead_ms=1.0, comm_ms=0.5)
    # (12 + 3) / 2.5 = 6; (12 + 3) / 5 = 3
    _close(p.step_ms, [6.0, 3.0])
    # bandwidth [10 / 2.5, 5 / 5] = [4, 1]; compute [5 / 2.5, 10 / 5] = [2, 2]
    _close(p.bandwidth_ms, [4.0, 1.0])
    _close(p.compute_ms, [2.0, 2.0])
    _close(p.gemm_ms, [2.0, 1.5])
    _close(p.attention_ms, [1.0, 0.2])
    # serial = step - t0 - max(bandwidth, compute) - comm = [6 - 1 - 4 - 0.5, 3 - 1 - 2 - 0.5]
    _close(p.serial_ms, [0.5, -0.5])
    for arr in (p.bandwidth_ms, p.compute_ms, p.gemm_ms, p.attention_ms, p.serial_ms, p.step_ms):
        assert arr.dtype == np.float64


def test_per_token_with_array_draft_and_comm() -> None:
    p = per_token(_parts(), draft_ms=np.array([0.0, 8.0]), accepted_tokens=2.0,
                  overhead_ms=0.0, comm_ms=np.array([1.0, 2.0]))
    # (12 + 0) / 2 = 6; (12 + 8) / 2 = 10; serial [6 - 5 - 1, 10 - 5 - 2] = [0, 3]
    _close(p.step_ms, [6.0, 10.0])
    _close(p.serial_ms, [0.0, 3.0])


# -- shapes, defaults and precision -----------------------------------------------------------


def test_chapter_groups_are_float_zeros_in_the_batchs_shape() -> None:
    p = combine_step(method="chapter", **_terms())
    for arr in (p.gemm_ms, p.attention_ms):
        assert arr.shape == (3,) and arr.dtype == np.float64
        assert not arr.any()


def test_chapter_serial_takes_the_shape_of_an_array_comm() -> None:
    # every term a scalar but the all-reduce time: step 8 + 2 + [0.4, 0.8] = [10.4, 10.8]
    p = combine_step(method="chapter", weight_peak_ms=8.0, kv_peak_ms=2.0, gemm_peak_ms=1.0,
                     attention_peak_ms=0.0, kv_request_peak_ms=2.0,
                     comm_ms=np.array([0.4, 0.8]), batch=2.0)
    _close(p.step_ms, [10.4, 10.8])
    assert p.serial_ms.shape == (2,)
    _close(p.serial_ms, [0.0, 0.0])


def test_operator_groups_take_the_batchs_shape_over_scalar_terms() -> None:
    # scalar terms, batch [1, 2]: gemm max(4, 1) = 4, attention max(1, 0, 0) = 1 at both
    p = combine_step(method="operator", weight_peak_ms=4.0, kv_peak_ms=1.0, gemm_peak_ms=1.0,
                     attention_peak_ms=0.0, kv_request_peak_ms=0.5, comm_ms=0.0,
                     batch=np.array([1.0, 2.0]))
    assert p.gemm_ms.shape == (2,) and p.attention_ms.shape == (2,)
    _close(p.gemm_ms, [4.0, 4.0])
    _close(p.attention_ms, [1.0, 1.0])


def test_operator_has_no_floor_by_default() -> None:
    # KV of one sequence 5 ms at peak, the batch's KV 2 ms: without b_sat the attention group
    # is max(2, 0) = 2 (a floor of b_sat 1 would make it 5); step 4 + 2 = 6
    p = combine_step(method="operator", weight_peak_ms=4.0, kv_peak_ms=2.0, gemm_peak_ms=1.0,
                     attention_peak_ms=0.0, kv_request_peak_ms=5.0, comm_ms=0.0, batch=1.0)
    assert float(p.attention_ms) == pytest.approx(2.0)
    assert float(p.step_ms) == pytest.approx(6.0)


def test_ridge_below_one_millisecond() -> None:
    # 0.5 and 0.5 ms at k = 2: sqrt(0.25 + 0.25) = 0.707107 ms; 0.3 and 0.4: 0.5 ms
    _close(ridge_ms(np.array([0.5, 0.3]), np.array([0.5, 0.4]), 2.0),
           [math.sqrt(0.5), 0.5])


def test_single_precision_inputs_are_promoted_before_the_arithmetic() -> None:
    # float32 terms: the step is computed in float64 from their (exact) values, so it equals,
    # to the bit, the step of the same values given as float64. A float32 division by a knob
    # such as 0.3 would round to 24 bits (a relative error near 1e-8). b_sat 17: the floor
    # 0.3 x 17 / 0.7 = 7.29 ms binds the operator's attention at b = 1 and 3 (KV 3.29, 6.71).
    terms32 = dict(weight_peak_ms=np.float32([8.1, 8.1, 8.1]),
                   kv_peak_ms=np.float32([0.0, 2.3, 4.7]),
                   gemm_peak_ms=np.float32([0.0, 3.1, 30.7]),
                   attention_peak_ms=np.float32([0.0, 0.7, 1.3]),
                   kv_request_peak_ms=np.float32(0.3), comm_ms=np.float32(0.4),
                   batch=np.float32([0.0, 1.0, 3.0]))
    terms64 = {k: np.asarray(v, dtype=np.float64) for k, v in terms32.items()}
    knobs = dict(eta_bw=0.3, eta_kv=0.7, eff=0.3, attn_sat_batch=17.0, overhead_ms=0.1,
                 seq_overhead_ms=0.1, batch1_factor=1.3)
    for method in ("chapter", "operator"):
        for k in (0.0, 3.0):
            p32 = combine_step(method=method, **terms32, **knobs, ridge_sharpness=k)
            p64 = combine_step(method=method, **terms64, **knobs, ridge_sharpness=k)
            for name in ("bandwidth_ms", "compute_ms", "gemm_ms", "attention_ms", "serial_ms",
                         "step_ms"):
                got, want = getattr(p32, name), getattr(p64, name)
                assert got.dtype == np.float64, (method, name)
                np.testing.assert_array_equal(got, want, err_msg=f"{method} {name} k={k}")
