"""Tests written to kill mutmut survivors in capacity/model/roofline.py (issue 28): the checked
front `decode_step`, F5's crossover `crossover_concurrency`, and `StepModel`'s terms, on a
made-up dense model with round numbers. Every expected value is worked out in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from capacity.catalog.loader import LayerGroup, Model, default_catalog
from capacity.errors import InputError
from capacity.model.parallel import CommLine, tp_comm_line, tp_comm_ms
from capacity.model.roofline import (
    StepModel,
    attainable_tflops,
    attention_flops_per_token,
    breakeven_batch,
    crossover_concurrency,
    decode_step,
    ridge_point,
)
from capacity.model.scenario import decode_model, make_scenario

# P_active = P_total = 1e9, one full layer of 4 query heads of 8; vocab x hidden = 1e6 x ... the
# head and lookup never reach the chapter's method used here.
DENSE = Model(key="made-up", name="Made-up", hf_repo="none/made-up", params_total_b=1.0,
              params_active_b=1.0, hidden=1000, vocab=10_000, max_context_tokens=32768,
              layer_groups=(LayerGroup(kind="full", count=1, kv_heads=1, head_dim=8,
                                       q_heads=4),),
              moe=None, default_format="bf16", stated_variants=(),
              source="tests/test_mutants_roofline.py", as_of="2026-12-02")


def _close(got: object, want: list[float]) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=1e-12)


# -- decode_step ------------------------------------------------------------------------------

# W 2e9 B and KV 1e8 B per sequence on 1000 GB/s (1e12 B/s); 2 x 1e9 FLOP per sequence on
# 100 TFLOP/s (1e14 FLOP/s). Bandwidth term (2e9 + c 1e8) / 1e12 s = 2 + 0.1 c ms; compute
# term 2e9 c / 1e14 s = 0.02 c ms.
KW = dict(model=DENSE, weights_bytes=2e9, kv_request_bytes=1e8, bandwidth_gb_s=1000.0,
          tflops=100.0)


def test_decode_step_by_hand() -> None:
    d = decode_step(**KW, concurrency=[1.0, 10.0], overhead_ms=0.5, comm_ms=0.25)
    _close(d.bandwidth_ms, [2.1, 3.0])
    _close(d.compute_ms, [0.02, 0.2])
    # step = 0.5 + max + 0.25 = [2.85, 3.75] ms
    _close(d.step_ms, [2.85, 3.75])
    _close(d.engine_step_ms, [2.85, 3.75])
    _close(d.tok_s_per_request, [1000 / 2.85, 1000 / 3.75])
    _close(d.aggregate_tok_s, [1000 / 2.85, 10_000 / 3.75])
    _close(d.concurrency, [1.0, 10.0])
    _close(d.weight_read_bytes, [2e9, 2e9])
    _close(d.kv_read_bytes, [1e8, 1e9])
    _close(d.flops, [2e9, 2e10])
    _close(d.attention_flops, [0.0, 0.0])
    _close(d.comm_ms, [0.25, 0.25])
    _close(d.serial_ms, [0.0, 0.0])
    assert d.overhead_ms == 0.5 and d.method == "chapter"
    assert d.bound.tolist() == ["bandwidth", "bandwidth"]


def test_decode_step_knobs_by_hand() -> None:
    # eta_bw 0.5: bandwidth [4.2, 6.0]; eff 0.5: compute [0.04, 0.4]; no overhead or comm
    d = decode_step(**KW, concurrency=np.array([1.0, 10.0]), eff=0.5, eta_bw=0.5)
    _close(d.bandwidth_ms, [4.2, 6.0])
    _close(d.compute_ms, [0.04, 0.4])
    _close(d.step_ms, [4.2, 6.0])
    # an array of KV per sequence and of comm broadcasts: KV [1e8, 3e8] at c = 2:
    # (2e9 + 2 x [1e8, 3e8]) / 1e12 = [2.2, 2.6] ms, + comm [0, 1]
    d = decode_step(**{**KW, "kv_request_bytes": [1e8, 3e8]}, concurrency=2.0,
                    comm_ms=[0.0, 1.0])
    _close(d.step_ms, [2.2, 3.6])


def test_decode_step_at_zero_sequences() -> None:
    # the weight read alone: 2 ms
    d = decode_step(**KW, concurrency=0.0)
    _close(d.step_ms, [2.0])


@pytest.mark.parametrize(("over", "message"), [
    ({"bandwidth_gb_s": 0.0}, "bandwidth must be > 0, got 0.0"),
    ({"tflops": -1.0}, "TFLOP/s must be > 0, got -1.0"),
    ({"eff": 0.0}, "eff must be > 0, got 0.0"),
    ({"eta_bw": -0.5}, "eta_bw must be > 0, got -0.5"),
])
def test_decode_step_refuses_non_positive_rates(over: dict[str, float], message: str) -> None:
    kw = {**KW, **over}
    with pytest.raises(InputError) as err:
        decode_step(**kw, concurrency=1.0)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_decode_step_refuses_negative_concurrency() -> None:
    with pytest.raises(InputError) as err:
        decode_step(**KW, concurrency=[1.0, -1.0])
    assert str(err.value) == "concurrency must be >= 0"


# -- crossover_concurrency (F5) ---------------------------------------------------------------


def test_crossover_by_hand() -> None:
    # KV 1e6 B: C* = (W / BW) / (2P / F - KV / BW) = 2e-3 / (2e-5 - 1e-6) = 2e-3 / 1.9e-5
    # = 105.263 sequences
    kw = {**KW, "kv_request_bytes": 1e6}
    assert crossover_concurrency(**kw) == pytest.approx(2e-3 / 1.9e-5, rel=1e-12)
    # eff 0.5: 2e-3 / (4e-5 - 1e-6) = 51.282
    assert crossover_concurrency(**kw, eff=0.5) == pytest.approx(2e-3 / 3.9e-5, rel=1e-12)
    # eta_bw 0.5: BW' = 5e11: 4e-3 / (2e-5 - 2e-6) = 222.22
    assert crossover_concurrency(**kw, eta_bw=0.5) == pytest.approx(4e-3 / 1.8e-5, rel=1e-12)


def test_no_crossover_when_kv_outgrows_the_arithmetic() -> None:
    # KV 1e8 B: 1e-4 s per sequence of reading against 2e-5 s of arithmetic: never
    assert crossover_concurrency(**KW) is None
    # exactly equal (KV 2e7 B / 1e12 = 2e-5 = 2e9 / 1e14): the denominator is 0, no crossover
    assert crossover_concurrency(**{**KW, "kv_request_bytes": 2e7}) is None


# -- the roofline -----------------------------------------------------------------------------


def test_attainable_and_ridge_point() -> None:
    # ridge 100e12 / 1000e9 = 100 FLOP/B; at 50 FLOP/B: 50 x 1000e9 = 50 TFLOP/s; at 200: peak
    assert ridge_point(100.0, 1000.0) == pytest.approx(100.0)
    _close(attainable_tflops([50.0, 100.0, 200.0], 100.0, 1000.0), [50.0, 100.0, 100.0])


def test_step_model_terms_by_hand() -> None:
    m = StepModel(weights_bytes=2e9, kv_request_bytes=1e8, bandwidth_gb_s=1000.0, tflops=100.0,
                  params_active_b=1.0, comm_fixed_ms=0.2, comm_per_seq_ms=0.01,
                  attention_flops_request=1e6, verify_tokens=1.0)
    b = np.array([1.0, 4.0])
    _close(m.kv_read_bytes(b), [1e8, 4e8])
    _close(m.flops(b), [2e9, 8e9])
    _close(m.attention_flops(b), [1e6, 4e6])
    # 0.2 + 0.01 b
    _close(m.comm_ms(b), [0.21, 0.24])
    _close(m.weight_read_bytes(b), [2e9])
    assert not m.padded and not m.speculative


def test_attainable_keeps_single_precision_intensity_in_double() -> None:
    # 0.1 as float32 is 0.10000000149011612: x 1008 GB/s = 0.1008000015 TFLOP/s in double;
    # float32 arithmetic would round it to 0.1008000076
    i = np.float32([0.1])
    assert float(attainable_tflops(i, 100.0, 1008.0)[0]) == float(i[0]) * 1008.0 * 1e9 / 1e12


# -- speculative decoding: the draft's time and the break-even batch --------------------------

PLAIN = StepModel(weights_bytes=2e9, kv_request_bytes=1e6, bandwidth_gb_s=1000.0, tflops=100.0,
                  params_active_b=1.0)


def test_draft_ms_by_hand() -> None:
    # verify overhead 0.1 ms x b 2 x (k + 1) where k + 1 > 1: [0, 0.4, 0.6];
    # the draft: 2 passes of 0.3 + max((1e8 + 2 x 1e5) / (1e12 x 0.5), 2 x 0.1e9 x 2 /
    # (1e14 x 0.5)) s = 0.3 + max(0.2004, 0.008) ms -> 2 x 0.5004 = 1.0008 ms
    m = StepModel(weights_bytes=2e9, kv_request_bytes=1e6, bandwidth_gb_s=1000.0, tflops=100.0,
                  params_active_b=1.0, eta_bw=0.5, eff=0.5,
                  verify_tokens=np.array([1.0, 2.0, 3.0]), draft_passes=2.0,
                  draft_weights_bytes=1e8, draft_kv_request_bytes=1e5, draft_params_b=0.1,
                  draft_overhead_ms=0.3, verify_overhead_ms=0.1)
    _close(m.draft_ms(2.0), [1.0008, 1.4008, 1.6008])
    # a draft of 10 B parameters is compute-bound: 2 x 10e9 x 2 / (1e14 x 0.5) s = 0.8 ms a
    # pass -> 2 x (0.3 + 0.8) = 2.2 ms; plain verify width (k + 1 = 1): no verify overhead
    big = StepModel(weights_bytes=2e9, kv_request_bytes=1e6, bandwidth_gb_s=1000.0,
                    tflops=100.0, params_active_b=1.0, eta_bw=0.5, eff=0.5, draft_passes=2.0,
                    draft_weights_bytes=1e8, draft_kv_request_bytes=1e5, draft_params_b=10.0,
                    draft_overhead_ms=0.3, verify_overhead_ms=0.1)
    _close(big.draft_ms(2.0), [2.2])


def test_breakeven_batch_by_hand() -> None:
    # plain: max(2 + 0.001 b, 0.02 b) ms; drafted (k + 1 = 3, tau 2, n-gram: no draft passes):
    # max(2 + 0.001 b, 0.06 b) / 2. At b = 68: 4.08 / 2 = 2.04 < 2.068; at b = 69:
    # 4.14 / 2 = 2.07 >= 2.069: the draft stops paying at 69
    drafted = StepModel(weights_bytes=2e9, kv_request_bytes=1e6, bandwidth_gb_s=1000.0,
                        tflops=100.0, params_active_b=1.0, verify_tokens=3.0,
                        accepted_tokens=2.0)
    assert breakeven_batch(PLAIN, drafted) == 69
    assert breakeven_batch(PLAIN, drafted, max_batch=69) == 69
    assert breakeven_batch(PLAIN, drafted, max_batch=68) is None
    # a "draft" that changes nothing is never faster: no gain from the first sequence
    assert breakeven_batch(PLAIN, PLAIN) == 1
    assert breakeven_batch(PLAIN, PLAIN, max_batch=1) == 1


# -- the operator step's crossover (on the grid, then bisected) -------------------------------


def _operator(params_b: float, kv_bytes: float = 0.0) -> StepModel:
    # weights 3e9 B / 1e12 B/s = 3 ms; GEMMs 2 x params_b x 1e9 x b / 1e14 s per step
    return StepModel(weights_bytes=3e9, kv_request_bytes=kv_bytes, bandwidth_gb_s=1000.0,
                     tflops=100.0, params_active_b=params_b, method="operator")


def test_operator_crossover_between_grid_points() -> None:
    # 100 B parameters: compute 2 b ms against 3 ms of weights: C* = 1.5, between the grid's
    # 1 and 2, found by bisection
    assert _operator(100.0).crossover_batch() == pytest.approx(1.5, rel=1e-9)
    # 1 B parameters: 0.02 b ms against 3 ms: C* = 150
    assert _operator(1.0).crossover_batch() == pytest.approx(150.0, rel=1e-9)


def test_operator_crossover_at_the_first_sequence() -> None:
    # 200 B parameters: 4 ms of arithmetic for one sequence against 3 ms: compute binds from 1
    assert _operator(200.0).crossover_batch() == 1.0


def test_operator_crossover_none_when_kv_outgrows_it() -> None:
    # KV 1e8 B a sequence (0.1 ms) against 0.02 ms of arithmetic: never
    assert _operator(1.0, kv_bytes=1e8).crossover_batch() is None


def test_operator_decode_names_its_method() -> None:
    # 1 B parameters, 2 sequences: bandwidth 3 ms, compute 0.04 ms; step 3 ms
    d = _operator(1.0).decode([2.0])
    assert d.method == "operator"
    _close(d.step_ms, [3.0])
    _close(d.gemm_ms, [3.0])


def test_for_model_defaults_are_the_spec_sheet_knobs() -> None:
    m = StepModel.for_model(DENSE, weights_bytes=2e9, kv_request_bytes=1e8,
                            bandwidth_gb_s=1000.0, tflops=100.0, lookup_weight_share=0.0)
    assert (m.eff, m.eta_bw, m.overhead_ms, m.batch1_factor, m.attn_sat_batch) == (
        1.0, 1.0, 0.0, 1.0, 0.0)
    assert (m.cuda_graph_max_tokens, m.gemm_tile_tokens, m.ridge_sharpness) == (0.0, 0.0, 0.0)
    assert (m.experts, m.active_experts, m.expert_fraction) == (1, 1, 0.0)
    assert m.attention_flops_request == 0.0 and m.eta_kv is None and m.method == "chapter"
    assert (m.comm_fixed_ms, m.comm_per_seq_ms, m.seq_overhead_ms) == (0.0, 0.0, 0.0)
    # no context: no attention FLOPs
    _close(m.attention_flops(np.array([1.0, 4.0])), [0.0, 0.0])


def test_for_model_passes_every_knob() -> None:
    m = StepModel.for_model(DENSE, weights_bytes=2e9, kv_request_bytes=1e8,
                            bandwidth_gb_s=1000.0, tflops=100.0, comm_fixed_ms=0.2,
                            comm_per_seq_ms=0.01, gemm_tile_tokens=16.0,
                            cuda_graph_max_tokens=512.0, context_tokens=100.0,
                            lookup_weight_share=0.0)
    assert (m.comm_fixed_ms, m.comm_per_seq_ms) == (0.2, 0.01)
    assert (m.gemm_tile_tokens, m.cuda_graph_max_tokens) == (16.0, 512.0)
    # one full layer of 4 x 8 at 100 tokens of context: 4 x 1 x 4 x 8 x 100 = 12,800 FLOP
    assert float(m.attention_flops_request) == 12_800.0


def test_attention_flops_grow_with_the_verify_width() -> None:
    # b 2 x A 1e6 x (k + 1) 3 = 6e6 FLOP
    m = StepModel(weights_bytes=2e9, kv_request_bytes=1e8, bandwidth_gb_s=1000.0, tflops=100.0,
                  params_active_b=1.0, attention_flops_request=1e6, verify_tokens=3.0)
    _close(m.attention_flops(np.array([2.0])), [6e6])
    # the weight GEMMs too: 2 x 1e9 x 2 x 3 = 1.2e10
    _close(m.flops(np.array([2.0])), [1.2e10])


def test_comm_coefficients_are_the_all_reduce_line() -> None:
    # F10 as a CommLine: fixed = t(0), per token = t(1) - t(0) up to the knee (1 MiB of
    # message), the link's rate above; it is tp_comm_ms at every n (F10). One GPU: none
    s = make_scenario("llama-3.1-70b", "h100-sxm", n_gpus=2, tp=2, weights="fp8")
    assert tp_comm_line(s.model, s.gpu, 1) == CommLine()
    assert s.gpu.interconnect_kind == "nvlink"
    line = tp_comm_line(s.model, s.gpu, 2)
    knee = 1_048_576 / (s.model.hidden * 2)
    n = np.array([0.0, 1.0, 5.0, knee, knee + 100.0, 4 * knee])
    t = tp_comm_ms(s.model, s.gpu, 2, n)
    assert line.fixed_ms == pytest.approx(float(t[0]), rel=1e-12)
    assert line.per_token_ms == pytest.approx(float(t[1] - t[0]), rel=1e-12)
    assert line.knee_tokens == pytest.approx(knee, rel=1e-12)
    assert line.at(n) == pytest.approx(t, rel=1e-9)
    assert line.per_token_ms > line.above_ms > 0 and line.fixed_ms > 0
    # the step model carries the same line: its comm at b sequences is line.at(b)
    step = decode_model(s, 1.0e5)
    assert step.comm_ms(n) == pytest.approx(t, rel=1e-9)
    # a PCIe card has no knee: one line
    pcie = next(g for g in default_catalog().gpus.values() if g.interconnect_kind == "pcie")
    assert tp_comm_line(s.model, pcie, 2).knee_tokens == math.inf


# -- attention FLOPs by layer kind, padding, the lean path, MoE with an unread table ----------


def _layers(*groups: LayerGroup) -> Model:
    return Model(key="made-up", name="Made-up", hf_repo="none/made-up", params_total_b=1.0,
                 params_active_b=1.0, hidden=1000, vocab=10_000, max_context_tokens=32768,
                 layer_groups=groups, moe=None, default_format="bf16", stated_variants=(),
                 source="tests/test_mutants_roofline.py", as_of="2026-12-02")


def test_attention_flops_per_token_by_layer_kind() -> None:
    # a linear-attention layer first (it has heads, but no KV to attend), then a full layer of
    # 4 x 8 and a sliding layer of 2 x 8 (window 100): at 1000 tokens
    # 4 x 4 x 8 x 1000 + 4 x 2 x 8 x min(1000, 100) = 128,000 + 6,400 = 134,400 FLOP;
    # at 50 tokens 4 x 4 x 8 x 50 + 4 x 2 x 8 x 50 = 6,400 + 3,200 = 9,600
    m = _layers(LayerGroup(kind="linear", count=3, q_heads=16, head_dim=64, state_bytes=1.0),
                LayerGroup(kind="full", count=1, kv_heads=1, head_dim=8, q_heads=4),
                LayerGroup(kind="sliding", count=1, kv_heads=1, head_dim=8, q_heads=2,
                           window_tokens=100))
    _close(attention_flops_per_token(m, [1000.0, 50.0]), [134_400.0, 9_600.0])
    # linear layers only: zero attention FLOPs, one per context
    only = _layers(LayerGroup(kind="linear", count=3, q_heads=16, head_dim=64, state_bytes=1.0))
    out = attention_flops_per_token(only, [1000.0, 50.0])
    assert out.shape == (2,) and not out.any()


def test_padded_gemm_flops() -> None:
    # CUDA graphs up to 512 tokens: 3 rows run as the captured batch of 4 -> 2 x 1e9 x 4 = 8e9;
    # tiles of 16 rows: 3 rows round up to 16 -> 3.2e10
    graphs = StepModel(weights_bytes=2e9, kv_request_bytes=1e6, bandwidth_gb_s=1000.0,
                       tflops=100.0, params_active_b=1.0, cuda_graph_max_tokens=512.0)
    assert graphs.padded
    _close(graphs.flops(np.array([3.0])), [8e9])
    tiles = StepModel(weights_bytes=2e9, kv_request_bytes=1e6, bandwidth_gb_s=1000.0,
                      tflops=100.0, params_active_b=1.0, gemm_tile_tokens=16.0)
    _close(tiles.flops(np.array([3.0])), [3.2e10])


def test_lean_step_with_eff_and_per_sequence_overhead() -> None:
    # the lean path (chapter, dense): eff 0.5 doubles the arithmetic, 0.04 b ms; at b = 100:
    # max(2 + 0.1, 4) = 4 ms; + 0.1 ms a sequence = 14 ms. At b = 10: max(2.01, 0.4) + 1 = 3.01
    m = StepModel(weights_bytes=2e9, kv_request_bytes=1e6, bandwidth_gb_s=1000.0, tflops=100.0,
                  params_active_b=1.0, eff=0.5, seq_overhead_ms=0.1)
    _close(m.step_ms(np.array([10.0, 100.0])), [3.01, 14.0])
    _close(m.parts(np.array([10.0, 100.0])).step_ms, [3.01, 14.0])


def test_moe_weight_read_less_the_unread_table() -> None:
    # f 0.5 of W in 8 experts, 2 active: b 1 touches 1 - 0.75 = 0.25 of them -> 0.5 + 0.125
    # = 0.625 of W; b 2: 1 - 0.75^2 = 0.4375 -> 0.71875; less an unread table of 0.1 of W:
    # 1e9 x [0.525, 0.61875]
    m = StepModel(weights_bytes=1e9, kv_request_bytes=1e6, bandwidth_gb_s=1000.0, tflops=100.0,
                  params_active_b=1.0, expert_fraction=0.5, experts=8, active_experts=2,
                  unread_weight_share=0.1)
    _close(m.weight_read_bytes(np.array([1.0, 2.0])), [5.25e8, 6.1875e8])
