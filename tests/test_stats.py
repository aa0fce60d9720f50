"""capacity.stats: the normal and gamma quantiles the planner uses instead of scipy's (start-up
time), checked by hand on closed forms and against scipy.special over every branch."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import gammainc, gammaincinv

from capacity.stats import WH_SHAPE, gamma_p, gamma_quantile, normal_quantile


def test_normal_quantile_by_hand() -> None:
    # tables: z_0.9 = 1.2816, z_0.975 = 1.9600, z_0.5 = 0
    assert normal_quantile(0.9) == pytest.approx(1.2815515655, abs=1e-9)
    assert normal_quantile(0.975) == pytest.approx(1.9599639845, abs=1e-9)
    assert normal_quantile(0.5) == 0.0


def test_exponential_is_gamma_of_shape_one() -> None:
    # mean 2 ms, variance 4 ms^2: k = 1, scale 2; the q-quantile is -2 ln(1 - q)
    for q in (0.5, 0.9, 0.99):
        assert float(gamma_quantile(2.0, 4.0, q)) == pytest.approx(-2.0 * math.log(1.0 - q), rel=1e-10)


def test_erlang_two_by_hand() -> None:
    # k = 2, scale 1: P(2, x) = 1 - e^-x (1 + x); at x = 3.8897... P = 0.9
    x = float(gamma_quantile(2.0, 2.0, 0.9))
    assert 1.0 - math.exp(-x) * (1.0 + x) == pytest.approx(0.9, abs=1e-12)
    assert x == pytest.approx(3.88972, abs=1e-5)


def test_no_variance_gives_the_mean() -> None:
    out = gamma_quantile([5.0, 0.0, 3.0], [0.0, 1.0, 0.0], 0.9)
    assert out.tolist() == [5.0, 0.0, 3.0]


@pytest.mark.parametrize("q", [0.5, 0.9, 0.95, 0.99, 0.999])
def test_gamma_quantile_matches_scipy_on_every_branch(q: float) -> None:
    # shapes from 1e-3 (the small-shape start) through the Halley branch to Wilson-Hilferty
    k = np.geomspace(1e-3, 1e6, 300)
    ours = gamma_quantile(k * 3.0, k * 9.0, q)  # scale 3
    theirs = gammaincinv(k, q) * 3.0
    rel = np.abs(ours - theirs) / theirs
    refined = k < WH_SHAPE
    assert rel[refined].max() < 1e-9
    assert rel[~refined].max() < 6e-6  # the Wilson-Hilferty branch's bound (docstring)


def test_gamma_p_matches_scipy() -> None:
    a, x = np.meshgrid(np.geomspace(1e-3, 1e3, 60), np.geomspace(1e-4, 3e3, 60))
    assert np.abs(gamma_p(a, x) - gammainc(a, x)).max() < 1e-10  # exponent near x = 3000: 1.6e-11
    assert gamma_p(2.0, 0.0).item() == 0.0


def test_the_planner_does_not_import_scipy() -> None:
    import subprocess
    import sys

    code = ("import sys, capacity.cli.size, capacity.cli.plan, capacity.plan.search; "
            "print(any(m == 'scipy' or m.startswith('scipy.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
