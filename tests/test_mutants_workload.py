"""Tests written to kill mutmut survivors in capacity/model/workload.py (issue 28): F9's
workload checks (each message and each bound), the peak rate, Little's law, headroom and the
fixed point's iteration. Every expected number is worked out in the comment beside it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from capacity.errors import InputError
from capacity.model.workload import (
    FIXED_POINT_MAX_ITER,
    FIXED_POINT_REL_TOL,
    SECONDS_PER_HOUR,
    Workload,
    concurrency_fixed_point,
    littles_law_concurrency,
    peak_arrival_rate_per_s,
    request_duration_s,
    with_headroom,
)
from capacity.types import FloatArray

ONE_OF = ("give either daily active users (--dau) or peak concurrency (--peak-concurrency), "
          "not both and not neither")


def _refused(message: str, **kw: object) -> None:
    with pytest.raises(InputError) as err:
        Workload(**kw)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_constants() -> None:
    assert SECONDS_PER_HOUR == 3600.0
    assert FIXED_POINT_MAX_ITER == 200
    assert FIXED_POINT_REL_TOL == 1e-5


def test_exactly_one_load_is_given() -> None:
    _refused(ONE_OF)
    _refused(ONE_OF, daily_active_users=10.0, peak_concurrency=5.0)
    _refused(ONE_OF, rate_per_s=1.0, peak_concurrency=5.0)
    _refused(ONE_OF, daily_active_users=10.0, rate_per_s=1.0)
    _refused(ONE_OF, daily_active_users=10.0, rate_per_s=1.0, peak_concurrency=5.0)


@pytest.mark.parametrize(("kw", "message"), [
    ({"rate_per_s": 0.0}, "arrival rate must be > 0, got 0.0"),
    ({"rate_per_s": math.inf}, "arrival rate must be > 0, got inf"),
    ({"rate_per_s": math.nan}, "arrival rate must be > 0, got nan"),
    ({"daily_active_users": -1.0}, "daily active users must be > 0, got -1.0"),
    ({"daily_active_users": 10.0, "requests_per_user_per_day": 0.0},
     "requests per user per day must be > 0, got 0.0"),
    ({"daily_active_users": 10.0, "peak_hours": 0.0}, "peak hours must be > 0, got 0.0"),
    ({"daily_active_users": 10.0, "peak_share": 0.0},
     "peak share is the fraction of daily requests in the peak window: give a value in (0, 1], "
     "got 0.0"),
    ({"daily_active_users": 10.0, "peak_share": 1.01},
     "peak share is the fraction of daily requests in the peak window: give a value in (0, 1], "
     "got 1.01"),
    ({"daily_active_users": 10.0, "peak_hours": 24.5},
     "peak window must be at most 24 hours, got 24.5"),
    ({"peak_concurrency": 0.0}, "peak concurrency must be > 0, got 0.0"),
    ({"peak_concurrency": "5"}, "peak concurrency must be > 0, got 5"),
    ({"peak_concurrency": 5.0, "context_tokens": 0},
     "context length must be a whole number >= 1 token, got 0"),
    ({"peak_concurrency": 5.0, "context_tokens": 8192.0},
     "context length must be a whole number >= 1 token, got 8192.0"),
    ({"peak_concurrency": 5.0, "output_tokens": 0},
     "output length must be a whole number >= 1 token, got 0"),
    ({"peak_concurrency": 5.0, "prompt_tokens": 0}, "prompt length must be >= 1 token, got 0"),
    ({"peak_concurrency": 5.0, "prompt_tokens": 100.0},
     "prompt length must be >= 1 token, got 100.0"),
    ({"peak_concurrency": 5.0, "prompt_tokens": 8193},
     "prompt of 8193 tokens exceeds the context of 8192 tokens"),
    ({"peak_concurrency": 5.0, "headroom": -0.1},
     "headroom is a fraction (0.2 = 20 %): give 0..2, got -0.1"),
    ({"peak_concurrency": 5.0, "headroom": 2.01},
     "headroom is a fraction (0.2 = 20 %): give 0..2, got 2.01"),
    ({"peak_concurrency": 5.0, "headroom": math.nan},
     "headroom is a fraction (0.2 = 20 %): give 0..2, got nan"),
])
def test_each_bad_field_says_what_to_fix(kw: dict[str, object], message: str) -> None:
    _refused(message, **kw)


def test_the_bounds_themselves_are_accepted() -> None:
    # peak share 1, a 24-hour window, one-token lengths, prompt = context, headroom 0 and 2
    wl = Workload(daily_active_users=10.0, peak_share=1.0, peak_hours=24.0)
    # 10 x 20 x 1 / (24 x 3600) = 200 / 86400 req/s
    assert wl.peak_rate_per_s == pytest.approx(200 / 86400)
    Workload(peak_concurrency=1.0, context_tokens=1, output_tokens=1, prompt_tokens=1)
    Workload(peak_concurrency=1.0, headroom=0.0)
    Workload(peak_concurrency=1.0, headroom=2.0)
    # the daily-user checks do not apply to a rate or a concurrency
    Workload(rate_per_s=2.0, peak_share=5.0, peak_hours=100.0, requests_per_user_per_day=-1.0)
    Workload(peak_concurrency=2.0, peak_share=0.0)


def test_prompt_and_rates_by_load_kind() -> None:
    conc = Workload(peak_concurrency=4.0, context_tokens=1000)
    assert conc.prompt == 1000                     # the prompt defaults to the context
    assert conc.peak_rate_per_s is None and conc.requests_per_day is None
    assert Workload(peak_concurrency=4.0, context_tokens=1000, prompt_tokens=300).prompt == 300
    rate = Workload(rate_per_s=2.5)
    assert rate.peak_rate_per_s == 2.5 and rate.requests_per_day is None
    # 1000 users x 5 requests = 5000 a day; 5000 x 0.5 / (4 x 3600) = 0.17361 req/s
    daily = Workload(daily_active_users=1000.0, requests_per_user_per_day=5.0, peak_share=0.5,
                     peak_hours=4.0)
    assert daily.requests_per_day == 5000.0
    assert daily.peak_rate_per_s == pytest.approx(2500 / 14400)


def test_peak_rate_formula() -> None:
    # 1200 x 3 x 0.25 / (0.5 x 3600) = 900 / 1800 = 0.5 req/s
    assert peak_arrival_rate_per_s(daily_active_users=1200, requests_per_user_per_day=3,
                                   peak_share=0.25, peak_hours=0.5) == pytest.approx(0.5)


def test_duration_littles_law_and_headroom_arrays() -> None:
    # [1 + 100 x 0.010, 2 + 100 x 0.030] = [2, 5] s
    d = request_duration_s(np.array([1.0, 2.0]), 100, np.array([10.0, 30.0]))
    np.testing.assert_allclose(d, [2.0, 5.0])
    assert d.dtype == np.float64
    np.testing.assert_allclose(littles_law_concurrency(np.array([0.5, 2.0]), d), [1.0, 10.0])
    # default headroom 20 %: 50 x 1.2 = 60; none: 50; 100 %: 100
    assert float(with_headroom(50)) == pytest.approx(60.0)
    assert float(with_headroom(50, 0.0)) == 50.0
    assert float(with_headroom(50, 1.0)) == 100.0
    with pytest.raises(InputError) as err:
        with_headroom(50, -0.1)
    assert str(err.value) == "headroom must be >= 0, got -0.1"


def _const(d: float):  # type: ignore[no-untyped-def]
    def f(c: FloatArray) -> FloatArray:
        return np.full_like(c, d, dtype=np.float64)
    return f


def test_fixed_point_constant_duration_takes_two_iterations() -> None:
    # C = 3 x 2 = 6 at the first iterate; the second repeats 6 and stops
    fp = concurrency_fixed_point(3.0, _const(2.0))
    assert float(fp.concurrency) == 6.0
    assert float(fp.duration_s) == 2.0
    assert bool(fp.converged) and fp.iterations == 2


def test_fixed_point_stops_at_max_iter() -> None:
    # d = 2 + 0.05 C at rate 1: iterates 2, 2.1, 2.105; after 3 the change 0.005 is still
    # above 1e-5 x 2.105: not converged, C = 2.105, d = 2 + 0.05 x 2.105 = 2.10525
    fp = concurrency_fixed_point(1.0, lambda c: 2.0 + 0.05 * c, max_iter=3)
    assert fp.iterations == 3
    assert float(fp.concurrency) == pytest.approx(2.105, rel=1e-12)
    assert float(fp.duration_s) == pytest.approx(2.10525, rel=1e-12)
    assert not bool(fp.converged)
    # a loose tolerance (1 %) stops at the third iterate, |2.105 - 2.1| = 0.005 <= 0.02105,
    # and keeps it: 2.105
    loose = concurrency_fixed_point(1.0, lambda c: 2.0 + 0.05 * c, rel_tol=0.01)
    assert loose.iterations == 3 and bool(loose.converged)
    assert float(loose.concurrency) == pytest.approx(2.105, rel=1e-12)


def test_fixed_point_over_the_limit_holds_the_limit() -> None:
    # rate 30 x (2 + 0.05 C): 60, 150, 285, 487.5, 791.25 > 500 -> capped at 500, not converged;
    # rate 1 beside it converges to 2 / 0.95 = 2.105263 on its own
    fp = concurrency_fixed_point(np.array([1.0, 30.0]), lambda c: 2.0 + 0.05 * c, limit=500.0)
    assert fp.concurrency[1] == 500.0
    assert fp.concurrency[0] == pytest.approx(2 / 0.95, rel=1e-4)
    assert fp.converged.tolist() == [True, False]
    np.testing.assert_allclose(fp.duration_s, 2.0 + 0.05 * fp.concurrency)
    # per-configuration limits: the same rate 30 under a limit of 1e9 still diverges (30 x
    # 0.05 = 1.5 > 1), under 100 it stops at 100
    fp = concurrency_fixed_point(np.array([30.0, 30.0]), lambda c: 2.0 + 0.05 * c,
                                 limit=np.array([100.0, 1e9]))
    assert fp.concurrency.tolist() == [100.0, 1e9]
    assert fp.converged.tolist() == [False, False]


def test_fixed_point_exactly_at_the_limit_is_converged() -> None:
    # C = 5 x 2 = 10 = the limit: not over it
    fp = concurrency_fixed_point(5.0, _const(2.0), limit=10.0)
    assert float(fp.concurrency) == 10.0 and bool(fp.converged)


def test_fixed_point_nan_duration_is_overload_and_zero_rate_is_zero() -> None:
    nan = _const(math.nan)
    fp = concurrency_fixed_point(np.array([0.0, 1.0]), nan, limit=100.0)
    assert fp.concurrency.tolist() == [0.0, 100.0]
    assert fp.converged.tolist() == [True, False]
    with pytest.raises(InputError) as err:
        concurrency_fixed_point(np.array([1.0, -0.5]), _const(1.0))
    assert str(err.value) == "arrival rate must be >= 0 requests/s"


def test_fixed_point_zero_rate_converges_at_once() -> None:
    fp = concurrency_fixed_point(0.0, _const(3.0))
    assert float(fp.concurrency) == 0.0 and float(fp.duration_s) == 3.0
    assert bool(fp.converged) and fp.iterations == 1


def test_fixed_point_keeps_a_converged_entry_while_others_iterate() -> None:
    # d = 2 + 0.05 C, tolerance 1 %. Rate 1: 2, 2.1, 2.105 (|0.005| <= 0.02105: done at the
    # third iterate, kept). Rate 10: C = 20 + 0.5 C: 20, 30, 35, 37.5, 38.75, 39.375, 39.6875
    # (|0.3125| <= 0.396875 at the seventh). Seven iterations in all.
    fp = concurrency_fixed_point(np.array([1.0, 10.0]), lambda c: 2.0 + 0.05 * c, rel_tol=0.01)
    assert fp.concurrency[0] == pytest.approx(2.105, rel=1e-12)
    assert fp.concurrency[1] == pytest.approx(39.6875, rel=1e-12)
    assert fp.iterations == 7
    assert fp.converged.tolist() == [True, True]


def test_fixed_point_calls_the_duration_with_one_concurrency_per_configuration() -> None:
    shapes: list[tuple[int, ...]] = []

    def duration(c: FloatArray) -> FloatArray:
        shapes.append(np.shape(c))
        return 2.0 + 0.0 * c

    concurrency_fixed_point(np.array([1.0, 2.0, 3.0]), duration)
    assert shapes and set(shapes) == {(3,)}
    shapes.clear()
    # a scalar rate against per-configuration limits: still one per configuration
    concurrency_fixed_point(1.0, duration, limit=np.array([10.0, 20.0]))
    assert shapes and set(shapes) == {(2,)}


def test_fixed_point_with_no_iterations() -> None:
    # max_iter 0: nothing is iterated; C stays 0, not converged, 0 iterations
    fp = concurrency_fixed_point(np.array([1.0, 2.0]), _const(2.0), max_iter=0)
    assert fp.iterations == 0
    assert fp.concurrency.tolist() == [0.0, 0.0]
    assert fp.converged.tolist() == [False, False]


def test_single_precision_inputs_are_computed_in_double() -> None:
    # float32 20.1 is 20.100000381469727; 256 of them / 1e3 in double, + 1 s: the float32 value
    # times 256 rounded to 24 bits would differ near the 7th digit
    tpot = np.float32([20.1])
    want = 1.0 + 256 * float(tpot[0]) / 1e3
    assert float(request_duration_s(1.0, 256, tpot)[0]) == want
    # 7.1 as float32 (7.099999904632568) x 1.2 in double = 8.5199998856; in float32 8.5200005
    c = np.float32([7.1])
    assert float(with_headroom(c, 0.2)[0]) == float(c[0]) * 1.2


def test_fixed_point_tolerance_is_inclusive_and_relative() -> None:
    # rel_tol 1: the first iterate 2 moves by exactly 1 x 2 -> done at once (C = 2)
    fp = concurrency_fixed_point(1.0, lambda c: 2.0 + 0.5 * c, rel_tol=1.0)
    assert fp.iterations == 1 and float(fp.concurrency) == 2.0
    # tiny loads keep the tolerance relative to C, not to 1: rate 0.001 x (2 + 0.05 C):
    # 0.002, 0.0020001 (moved 1e-7 > 1e-5 x 0.0020001), 0.002000100005 (moved 5e-12): 3 iterations
    fp = concurrency_fixed_point(0.001, lambda c: 2.0 + 0.05 * c)
    assert fp.iterations == 3
    assert float(fp.concurrency) == pytest.approx(0.002000100005, rel=1e-12)


def test_fixed_point_duration_comes_back_in_double() -> None:
    fp = concurrency_fixed_point(np.array([1.0]), lambda c: np.full(c.shape, 2.5, np.float32))
    assert fp.duration_s.dtype == np.float64 and fp.duration_s.tolist() == [2.5]
