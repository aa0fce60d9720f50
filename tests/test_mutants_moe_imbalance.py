"""Expert load imbalance (capacity/model/moe_imbalance.py): the cases mutation testing found unchecked.

`python3 dev.py mutate capacity/model/moe_imbalance.py` (docs/testing.md) left these mutants
alive: the power law's input checks and its one-expert case, an integer exponent, the 1/k cap
with k = 1, Gini of shares that do not sum to 1, coverage exactly at a cumulative share,
EPLB's redundant copy going to the expert with the most load per copy (unsorted shares, two
copies), and the finite batch's skew at no load and under one pair per GPU. Every expected
value is computed by hand below.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from capacity.errors import InputError
from capacity.model.moe_imbalance import (
    coverage,
    gini,
    placement_imbalance,
    sampling_imbalance,
    zipf_shares,
)


@pytest.mark.parametrize(("experts", "exponent"), [(0, 1.0), (4, -0.5)])
def test_power_law_refuses_no_expert_or_a_negative_exponent(experts: int, exponent: float) -> None:
    with pytest.raises(InputError, match=r"^experts must be >= 1 and the exponent >= 0$"):
        zipf_shares(experts, exponent)


def test_one_expert_takes_everything() -> None:
    assert zipf_shares(1, 1.3).tolist() == [1.0]


def test_an_integer_exponent_is_the_docstring_example() -> None:
    # 1, 1/2, 1/3, 1/4 over 25/12: 12/25, 6/25, 4/25, 3/25
    assert zipf_shares(4, 1).tolist() == pytest.approx([0.48, 0.24, 0.16, 0.12])


def test_one_active_expert_caps_nothing() -> None:
    # exponent 3 over 2 experts: 1 and 1/8 over 9/8 -> 8/9 and 1/9; k = 1: cap 1, no capping
    assert zipf_shares(2, 3.0, active=1).tolist() == pytest.approx([8 / 9, 1 / 9])
    # k = 2: cap 1/2, both capped at 1/2
    assert zipf_shares(2, 3.0, active=2).tolist() == pytest.approx([0.5, 0.5])


def test_gini_of_unnormalised_shares() -> None:
    # x = 1, 3 (n 2, sum 4): ((2 - 3) x 1 + (4 - 3) x 3) / (2 x 4) = 2 / 8 = 0.25
    assert gini(np.array([3.0, 1.0])) == pytest.approx(0.25)
    # x = 2, 2, 8 (n 3, sum 12): (-2 x 2 + 0 x 2 + 2 x 8) / 36 = 12 / 36
    assert gini(np.array([8.0, 2.0, 2.0])) == pytest.approx(1 / 3)


def test_coverage_exactly_at_a_cumulative_share() -> None:
    # hottest first 0.5, 0.25, 0.25: cumulative 0.5, 0.75, 1.0
    shares = np.array([0.25, 0.5, 0.25])
    assert coverage(shares, 0.5) == pytest.approx(1 / 3)    # 1 expert of 3 carries 0.5
    assert coverage(shares, 0.75) == pytest.approx(2 / 3)
    assert coverage(shares, 0.6) == pytest.approx(2 / 3)
    assert coverage(shares, 1.0) == pytest.approx(1.0)
    # 0.4, 0.3, 0.2, 0.1: 0.4 -> 1 of 4; 0.7 -> 2 of 4; 0.9 -> 3 of 4
    assert coverage(np.array([0.1, 0.2, 0.3, 0.4]), 0.7) == pytest.approx(0.5)
    assert coverage(np.array([0.1, 0.2, 0.3, 0.4]), 0.9) == pytest.approx(0.75)


def test_the_redundant_copy_goes_to_the_most_loaded_expert_in_any_order() -> None:
    # 0.48 (listed second) gets the copy: 0.24, 0.24, 0.24, 0.16, 0.12 on 2 GPUs of 3 slots:
    # g0 0.24, g1 0.24, g0 0.48 (tie: the first), g1 0.40, g1 0.52 -> 0.52 / 0.50 = 1.04
    assert placement_imbalance(np.array([0.12, 0.48, 0.24, 0.16]), 2, 1) == pytest.approx(1.04)


def test_each_copy_goes_to_the_most_load_per_copy() -> None:
    # 0.4, 0.3, 0.2, 0.1 on 2 GPUs, one copy: 0.4 splits -> 0.3, 0.2, 0.2, 0.2, 0.1 (3 slots):
    # g0 0.3, g1 0.2, g1 0.4, g0 0.5, g1 0.5 -> 0.5 / 0.5 = 1.0
    shares = np.array([0.4, 0.3, 0.2, 0.1])
    assert placement_imbalance(shares, 2, 1) == pytest.approx(1.0)
    # two copies: then 0.3 (more per copy than 0.4's 0.2) splits -> 0.2, 0.2, 0.2, 0.15, 0.15,
    # 0.1: g0 0.2, g1 0.2, g0 0.4, g1 0.35, g1 0.5 (full), g0 0.5 -> 1.0
    assert placement_imbalance(shares, 2, 2) == pytest.approx(1.0)
    # no copy: 0.4, 0.3, 0.2, 0.1 (2 slots): g0 0.4, g1 0.3, g1 0.5, g0 0.5 -> 1.0;
    # 3 GPUs (2 slots): g0 0.4, g1 0.3, g2 0.2, g2 0.3 -> 0.4 / (1 / 3) = 1.2
    assert placement_imbalance(shares, 3, 0) == pytest.approx(1.2)


def test_sampling_skew_with_no_load_or_under_one_pair() -> None:
    assert sampling_imbalance(0.0, 4) == 1.0        # no load: no skew
    assert sampling_imbalance(5.0, 1) == 1.0        # one GPU: nothing to be busier than
    # mu 0.5 pairs on 4 GPUs: 1 + sqrt(2 ln 4 / 0.5) = 1 + sqrt(4 ln 4)
    assert sampling_imbalance(0.5, 4) == pytest.approx(1 + math.sqrt(4 * math.log(4)))
    assert sampling_imbalance(1.0, 4) == pytest.approx(1 + math.sqrt(2 * math.log(4)))
