"""Hand-computed checks of three formulas on small made-up models and links (issue 25): every
expected number is worked out here, from the formula as docs/method.md and the module state it,
so changing the line that computes it fails a quick test.

- F1/F2 (model/kv.py): a linear-attention layer (Gated DeltaNet, Mamba) holds a fixed state
  per request, split across the tensor-parallel ranks by its heads, while the KV heads of the
  attention layers stop splitting at one head per rank;
- F4b (model/roofline.py): in the operator step's attention FLOPs a sliding-window layer
  attends min(context, window) keys, not the whole context;
- F10 (model/parallel.py): one ring all-reduce costs latency + 2 (n - 1) / n x bytes / link
  bandwidth, and a forward pass makes two per layer.

tests/test_formulas_by_hand.py checks the same lines on catalog models; these use made-up
shapes with round numbers, and follow each one into what consumes it (a request's KV at TP,
the operator step's attention term, a decode step's communication).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

from capacity.catalog.loader import Gpu, LayerGroup, Model
from capacity.model.kv import kv_bytes_per_token, kv_request_bytes
from capacity.model.parallel import allreduce_ms, tp_comm_ms
from capacity.model.roofline import StepModel, attention_flops_per_token


def _model(*groups: LayerGroup, hidden: int = 4096, params_b: float = 0.01) -> Model:
    """A made-up dense model with these layer groups (the other fields do not enter here)."""
    return Model(key="made-up", name="Made-up", hf_repo="none/made-up", params_total_b=params_b,
                 params_active_b=params_b, hidden=hidden, vocab=1000, max_context_tokens=32768,
                 layer_groups=groups, moe=None, default_format="bf16", stated_variants=(),
                 source="tests/test_formula_hand.py", as_of="2026-12-01")


def _gpu(kind: Literal["pcie", "nvlink", "infinity-fabric"], link_gb_s: float) -> Gpu:
    """A made-up GPU: only its link (kind and GB/s) enters the all-reduce."""
    return Gpu(key="made-up-gpu", name="Made-up GPU", memory_gb=80.0, memory_type="HBM3",
               bandwidth_gb_s=1000.0, bf16_tflops=100.0, fp8_tflops=None, int8_tops=None,
               interconnect=f"{kind} (made up)", interconnect_kind=kind,
               interconnect_gb_s=link_gb_s, price_per_hour=1.0, currency="USD",
               price_source="none", price_as_of="2026-12-01", source="none",
               as_of="2026-12-01")


# --- F1/F2: a linear-attention state per request, split across the TP ranks ------------------

# 3 Gated DeltaNet layers: each keeps a state of 8 heads x 128 (key dim) x 128 (value dim) in
# fp32 per request, 8 x 128 x 128 x 4 B = 524,288 B per layer, whatever the context. One
# full-attention layer: 2 KV heads of 64 (8 query heads), fp16.
HYBRID = _model(
    LayerGroup(kind="linear", count=3, state_bytes=8 * 128 * 128 * 4),
    LayerGroup(kind="full", count=1, kv_heads=2, head_dim=64, q_heads=8))


@pytest.mark.parametrize(("tp", "state", "kv_per_token"), [
    # F2: state_per_rank = layers x state_bytes / TP: 3 x 524,288 / TP
    #     (1,572,864 B at TP=1, 786,432 at 2, 393,216 at 4, 196,608 at 8)
    # F1: K and V x heads on the rank x head_dim x 2 B; heads on a rank = max(2 / TP, 1)
    #     (TP=1: 2 x 2 x 64 x 2 = 512 B; TP=2: 2 x 1 x 64 x 2 = 256 B; TP=4 and 8: the one head
    #     is replicated, still 256 B)
    (1, 1_572_864.0, 512.0),
    (2, 786_432.0, 256.0),
    (4, 393_216.0, 256.0),
    (8, 196_608.0, 256.0),
])
def test_linear_state_splits_across_tp_ranks_by_hand(tp: int, state: float,
                                                     kv_per_token: float) -> None:
    per_token = kv_bytes_per_token(HYBRID, "fp16", tp)
    assert per_token.state_bytes_per_request == state
    assert per_token.by_kind_bytes["linear"] == 0.0  # the state does not grow per token
    assert per_token.bytes_per_token == kv_per_token
    # a request of 1,000 tokens: exact = state + 1,000 x per-token KV; paged in blocks of 16:
    # 1,000 tokens fill 63 blocks = 1,008 token slots (the state is not paged)
    req = kv_request_bytes(HYBRID, 1000.0, "fp16", tp, block_size=16)
    assert float(req.by_kind_bytes["linear"]) == state
    assert float(req.by_kind_bytes["full"]) == 1000 * kv_per_token
    assert float(req.exact_bytes) == state + 1000 * kv_per_token
    assert float(req.paged_bytes) == state + 1008 * kv_per_token


def test_linear_state_at_tp2_written_out() -> None:
    """The same at TP=2, every number written out: 3 x 524,288 / 2 = 786,432 B of state and
    1,000 x 256 = 256,000 B of KV, 1,042,432 B per request on each of the two ranks; at
    4,000 tokens the state is the same and the KV four times larger: 1,810,432 B."""
    req = kv_request_bytes(HYBRID, np.array([1000.0, 4000.0]), "fp16", 2, block_size=1)
    np.testing.assert_array_equal(req.exact_bytes, [1_042_432.0, 1_810_432.0])
    np.testing.assert_array_equal(req.by_kind_bytes["linear"], [786_432.0, 786_432.0])


# --- F4b: sliding-window layers in the operator step's attention FLOPs ------------------------

# 2 full layers and 6 sliding layers with a window of 128 tokens; every layer has 4 query
# heads of 32 (2 KV heads). One decode token's attention is 4 x q_heads x head_dim FLOPs per
# attended key per layer (QK^T and PV, 2 FLOPs per multiply-add; roofline.py, F4b):
# 4 x 4 x 32 = 512 FLOP per key per layer.
WINDOWED = _model(
    LayerGroup(kind="full", count=2, kv_heads=2, head_dim=32, q_heads=4),
    LayerGroup(kind="sliding", count=6, kv_heads=2, head_dim=32, q_heads=4,
               window_tokens=128))


def test_sliding_layers_count_their_window_by_hand() -> None:
    # context 1,000 > window 128: full layers attend 1,000 keys, sliding layers 128:
    # 512 x (2 x 1,000 + 6 x 128) = 512 x 2,768 = 1,417,216 FLOP
    # (counting the context on the sliding layers too would give 512 x 8,000 = 4,096,000)
    # context 100 < window: every layer attends all 100 keys: 512 x 8 x 100 = 409,600 FLOP
    a = attention_flops_per_token(WINDOWED, np.array([1000.0, 100.0, 128.0]))
    np.testing.assert_array_equal(a, [1_417_216.0, 409_600.0, 512.0 * 8 * 128])


def test_operator_step_attention_uses_the_window_by_hand() -> None:
    """The operator step of 10 sequences at a context of 1,000 tokens, on a made-up replica
    where attention is compute-bound: F = 1 TFLOP/s, BW = 1,000 GB/s, W = 1 GB of weights,
    P = 0.01 B parameters, 1 B of KV per sequence, no overheads, no TP.
    - weight GEMMs: max(W / BW, 2 P b / F) = max(1e9 / 1e12 s, 2 x 1e7 x 10 / 1e12 s)
      = max(1 ms, 0.2 ms) = 1 ms;
    - attention: max(b KV / BW, b A / F) = max(10 / 1e12 s, 10 x 1,417,216 / 1e12 s)
      = 0.01417216 ms (A from the test above: the 6 sliding layers attend 128 keys, not 1,000;
      with 1,000 it would be 0.04096 ms);
    - step = 1 + 0.01417216 = 1.01417216 ms."""
    step = StepModel.for_model(WINDOWED, weights_bytes=1e9, kv_request_bytes=1.0,
                               bandwidth_gb_s=1000.0, tflops=1.0, method="operator",
                               context_tokens=1000.0, lookup_weight_share=0.0)
    assert step.attention_flops_request == 1_417_216.0
    parts = step.parts(10.0)
    assert float(parts.gemm_ms) == pytest.approx(1.0, rel=1e-12)
    assert float(parts.attention_ms) == pytest.approx(0.01417216, rel=1e-12)
    assert float(parts.step_ms) == pytest.approx(1.01417216, rel=1e-12)


# --- F10: the ring all-reduce -----------------------------------------------------------------

# A PCIe link of 64 GB/s (25 us per all-reduce, parallel.ALLREDUCE_LATENCY_US) and a message of
# 1 MiB = 1,048,576 B: bytes / link = 1,048,576 / 64e9 s = 0.016384 ms. The ring all-reduce
# sends 2 (n - 1) / n of the message over each link: 1 at n = 2, 1.5 at 4, 1.75 at 8.
PCIE = _gpu("pcie", 64.0)


@pytest.mark.parametrize(("tp", "ms"), [
    (1, 0.0),                          # no TP, no all-reduce
    (2, 0.025 + 1.0 * 0.016384),       # 2 x 1 / 2 = 1    -> 0.041384 ms
    (4, 0.025 + 1.5 * 0.016384),       # 2 x 3 / 4 = 1.5  -> 0.049576 ms
    (8, 0.025 + 1.75 * 0.016384),      # 2 x 7 / 8 = 1.75 -> 0.053672 ms
])
def test_ring_allreduce_factor_by_hand(tp: int, ms: float) -> None:
    assert float(allreduce_ms(1_048_576.0, tp, PCIE)) == pytest.approx(ms, rel=1e-12, abs=0.0)


def test_the_written_out_allreduce_times() -> None:
    assert float(allreduce_ms(1_048_576.0, 2, PCIE)) == pytest.approx(0.041384, rel=1e-12)
    assert float(allreduce_ms(1_048_576.0, 4, PCIE)) == pytest.approx(0.049576, rel=1e-12)
    assert float(allreduce_ms(1_048_576.0, 8, PCIE)) == pytest.approx(0.053672, rel=1e-12)
    # NVLink (9.58 us), TP=8: 1 MiB is all small message, at 50.7 GB/s whatever the link:
    #   0.00958 + 1.75 x 1,048,576 / 50.7e9 x 1e3 = 0.00958 + 0.0361935 = 0.0457735 ms
    # (vLLM's custom all-reduce measured 0.0450 ms there on H100, sglang pull 2904)
    nvlink = _gpu("nvlink", 450.0)
    assert float(allreduce_ms(1_048_576.0, 8, nvlink)) == pytest.approx(
        0.00958 + 1.75 * 1_048_576 / 50.7e9 * 1e3, rel=1e-12)
    assert float(allreduce_ms(1_048_576.0, 8, nvlink)) == pytest.approx(0.04577345, rel=1e-6)
    # 8 MiB: the first MiB as above, the other 7 MiB at the link's 450 GB/s:
    #   0.0457735 + 1.75 x 7,340,032 / 450e9 x 1e3 = 0.0457735 + 0.0285445 = 0.0743180 ms
    assert float(allreduce_ms(8 * 1_048_576.0, 8, nvlink)) == pytest.approx(0.07431802, rel=1e-6)


def test_a_forward_pass_makes_two_allreduces_per_layer_by_hand() -> None:
    """A decode step of 128 sequences on the hybrid model above (4 layers, hidden 4,096) at
    TP=4: each all-reduce carries 128 x 4,096 x 2 B = 1,048,576 B (0.049576 ms on the PCIe
    link), two per layer (after attention and after the MLP), 4 layers: 8 x 0.049576 =
    0.396608 ms. Every layer all-reduces, linear-attention ones too."""
    assert HYBRID.layers == 4 and HYBRID.hidden == 4096
    assert float(tp_comm_ms(HYBRID, PCIE, 4, 128.0)) == pytest.approx(0.396608, rel=1e-12)
    assert float(tp_comm_ms(HYBRID, PCIE, 8, 128.0)) == pytest.approx(8 * 0.053672, rel=1e-12)
    assert float(tp_comm_ms(HYBRID, PCIE, 1, 128.0)) == 0.0
