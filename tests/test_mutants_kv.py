"""F1-F2 (capacity/model/kv.py): the cases that mutation testing found unchecked.

`python3 dev.py mutate capacity/model/kv.py` (docs/testing.md) left these mutants alive: two
groups of the same kind overwriting each other instead of adding up, the result's own fields
(dtype, TP, context, block size) lost, float arrays turned into object arrays, the defaults of
`tp` and `block_size`, and the error messages. Every expected value is computed by hand below
from a made-up model with two full-attention groups, a sliding-window group and two
linear-attention groups.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from capacity.catalog.loader import Catalog, LayerGroup, Model
from capacity.errors import InputError
from capacity.model.kv import kv_bytes_per_token, kv_request_bytes, layer_bytes_per_token, tokens_held

FULL_A = LayerGroup(kind="full", count=3, kv_heads=8, head_dim=128)
"""2 x 8 x 128 x 2 B = 4,096 B per token per layer at fp16; x 3 layers = 12,288 B."""
FULL_B = LayerGroup(kind="full", count=1, kv_heads=4, head_dim=64)
"""2 x 4 x 64 x 2 B = 1,024 B per token at fp16."""
SLIDING = LayerGroup(kind="sliding", count=2, kv_heads=2, head_dim=128, window_tokens=100)
"""2 x 2 x 128 x 2 B = 1,024 B per token per layer; x 2 = 2,048 B, for at most 100 tokens."""
LIN_A = LayerGroup(kind="linear", count=2, state_bytes=1000.0)
LIN_B = LayerGroup(kind="linear", count=1, state_bytes=500.0)
"""States: 2 x 1,000 + 1 x 500 = 2,500 B per request at TP 1."""


@pytest.fixture()
def model(catalog: Catalog) -> Model:
    base = next(iter(catalog.models.values()))
    return dataclasses.replace(base, layer_groups=(FULL_A, SLIDING, LIN_A, FULL_B, LIN_B))


def test_groups_of_one_kind_add_up(model: Model) -> None:
    kv = kv_bytes_per_token(model, "FP16")
    assert kv.by_kind_bytes["full"] == 12288 + 1024
    assert kv.by_kind_bytes["sliding"] == 2048
    assert kv.by_kind_bytes["mla"] == 0 and kv.by_kind_bytes["linear"] == 0
    assert kv.bytes_per_token == 13312 + 2048
    assert kv.state_bytes_per_request == 2500
    # the result names what it was computed for, canonically
    assert kv.kv_dtype == "fp16" and kv.tp == 1


def test_tp_splits_heads_and_states(model: Model) -> None:
    kv = kv_bytes_per_token(model, "fp16", tp=2)
    # 8/2 = 4 heads: 2 x 4 x 128 x 2 B x 3 = 6,144; 4/2 = 2 heads: 2 x 2 x 64 x 2 B = 512
    assert kv.by_kind_bytes["full"] == 6144 + 512
    # 2/2 = 1 head: 2 x 1 x 128 x 2 B x 2 layers = 1,024
    assert kv.by_kind_bytes["sliding"] == 1024
    assert kv.state_bytes_per_request == 1250
    assert kv.tp == 2


def test_tp_below_one_is_named(model: Model) -> None:
    with pytest.raises(InputError, match=r"^tensor parallel size must be >= 1, got 0$"):
        kv_bytes_per_token(model, tp=0)


def test_request_bytes_exact_paged_and_by_kind(model: Model) -> None:
    r = kv_request_bytes(model, [50, 200])  # ints in, fp16, TP 1, 16-token pages
    # exact: full 13,312 x L + sliding 2,048 x min(L, 100) + 2,500
    #   L=50: 665,600 + 102,400 + 2,500;  L=200: 2,662,400 + 204,800 + 2,500
    assert r.exact_bytes.tolist() == [770500.0, 2869700.0]
    # paged: L=50 -> 64 tokens (4 pages) everywhere; L=200 -> 208 (13 pages) on the full
    # layers, the window 100 -> 112 (7 pages) on the sliding ones
    #   851,968 + 131,072 + 2,500;  2,768,896 + 229,376 + 2,500
    assert r.paged_bytes.tolist() == [985540.0, 3000772.0]
    assert r.by_kind_bytes["full"].tolist() == [665600.0, 2662400.0]
    assert r.by_kind_bytes["sliding"].tolist() == [102400.0, 204800.0]
    assert r.by_kind_bytes["linear"].tolist() == [2500.0, 2500.0]
    assert r.by_kind_bytes["mla"].tolist() == [0.0, 0.0]
    for arr in (r.context_tokens, r.exact_bytes, r.paged_bytes, *r.by_kind_bytes.values()):
        assert arr.dtype == np.float64 and arr.shape == (2,)
    assert r.context_tokens.tolist() == [50.0, 200.0]
    assert r.block_size == 16


def test_request_errors_are_named(model: Model) -> None:
    with pytest.raises(InputError, match=r"^context length must be > 0 tokens$"):
        kv_request_bytes(model, [0, 10])
    with pytest.raises(InputError, match=r"^block size must be >= 1 token, got 0$"):
        kv_request_bytes(model, 10, block_size=0)


def test_layer_defaults_to_one_rank() -> None:
    assert layer_bytes_per_token(FULL_A, "fp16") == 4096
    assert layer_bytes_per_token(FULL_A, "fp16", 4) == 1024  # 8/4 = 2 heads: 2 x 2 x 128 x 2 B


def test_tokens_held_rounds_only_when_paged() -> None:
    # a fractional context (an average) is not rounded by default
    assert tokens_held(FULL_A, 10.5).tolist() == 10.5
    # pages of one token still round a fraction up; of 16, 10.5 -> 16
    assert tokens_held(FULL_A, 10.5, 1).tolist() == 11.0
    assert tokens_held(FULL_A, 10.5, 16).tolist() == 16.0
    assert tokens_held(SLIDING, [10.5, 150.0]).tolist() == [10.5, 100.0]
