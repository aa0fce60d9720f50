"""F9: daily users -> peak arrival rate -> concurrency (Little's law, fixed point, headroom)."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.errors import InputError
from capacity.model.workload import (
    Workload,
    concurrency_fixed_point,
    littles_law_concurrency,
    peak_arrival_rate_per_s,
    request_duration_s,
    with_headroom,
)


def test_peak_rate_worked_example() -> None:
    # 500 users x 20 requests x 30 % in 2 hours = 3000 requests in 7200 s
    rate = peak_arrival_rate_per_s(daily_active_users=500, requests_per_user_per_day=20,
                                   peak_share=0.3, peak_hours=2)
    assert rate == pytest.approx(3000 / 7200)
    wl = Workload(daily_active_users=500)
    assert wl.peak_rate_per_s == pytest.approx(rate)
    assert wl.requests_per_day == 10_000


def test_littles_law_and_duration() -> None:
    d = request_duration_s(3.0, 256, 20.0)
    assert float(d) == pytest.approx(3.0 + 256 * 0.020)
    assert float(littles_law_concurrency(0.4167, 10.0)) == pytest.approx(4.167)
    assert float(with_headroom(50, 0.2)) == pytest.approx(60.0)


def test_fixed_point_matches_closed_form_for_linear_duration() -> None:
    # duration(C) = a + b C  ->  C = lambda a / (1 - lambda b)
    a, b = 2.0, 0.05
    rates = np.array([0.5, 1.0, 5.0])
    fp = concurrency_fixed_point(rates, lambda c: a + b * c)
    assert np.all(fp.converged)
    np.testing.assert_allclose(fp.concurrency, rates * a / (1 - rates * b), rtol=1e-4)


def test_fixed_point_reports_overload() -> None:
    # lambda x b >= 1: no fixed point, the load outruns the hardware
    fp = concurrency_fixed_point(np.array([1.0, 30.0]), lambda c: 2.0 + 0.05 * c, limit=500.0)
    assert fp.converged.tolist() == [True, False]


def test_the_fixed_point_runs_only_the_entries_still_moving() -> None:
    # duration(C) = a + b C per entry: three converge within a few steps, the last (lambda b
    # just under 1) creeps for every step to its far fixed point. With `narrow` the same
    # iterates come out, and the later steps run that entry alone.
    a = np.array([2.0, 2.0, 2.0, 2.0])
    b = np.array([0.05, 0.05, 0.05, 0.0999])
    rates = np.array([0.5, 1.0, 5.0, 10.0])
    seen: list[int] = []

    def narrow(rows: np.ndarray) -> object:
        def run(c: np.ndarray) -> np.ndarray:
            seen.append(rows.size)
            return np.asarray(a[rows] + b[rows] * c)
        return run
    plain = concurrency_fixed_point(rates, lambda c: a + b * c, limit=1e6)
    fast = concurrency_fixed_point(rates, lambda c: a + b * c, limit=1e6,
                                   narrow=narrow)  # type: ignore[arg-type]
    assert fast.iterations == plain.iterations > 100
    np.testing.assert_array_equal(fast.concurrency, plain.concurrency)
    np.testing.assert_array_equal(fast.duration_s, plain.duration_s)
    assert fast.converged.tolist() == plain.converged.tolist()
    assert seen and set(seen) == {1}   # every narrowed step ran the creeping entry alone


def test_the_accelerated_fixed_point_jumps_where_plain_iteration_creeps() -> None:
    # d = 2 + 0.099 C at rate 10: C = 20 + 0.99 C, fixed point 20 / 0.01 = 2000, each step
    # 0.99 of the last. Plain: 2000 (1 - 0.99^n), 1732.04 after 200 steps, not converged.
    # Accelerated: 20, 39.8, 59.402 (steps 19.8, 19.602: ratios 0.99, 0.99) -> Aitken's
    # 59.402 + 19.602 x 0.99 / 0.01 = 2000, which the fourth step confirms
    plain = concurrency_fixed_point(10.0, lambda c: 2.0 + 0.099 * c)
    assert not bool(plain.converged) and plain.iterations == 200
    assert float(plain.concurrency) == pytest.approx(2000 * (1 - 0.99 ** 200), rel=1e-9)
    fast = concurrency_fixed_point(10.0, lambda c: 2.0 + 0.099 * c, accelerate=True)
    assert bool(fast.converged) and fast.iterations == 4
    assert float(fast.concurrency) == pytest.approx(2000.0, rel=1e-9)
    assert float(fast.duration_s) == pytest.approx(2.0 + 0.099 * 2000, rel=1e-9)


def test_the_accelerated_fixed_point_leaves_fast_entries_as_plain() -> None:
    # a step ratio under 0.5 (0.05 x 1, 0.05 x 5) never jumps: the very iterates of plain
    # iteration, bit for bit, beside an entry that does (0.099 x 10)
    rates = np.array([1.0, 5.0, 10.0])
    plain = concurrency_fixed_point(rates[:2], lambda c: 2.0 + 0.05 * c)
    fast = concurrency_fixed_point(rates, lambda c: 2.0 + np.array([0.05, 0.05, 0.099]) * c,
                                   accelerate=True)
    np.testing.assert_array_equal(fast.concurrency[:2], plain.concurrency)
    assert fast.converged.tolist() == [True, True, True]


def test_the_accelerated_fixed_point_past_the_limit_stops_at_once() -> None:
    # the same iteration under a limit of 1500: Aitken's 2000 is past it, so the entry jumps
    # to 1500, where 10 x (2 + 0.099 x 1500) = 1505 > 1500: over the limit, as plain
    # iteration finds after 2000 (1 - 0.99^n) passes 1500 (n = 138)
    plain = concurrency_fixed_point(10.0, lambda c: 2.0 + 0.099 * c, limit=1500.0)
    fast = concurrency_fixed_point(10.0, lambda c: 2.0 + 0.099 * c, limit=1500.0,
                                   accelerate=True)
    assert plain.iterations == 138 and fast.iterations == 4
    for fp in (plain, fast):
        assert float(fp.concurrency) == 1500.0 and not bool(fp.converged)


def test_the_accelerated_fixed_point_finds_the_stable_root_of_a_convex_duration() -> None:
    # d = 2 + 0.099 C + 1e-7 C^2 at rate 10: C = 20 + 0.99 C + 1e-6 C^2 has two roots,
    # (0.01 -+ sqrt(1e-4 - 8e-5)) / 2e-6 = 2763.93 (stable: slope 0.99553) and 7236.07; plain
    # iteration climbs to the first at 0.9955 a step (not converged in 200); the accelerated
    # one lands on it, from above or below, and not on the second
    def d(c: np.ndarray) -> np.ndarray:
        return 2.0 + 0.099 * c + 1e-7 * c * c
    low = (0.01 - np.sqrt(2e-5)) / 2e-6
    assert not bool(concurrency_fixed_point(10.0, d, limit=1e6).converged)
    fast = concurrency_fixed_point(10.0, d, limit=1e6, accelerate=True)
    assert bool(fast.converged) and fast.iterations < 60
    assert float(fast.concurrency) == pytest.approx(low, rel=1e-3)


@pytest.mark.parametrize("seed", range(5))
def test_the_accelerated_fixed_point_matches_the_closed_form(seed: int) -> None:
    # linear durations with step ratios lambda b spread over (0, 0.999): every entry converges
    # in under 30 steps to lambda a / (1 - lambda b), within 2e-5 (it reads 1e-5 at most; plain
    # iteration leaves 5-10 of the 200 unconverged after 200 steps and its converged ones
    # 2e-4 short: a step of 1e-5 at a ratio of 0.95 is 2e-4 from the root)
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 20.0, 200)
    ratio = rng.uniform(0.0, 0.999, 200)
    rates = rng.uniform(0.1, 50.0, 200)
    b = ratio / rates
    fp = concurrency_fixed_point(rates, lambda c: a + b * c, accelerate=True)
    assert np.all(fp.converged) and fp.iterations < 30
    np.testing.assert_allclose(fp.concurrency, rates * a / (1 - ratio), rtol=2e-5)


@pytest.mark.parametrize("kwargs", [
    pytest.param({}, id="neither"),
    pytest.param({"daily_active_users": 10, "peak_concurrency": 5}, id="both"),
    pytest.param({"daily_active_users": 10, "peak_share": 1.5}, id="share-over-1"),
    pytest.param({"daily_active_users": -1}, id="negative-users"),
    pytest.param({"peak_concurrency": 5, "prompt_tokens": 9000}, id="prompt-over-context"),
    pytest.param({"peak_concurrency": 5, "headroom": -0.1}, id="negative-headroom"),
])
def test_bad_workloads_say_what_to_fix(kwargs: dict[str, object]) -> None:
    with pytest.raises(InputError):
        Workload(**kwargs)  # type: ignore[arg-type]


def test_the_mean_prompt_and_the_tokens_held_by_hand() -> None:
    """One definition for the Workload, the planner's slots and the event model's
    (`service_from_scenario`): 1,000 first prompt, 256 out, 3 turns of 100 new tokens:
    1,000 + 2 x (256 + 100) / 2 = 1,356, holding 1,356 + 256 = 1,612 of an 8K context; a
    4,000.4 mean prompt rounds to 4,000 and holds 4,256, at most the context."""
    from capacity.model.workload import held_tokens, mean_prompt_tokens

    assert mean_prompt_tokens(1000, 256, 3, 100) == 1356.0
    assert mean_prompt_tokens(1000, 256) == 1000.0
    assert held_tokens(1356.0, 256, 8192) == 1612
    assert held_tokens(4000.4, 256, 8192) == 4256
    assert held_tokens(8000.0, 256, 8192) == 8192
    wl = Workload(peak_concurrency=1.0, context_tokens=8192, prompt_tokens=1000,
                  output_tokens=256, turns=3, turn_tokens=100)
    assert (wl.mean_prompt_tokens, wl.held_tokens) == (1356.0, 1612)
