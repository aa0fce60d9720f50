"""Formulas that no quick test pinned (issue 25): each against a hand computation, with the
numbers written out so a changed line fails here.

- F1/F2: a linear-attention layer's fixed state is split across the TP ranks (model/kv.py);
- F4b: sliding-window layers attend min(context, window) keys in the operator step's attention
  FLOPs (model/roofline.py);
- F10: the ring all-reduce's 2 (n - 1) / n factor and the two all-reduces per layer
  (model/parallel.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from capacity.catalog.loader import Catalog
from capacity.model.kv import kv_bytes_per_token, kv_request_bytes
from capacity.model.parallel import allreduce_ms, tp_comm_ms
from capacity.model.roofline import attention_flops_per_token


def test_a_linear_attention_state_is_split_across_the_tp_ranks(catalog: Catalog) -> None:
    """Qwen3.5-9B's 24 Gated DeltaNet layers, each holding 1 MB of state per request (the
    catalog says 0; set here): one rank of TP=2 holds 24 x 1e6 / 2 = 12 MB per request, TP=4
    6 MB, whatever the context; the 8 full-attention layers' KV (4 KV heads x 256 x 2 bytes x 2)
    is 4 KiB per token per layer, 32 KiB per token in all at TP=1 and 16 KiB at TP=2."""
    m = catalog.models["qwen3.5-9b"]
    m2 = dataclasses.replace(m, layer_groups=tuple(
        dataclasses.replace(g, state_bytes=1e6) if g.kind == "linear" else g
        for g in m.layer_groups))
    for tp, state, per_token in ((1, 24e6, 32768.0), (2, 12e6, 16384.0), (4, 6e6, 8192.0)):
        kv = kv_bytes_per_token(m2, "fp16", tp)
        assert kv.state_bytes_per_request == state
        assert kv.bytes_per_token == per_token
        req = kv_request_bytes(m2, np.array([1000.0, 4000.0]), "fp16", tp, block_size=1)
        np.testing.assert_array_equal(req.exact_bytes, [per_token * 1000 + state,
                                                        per_token * 4000 + state])


def test_sliding_layers_attend_at_most_their_window_in_the_decode_step(
        catalog: Catalog) -> None:
    """Gemma-3-27B: 10 full layers and 52 sliding layers (window 1,024), 32 query heads of 128.
    One decode token's attention is 4 x q_heads x head_dim FLOPs per attended key per layer:
    at 8,192 tokens of context 4 x 32 x 128 x (10 x 8,192 + 52 x 1,024) = 2.2146e9 FLOP; at 512
    tokens (inside the window) every layer attends all 512: 4 x 32 x 128 x 62 x 512."""
    m = catalog.models["gemma-3-27b"]
    a = attention_flops_per_token(m, np.array([8192.0, 512.0]))
    assert float(a[0]) == 4 * 32 * 128 * (10 * 8192 + 52 * 1024) == pytest.approx(2.2146e9,
                                                                                  rel=1e-4)
    assert float(a[1]) == 4 * 32 * 128 * 62 * 512
    # a linear-attention layer attends nothing: Qwen3.5-9B counts its 8 full layers only
    q = catalog.models["qwen3.5-9b"]
    assert float(attention_flops_per_token(q, 8192.0)) == 4 * 16 * 256 * 8 * 8192


def test_the_tp_all_reduce_by_hand(catalog: Catalog) -> None:
    """Llama-3.1-70B (hidden 8,192, 80 layers) on H100 SXM (NVLink, 450 GB/s in the catalog;
    9.58 us per all-reduce and 50.7 GB/s up to 1 MiB, F10). One decode token at TP=4: each
    all-reduce moves 8,192 x 2 bytes = 16,384 B; the ring sends 2 (4 - 1) / 4 = 1.5 x that:
    0.00958 ms + 1.5 x 16,384 / 50.7e9 s = 0.00958 + 4.84734e-4 ms; two per layer, 80 layers:
    160 all-reduces = 1.61036 ms per step. At TP=8 the factor is 2 x 7 / 8 = 1.75; at TP=1
    there is none."""
    m = catalog.models["llama-3.1-70b"]
    g = catalog.gpus["h100-sxm"]
    assert (g.interconnect_kind, g.interconnect_gb_s) == ("nvlink", 450.0)
    one = 0.00958 + 1.5 * 16384 / 50.7e9 * 1e3
    assert float(allreduce_ms(16384.0, 4, g)) == pytest.approx(one, rel=1e-12)
    assert float(tp_comm_ms(m, g, 4, 1.0)) == pytest.approx(160 * one, rel=1e-12)
    assert 160 * one == pytest.approx(1.61036, rel=1e-5)
    eight = 0.00958 + 1.75 * 16384 / 50.7e9 * 1e3
    assert float(allreduce_ms(16384.0, 8, g)) == pytest.approx(eight, rel=1e-12)
    assert float(tp_comm_ms(m, g, 1, 1.0)) == 0.0
    # a prefill of 2,000 tokens all-reduces 2,000 x 16,384 B = 32,768,000 B per all-reduce:
    # its first MiB at 50.7 GB/s, the other 31,719,424 B at the link's 450 GB/s
    big = 0.00958 + 1.5 * (1_048_576 / 50.7e9 + 31_719_424 / 450e9) * 1e3
    assert float(tp_comm_ms(m, g, 4, 2000.0)) == pytest.approx(160 * big, rel=1e-12)
