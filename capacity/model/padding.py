"""F4d: the tokens a decode step's weight GEMMs really compute, padded as engines pad them.

A decode step multiplies every weight matrix by m = b x (k + 1) token rows (b sequences, k
draft tokens each; k = 0 without a draft). Engines compute more rows than that:

- **CUDA-graph padding.** An engine that replays captured CUDA graphs runs a batch at the
  smallest captured size at least as large (the extra rows are dummies). vLLM V1's default
  capture sizes are 1, 2, 4, then multiples of 8 up to 256, then multiples of 16 up to the
  largest captured size, min(2 x max_num_seqs, 512) by default; a larger batch runs eagerly,
  unpadded (vllm/config/vllm.py `set_cudagraph_sizes`: `[1, 2, 4] + list(range(8, 256, 8)) +
  list(range(256, max_graph_size + 1, 16))`; vllm/config/compilation.py
  `bs_to_padded_graph_size`; read 2026-12). `cuda_graph_tokens`.
- **Tile quantisation.** A GEMM kernel computes its output in tiles of a fixed number of rows
  (16 to 128 on NVIDIA tensor cores, chosen by the library per shape), so the rows it works on
  are m rounded up to whole tiles. `tile_tokens`, with the tile a knob (`gemm_tile_tokens`; 0
  or 1: none). Wave quantisation (whole waves of tiles over the SMs) depends on each matrix's
  width and the SM count and is not modelled apart: an effective tile stands for both.

The padding changes only the GEMMs' arithmetic (2 x P x m_padded FLOPs) and activations: the
weights are read once whatever m is, and padded rows read no KV cache and attend nothing.
Every knob at its default (no graphs, no tile) leaves m as it is, so the spec-sheet basis is
unchanged. Source: docs/method.md, F4d.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from capacity.types import FloatArray

GRAPH_SMALL_SIZES = (1.0, 2.0, 4.0)
"""vLLM's smallest captured sizes, tokens."""
GRAPH_STEP_BELOW = 8.0
"""Captured sizes step by 8 tokens from 8 up to `GRAPH_STEP_SWITCH`..."""
GRAPH_STEP_SWITCH = 256.0
GRAPH_STEP_ABOVE = 16.0
"""...and by 16 tokens from `GRAPH_STEP_SWITCH` up to the largest captured size."""
VLLM_GRAPH_MAX_TOKENS = 512.0
"""vLLM V1's default largest captured size at its default max_num_seqs of 256:
min(2 x 256, 512) = 512 tokens."""


def _round_up(x: FloatArray, step: float) -> FloatArray:
    return np.asarray(np.ceil(x / step) * step, dtype=np.float64)


def cuda_graph_tokens(tokens: npt.ArrayLike, max_tokens: float) -> FloatArray:
    """Tokens of the CUDA graph a forward pass of `tokens` rows replays (tokens).

    The smallest of vLLM's capture sizes (1, 2, 4, 8, 16, ..., 256, 272, ..., `max_tokens`)
    at least `tokens`; `tokens` itself above the largest captured size (an eager pass), at 0,
    or where `max_tokens` <= 0 (no graphs). Examples: 3 -> 4, 50 -> 56, 250 -> 256, 300 ->
    304; 600 -> 600 at the default 512 (eager). Source: vLLM `set_cudagraph_sizes`
    (module docstring).
    """
    m = np.asarray(tokens, dtype=np.float64)
    if max_tokens <= 0:
        return m
    small = np.select([m <= s for s in GRAPH_SMALL_SIZES], list(GRAPH_SMALL_SIZES),
                      default=0.0)
    stepped = np.where(m <= GRAPH_STEP_SWITCH, _round_up(m, GRAPH_STEP_BELOW),
                       _round_up(m, GRAPH_STEP_ABOVE))
    size = np.where(m <= GRAPH_SMALL_SIZES[-1], small, stepped)
    # the largest captured size is the last size of the grid not above max_tokens
    largest = float(cuda_graph_largest(max_tokens))
    return np.asarray(np.where((m > 0) & (size <= largest), size, m), dtype=np.float64)


def cuda_graph_largest(max_tokens: float) -> float:
    """The largest captured size not above `max_tokens` (tokens): vLLM captures
    range(256, max + 1, 16) above 256, so 520 -> 512, 300 -> 288, 100 -> 96, 3 -> 2."""
    if max_tokens >= GRAPH_STEP_SWITCH:
        return GRAPH_STEP_SWITCH + float(np.floor((max_tokens - GRAPH_STEP_SWITCH)
                                                  / GRAPH_STEP_ABOVE)) * GRAPH_STEP_ABOVE
    if max_tokens >= GRAPH_STEP_BELOW:
        return float(np.floor(max_tokens / GRAPH_STEP_BELOW)) * GRAPH_STEP_BELOW
    fits = [s for s in GRAPH_SMALL_SIZES if s <= max_tokens]
    return fits[-1] if fits else 0.0


def tile_tokens(tokens: npt.ArrayLike, tile: float) -> FloatArray:
    """Rows a GEMM kernel computes for `tokens` rows on tiles of `tile` rows (tokens):
    ceil(tokens / tile) x tile; `tokens` as is where `tile` <= 1. Example: 50 on a 64-row tile
    -> 64; 65 -> 128."""
    m = np.asarray(tokens, dtype=np.float64)
    if tile <= 1:
        return m
    return _round_up(m, tile)


def gemm_tokens(tokens: npt.ArrayLike, *, cuda_graph_max_tokens: float = 0.0,
                gemm_tile_tokens: float = 0.0) -> FloatArray:
    """The token rows a decode step's weight GEMMs compute (tokens, F4d): `tokens` padded to
    the captured CUDA graph (`cuda_graph_tokens`), then rounded up to whole tiles
    (`tile_tokens`). Example: 50 with vLLM's graphs -> 56, on 64-row tiles -> 64. Both knobs
    at 0: `tokens` unchanged."""
    return tile_tokens(cuda_graph_tokens(tokens, cuda_graph_max_tokens), gemm_tile_tokens)


def check_padding(cuda_graph_max_tokens: float, gemm_tile_tokens: float) -> str | None:
    """What is wrong with the padding knobs, or None: each must be finite and >= 0."""
    for name, v in (("the largest CUDA graph", cuda_graph_max_tokens),
                    ("the GEMM tile", gemm_tile_tokens)):
        if not (np.isfinite(v) and v >= 0):
            return f"{name} must be >= 0 tokens (0: none), got {v}"
    return None
