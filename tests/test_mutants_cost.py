"""F7 (capacity/model/cost.py): the cases mutation testing found unchecked.

`python3 dev.py mutate capacity/model/cost.py` (docs/testing.md) left alive: the direction of
the USD -> CNY conversion, exchange rates below 1, a free GPU (price 0), the constants 3,600 s
and 1e6 tokens within the loose tolerance of the seed test, and the error messages. Expected
values are computed by hand.
"""

from __future__ import annotations

import math

import pytest

from capacity.errors import InputError
from capacity.model.cost import convert, cost_per_mtok


def test_cost_per_mtok_by_hand() -> None:
    # CNY 2/hour, 1 GPU: 2 / (1,000 tok/s x 3,600 s) x 1e6 = 2e6 / 3.6e6 = 5/9 CNY per M tokens
    got = cost_per_mtok(2.0, 1, [1000, 3000, 5000])
    assert got.tolist() == pytest.approx([5 / 9, 5 / 27, 1 / 9], rel=1e-12)
    # 8 GPUs at 2.5/hour, 20,000 tok/s: 20 / 72e6 x 1e6 = 5/18
    assert float(cost_per_mtok(2.5, 8, 20000)) == pytest.approx(5 / 18, rel=1e-12)


def test_free_gpu_costs_nothing_and_no_rate_costs_infinitely() -> None:
    assert float(cost_per_mtok(0.0, 4, 1000)) == 0.0
    assert math.isinf(float(cost_per_mtok(1.0, 1, 0)))


def test_negative_price_is_named() -> None:
    with pytest.raises(InputError, match=r"^price per hour must be >= 0, got -1.0$"):
        cost_per_mtok(-1.0, 1, 1000)


def test_convert_both_directions_by_hand() -> None:
    assert convert(71.0, "USD", "CNY", 7.1) == pytest.approx(504.1, rel=1e-12)  # 71 x 7.1
    assert convert(71.0, "CNY", "USD", 7.1) == pytest.approx(10.0, rel=1e-12)   # 71 / 7.1
    assert convert(3.0, "USD", "USD", 7.1) == 3.0
    # a rate below 1 is still a rate: 1 USD = 0.5 CNY
    assert convert(10.0, "USD", "CNY", 0.5) == pytest.approx(5.0, rel=1e-12)
    assert convert(10.0, "CNY", "USD", 0.5) == pytest.approx(20.0, rel=1e-12)


def test_convert_refusals_are_named() -> None:
    with pytest.raises(InputError, match=r"^exchange rate must be > 0 CNY per USD, got 0.0$"):
        convert(1.0, "USD", "CNY", 0.0)
    with pytest.raises(InputError, match=r"^unknown currency 'EUR'; use CNY or USD$"):
        convert(1.0, "EUR", "CNY")
