"""F3 and F8 (capacity/model/memory.py): the cases that mutation testing found unchecked.

`python3 dev.py mutate capacity/model/memory.py` (docs/testing.md) left these mutants alive: the
NCCL term of the budget (its default, its sign, its unit), the result's own fields, the error
messages and the `> 0` / `>= 0` checks, the non-positive budget's edge (a budget of exactly 0 or
under one byte), the integer type of the concurrency, the verdict's
boundary (subtotal x (1 + headroom) exactly equal to the limit) and the headroom passed through
to it. Every expected value is computed by hand below (GB = 1e9 bytes).
"""

from __future__ import annotations

import numpy as np
import pytest

from capacity.errors import InputError
from capacity.model.memory import headroom_level, max_concurrency, memory_verdict, vram_budget


def test_budget_without_nccl_is_the_seed() -> None:
    # 24 GB x 0.9 = 21.6 GB usable; 21.6 - 5.7 - 1.5 = 14.4 GB; no NCCL term by default
    b = vram_budget(vram_gb=24, util=0.9, weights_gb=5.7, overhead_gb=1.5)
    assert b.kv_budget_bytes == pytest.approx(14.4e9)
    assert b.nccl_bytes == 0.0
    assert b.usable_bytes == pytest.approx(21.6e9)


def test_nccl_buffers_are_taken_from_the_budget_in_gb() -> None:
    # 80 GB x 0.5 = 40 GB usable; 40 - 10 - 2 - 3 (NCCL) = 25 GB
    b = vram_budget(vram_gb=80, util=0.5, weights_gb=10, overhead_gb=2, nccl_gb=3)
    assert b.kv_budget_bytes == pytest.approx(25e9)
    assert b.nccl_bytes == pytest.approx(3e9)
    assert b.vram_bytes == pytest.approx(80e9)
    assert b.util == 0.5
    assert b.weights_bytes == pytest.approx(10e9)
    assert b.overhead_bytes == pytest.approx(2e9)
    assert b.weights_fit
    assert b.shortfall_bytes == 0.0


def test_shortfall_counts_the_nccl_buffers() -> None:
    # 10 GB x 1.0 = 10 GB; 10 - 8 - 1 - 2 = -1 GB: 1 GB short
    b = vram_budget(vram_gb=10, util=1.0, weights_gb=8, overhead_gb=1, nccl_gb=2)
    assert not b.weights_fit
    assert b.shortfall_bytes == pytest.approx(1e9)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"vram_gb": 0.0}, "VRAM must be > 0 GB, got 0.0"),
    ({"vram_gb": -1.0}, "VRAM must be > 0 GB, got -1.0"),
    ({"weights_gb": 0.0}, "weights must be > 0 GB, got 0.0"),
    ({"overhead_gb": -0.5}, "overhead must be >= 0 GB, got -0.5"),
    ({"nccl_gb": -0.25}, "NCCL memory must be >= 0 GB, got -0.25"),
    ({"util": 0.0}, r"util must be in \(0, 1\]"),
    ({"util": 1.5}, r"util must be in \(0, 1\]"),
])
def test_budget_refusals_name_the_input(kwargs: dict[str, float], message: str) -> None:
    args = {"vram_gb": 24.0, "util": 0.9, "weights_gb": 5.7, "overhead_gb": 1.5} | kwargs
    with pytest.raises(InputError, match=message):
        vram_budget(**args)


def test_zero_overhead_and_nccl_are_allowed() -> None:
    # 16 x 1.0 - 4 - 0 - 0 = 12 GB
    b = vram_budget(vram_gb=16, util=1.0, weights_gb=4, overhead_gb=0.0, nccl_gb=0.0)
    assert b.kv_budget_bytes == pytest.approx(12e9)


def test_a_budget_of_exactly_zero_holds_nothing_even_for_a_zero_byte_request() -> None:
    # budget 0 -> 0 requests, whatever the request size (no 0 / 0)
    c = max_concurrency(0.0, [0.0, 1.0, 1e6])
    assert c.tolist() == [0, 0, 0]
    assert c.dtype == np.int64


def test_a_negative_budget_gives_integer_zeros_of_the_request_shape() -> None:
    c = max_concurrency(-5e9, [[1e6, 2e6], [3e6, 4e6]])
    assert c.shape == (2, 2)
    assert c.dtype == np.int64
    assert c.tolist() == [[0, 0], [0, 0]]


def test_a_budget_under_one_byte_still_counts() -> None:
    # floor(0.5 / 0.25) = 2, floor(0.5 / 0.2) = floor(2.5) = 2, floor(0.5 / 0.6) = 0
    c = max_concurrency(0.5, [0.25, 0.2, 0.6])
    assert c.tolist() == [2, 2, 0]
    assert c.dtype == np.int64


def test_headroom_boundary_is_inclusive() -> None:
    # headroom 0.25 (exact in binary): 4 x 1.25 = 5.0 <= 5 -> 0 (fits); 4 <= 4.5 but 5.0 > 4.5 ->
    # 1 (tight); 4 > 3.9 -> 2 (over); 4 x 1.25 = 5 <= 5.0000001 -> 0
    levels = headroom_level([4.0, 4.0, 4.0, 4.0], [5.0, 4.5, 3.9, 5.0000001], 0.25)
    assert levels.tolist() == [0, 1, 2, 0]
    assert levels.dtype == np.int64


def test_value_equal_to_its_limit_is_tight() -> None:
    # headroom 0.25: 5 x 1.25 = 6.25 > 5, but 5 <= 5 -> 1 (tight), not over
    assert headroom_level(5.0, 5.0, 0.25).tolist() == 1
    assert memory_verdict(5.0, 5.0, 0.25).tolist() == "tight"


def test_headroom_zero_value_equal_to_limit_fits() -> None:
    # headroom 0: 7 x 1 = 7 <= 7 -> 0
    assert headroom_level(7, 7, 0.0).tolist() == 0


def test_negative_headroom_is_refused_with_its_value() -> None:
    with pytest.raises(InputError, match=r"headroom must be >= 0, got -0\.1"):
        headroom_level(1.0, 2.0, -0.1)


def test_verdict_uses_the_headroom_given() -> None:
    # headroom 0.5: 12 x 1.5 = 18 > 16 -> tight (the default 0.2 would give 14.4 <= 16: fits);
    # 10 x 1.5 = 15 <= 16 -> fits; 17 > 16 -> does_not_fit
    v = memory_verdict([12.0, 10.0, 17.0], 16.0, 0.5)
    assert v.tolist() == ["tight", "fits", "does_not_fit"]


def test_verdict_boundary_and_holds_a_request() -> None:
    # headroom 0.25: 8 x 1.25 = 10 <= 10 -> fits, but not where no request fits
    v = memory_verdict([8.0, 8.0], [10.0, 10.0], 0.25, holds_a_request=[True, False])
    assert v.tolist() == ["fits", "does_not_fit"]


def test_a_request_holding_no_kv_is_no_memory_limit() -> None:
    # floor(1e9 / 0) is no limit: the int64 maximum, not an overflowed cast (which gave
    # -2^63 with a RuntimeWarning); floor(1e9 / 1e8) = 10, floor(1e9 / 3e8) = 3
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = max_concurrency(1e9, [0.0, 1e8, 3e8])
    assert got.dtype == np.int64
    assert got.tolist() == [np.iinfo(np.int64).max, 10, 3]
