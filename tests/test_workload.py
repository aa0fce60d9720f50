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
