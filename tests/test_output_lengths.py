"""Output lengths that stop at end-of-sequence (`capacity.model.output_lengths`): the
maximum-entropy lengths on 1..cap with a stated mean, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from capacity.errors import InputError
from capacity.model.output_lengths import geometric_mean_tokens, maxent_lengths, maxent_ratio


def test_the_mean_of_a_truncated_geometric_by_hand() -> None:
    # q 0.5 on 1..3: weights 1, 0.5, 0.25 -> (1 + 1 + 0.75) / 1.75 = 1.5714
    assert geometric_mean_tokens(0.5, 3) == pytest.approx(2.75 / 1.75)
    # q 2 on 1..3: weights 1, 2, 4 -> (1 + 4 + 12) / 7 = 2.4286 (lengths near the cap)
    assert geometric_mean_tokens(2.0, 3) == pytest.approx(17 / 7)
    # q 1: the uniform, (cap + 1) / 2
    assert geometric_mean_tokens(1.0, 2048) == pytest.approx(1024.5)
    # no overflow far from 1
    assert geometric_mean_tokens(1e-30, 2048) == pytest.approx(1.0)
    assert geometric_mean_tokens(1e30, 2048) == pytest.approx(2048.0)


def test_the_ratio_inverts_the_mean() -> None:
    assert maxent_ratio(2.75 / 1.75, 3) == pytest.approx(0.5, rel=1e-9)
    assert maxent_ratio(17 / 7, 3) == pytest.approx(2.0, rel=1e-9)
    assert maxent_ratio(1024.5, 2048) == pytest.approx(1.0, rel=1e-9)
    assert maxent_ratio(1.0, 5) == 0.0 and math.isinf(maxent_ratio(5.0, 5)) and maxent_ratio(1.0, 1) == 1.0
    for bad in ((0.5, 10), (11.0, 10), (3.0, 0)):
        with pytest.raises(InputError):
            maxent_ratio(*bad)


def test_a_runs_lengths_have_the_stated_mean_and_cap() -> None:
    # dstack's 1P3D run: 500 prompts, --random-output-len 2048, 340,981 tokens stated (682.0)
    x = maxent_lengths(682.0, 2048, 500)
    assert x.size == 500 and x.min() >= 1 and x.max() <= 2048
    assert float(np.mean(x)) == pytest.approx(682.0, abs=1.0)
    assert 0.9989 < maxent_ratio(682.0, 2048) < 0.9990  # most stop early, a few run long
    assert np.percentile(x, 90) > 2 * np.median(x)
    # seeded: the same lengths in another order with another seed
    assert (maxent_lengths(682.0, 2048, 500, seed=0) == x).all()
    assert sorted(maxent_lengths(682.0, 2048, 500, seed=1)) == sorted(x)
    assert (maxent_lengths(1.0, 8, 20) == 1).all() and (maxent_lengths(8.0, 8, 20) == 8).all()
    with pytest.raises(InputError):
        maxent_lengths(5.0, 8, 0)


def test_the_closed_form_is_the_sum_above_its_cap() -> None:
    """Above `SUM_UP_TO` tokens the mean is 1 / (1 - q) - N q^N / (1 - q^N) (mirrored for q >
    1): the same as summing the weights, at every ratio tried, and a prompt whose cap is a
    model's 262,144-token context solves in one bisection's time."""
    from capacity.model import output_lengths as ol

    for cap in (5000, 262_144):
        n = np.arange(1, cap + 1, dtype=np.float64)
        for q in (0.5, 0.99, 0.99708, 0.9999, 0.99999, 1.00001, 1.0001, 1.003, 2.0):
            w = ol._weights(q, cap)
            assert geometric_mean_tokens(q, cap) == pytest.approx(
                float(np.sum(n * w) / np.sum(w)), rel=1e-9)
    q = maxent_ratio(342.0, 262_144)
    assert q == pytest.approx(1 - 1 / 342.0, rel=1e-6)   # a geometric of mean 342, 1 / (1 - q)
    assert float(np.mean(maxent_lengths(342.0, 262_144, 1000))) == pytest.approx(342.0, abs=1.0)
