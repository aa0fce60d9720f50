"""F4d's padding at its edges, values worked by hand (issue 28's mutation testing:
`python3 dev.py mutate capacity/model/padding.py`; docs/testing.md lists what survives and why).

vLLM V1 captures 1, 2, 4, then 8, 16, ..., 256 (steps of 8), then 272, 288, ... (steps of 16)
up to the largest size not above max_tokens; a batch is padded to the smallest captured size
at least as large, or runs unpadded above the largest.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from capacity.model.padding import (
    check_padding,
    cuda_graph_largest,
    cuda_graph_tokens,
    gemm_tokens,
    tile_tokens,
)


@pytest.mark.parametrize(("max_tokens", "largest"), [
    (0.5, 0.0),    # below the smallest captured size: no graph at all
    (1, 1.0), (2, 2.0), (3, 2.0), (4, 4.0),  # the small sizes, each one a size itself
    (7, 4.0), (8, 8.0), (15, 8.0),           # steps of 8 start at 8
    (255, 248.0), (256, 256.0), (271, 256.0), (272, 272.0), (520, 512.0)])
def test_the_largest_captured_size(max_tokens: float, largest: float) -> None:
    assert cuda_graph_largest(max_tokens) == largest


@pytest.mark.parametrize(("tokens", "padded"), [
    (1, 1.0), (3, 4.0), (4, 4.0),   # 4 is captured: not rounded to the next step of 8
    (5, 8.0), (8, 8.0), (9, 16.0), (50, 56.0), (256, 256.0), (257, 272.0), (500, 512.0),
    (513, 513.0),                   # above the largest (512): eager, unpadded
])
def test_a_batch_replays_the_next_captured_graph(tokens: float, padded: float) -> None:
    assert float(cuda_graph_tokens(tokens, 512)[()]) == padded


def test_without_graphs_or_tiles_the_rows_stay_float_and_unchanged() -> None:
    """Integer batch sizes come back as float64 rows, unchanged, with every knob off."""
    for out in (cuda_graph_tokens(np.array([3, 50]), 0), tile_tokens(np.array([3, 50]), 0),
                gemm_tokens(np.array([3, 50]))):
        assert out.dtype == np.float64
        assert out.tolist() == [3.0, 50.0]


@pytest.mark.parametrize(("tokens", "tile", "rows"), [
    (3, 2, 4.0), (4, 2, 4.0), (50, 64, 64.0), (65, 64, 128.0), (50, 1, 50.0)])
def test_a_gemm_computes_whole_tiles(tokens: float, tile: float, rows: float) -> None:
    assert float(tile_tokens(tokens, tile)[()]) == rows


def test_graphs_then_tiles() -> None:
    # 50 -> the 56-token graph -> one 64-row tile; 3 -> the 4-token graph -> 16 rows
    assert gemm_tokens(np.array([50.0, 3.0]), cuda_graph_max_tokens=512,
                       gemm_tile_tokens=16).tolist() == [64.0, 16.0]


def test_a_bad_knob_is_named() -> None:
    assert check_padding(0, 0) is None
    assert check_padding(-1, 0) == "the largest CUDA graph must be >= 0 tokens (0: none), got -1"
    assert check_padding(0, math.inf) == "the GEMM tile must be >= 0 tokens (0: none), got inf"
