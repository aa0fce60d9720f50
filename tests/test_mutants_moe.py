"""F4 (capacity/model/moe.py): the cases that mutation testing found unchecked.

`python3 dev.py mutate capacity/model/moe.py` (docs/testing.md) left these mutants alive: the
dense model's path (f = 0: all of W, whatever the expert count; the result's shape and float
type for an integer batch) and `weight_bytes_read` on a dense model. Every expected value is
computed by hand below.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from capacity.catalog.loader import Catalog, Model, Moe
from capacity.model.moe import expected_experts_touched, expert_fraction, weight_bytes_read, weight_read_share


@pytest.fixture()
def dense(catalog: Catalog) -> Model:
    base = catalog.models["qwen3-30b-a3b"]
    return dataclasses.replace(base, moe=None)


def test_dense_share_is_float_ones_of_the_batch_shape() -> None:
    # f = 0: every step reads all of W, for an integer batch too
    share = weight_read_share(0.0, 0, 0, [1, 2, 64])
    assert share.tolist() == [1.0, 1.0, 1.0]
    assert share.dtype == np.float64
    assert share.shape == (3,)


def test_dense_share_ignores_the_expert_counts() -> None:
    # f = 0 with E = 1, k = 1 or E = 128, k = 8: still 1 (no expert part)
    assert weight_read_share(0.0, 1, 1, [[3, 4]]).tolist() == [[1.0, 1.0]]
    assert weight_read_share(0.0, 128, 8, 7).tolist() == 1.0


def test_dense_model_reads_all_its_weights(dense: Model) -> None:
    assert expert_fraction(dense) == 0.0
    # W = 16e9 bytes, any batch: 16e9 each
    read = weight_bytes_read(dense, 16e9, [1, 8, 256])
    assert read.tolist() == [16e9, 16e9, 16e9]
    assert read.dtype == np.float64


def test_moe_share_by_hand() -> None:
    # f = 0.5, E = 4, k = 2: touched(C) = 1 - (1/2)^C; C = 1 -> 0.5, C = 2 -> 0.75, C = 0 is
    # read as 1 -> 0.5; share = 0.5 + 0.5 x touched -> 0.75, 0.875, 0.75
    share = weight_read_share(0.5, 4, 2, [1, 2, 0])
    assert share.tolist() == pytest.approx([0.75, 0.875, 0.75])


def test_moe_bytes_by_hand(catalog: Catalog) -> None:
    # a made-up MoE: P = 10 B, A = 7.5 B, E = 4, k = 2 -> X = (10 - 7.5) / (1 - 2/4) = 5 B,
    # f = 5 / 10 = 0.5
    model = dataclasses.replace(catalog.models["qwen3-30b-a3b"], params_total_b=10.0,
                                params_active_b=7.5, moe=Moe(experts=4, active=2))
    assert expert_fraction(model) == pytest.approx(0.5)
    # W = 100 bytes: C = 1 -> 100 x (0.5 + 0.5 x 0.5) = 75; C = 3 -> touched 1 - 1/8 = 0.875,
    # 100 x (0.5 + 0.4375) = 93.75
    assert weight_bytes_read(model, 100.0, [1, 3]).tolist() == pytest.approx([75.0, 93.75])


def test_touched_experts_by_hand() -> None:
    # E = 4, k = 1: 4 x (1 - (3/4)^C); C = 0 -> 0, C = 2 -> 4 x (1 - 9/16) = 1.75
    touched = expected_experts_touched(4, 1, [0, 2])
    assert touched.tolist() == pytest.approx([0.0, 1.75])
    assert touched.dtype == np.float64
