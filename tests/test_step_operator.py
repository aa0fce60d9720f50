"""F4b (the operator-level decode step) and F6b (prefill by parts), term by term.

Hand-computed numbers on the chapter's setup (Qwen3.5-9B AWQ, RTX 4090, 8K; docs/method.md):
W = 5.7e9 B, BW = 1008 GB/s, F = 165.2 TFLOP/s, P = 9e9, KV = 268,435,456 B per request,
attention A = 4 x 8 layers x 16 heads x 256 x 8192 = 1,073,741,824 FLOP per token, so
W/BW = 5.6548 ms, KV/BW = 0.26630 ms, 2P/F = 0.108959 ms per sequence, A/F = 0.0064997 ms.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity.catalog.loader import default_catalog
from capacity.errors import InputError
from capacity.model.prefill import prefill_flops, prefill_seconds, prefill_seconds_by_parts
from capacity.model.roofline import attention_flops_per_token, step_method
from capacity.model.scenario import (
    Scenario,
    capacity_table,
    decode_model,
    evaluate,
    make_scenario,
)

W_MS = 5.7e9 / 1008e9 * 1e3
KV_MS = 268_435_456 / 1008e9 * 1e3
GEMM_MS = 2 * 9e9 / 165.2e12 * 1e3
ATTN_MS = 1_073_741_824 / 165.2e12 * 1e3


def _step(s: Scenario, c: float) -> float:
    return float(evaluate(s, [c]).decode.step_ms[0])


def test_attention_flops_per_token_counts_full_layers_only(seed: Scenario) -> None:
    # 8 full-attention layers of 16 x 256; the 24 linear-attention layers add none
    assert float(attention_flops_per_token(seed.model, 8192)) == 4 * 8 * 16 * 256 * 8192


def test_operator_step_by_hand_at_spec_sheet(seed: Scenario) -> None:
    s = seed.with_(step_method="operator")
    # C = 1: GEMMs bandwidth-bound (5.6548 > 0.109), attention bandwidth-bound: the sum = max
    assert _step(s, 1) == pytest.approx(W_MS + KV_MS, rel=1e-9)
    assert _step(s, 1) == pytest.approx(_step(seed, 1), rel=1e-12)
    # C = 100: GEMMs compute-bound (10.896 > 5.655), attention bandwidth-bound (26.63 > 0.65)
    assert _step(s, 100) == pytest.approx(100 * GEMM_MS + 100 * KV_MS, rel=1e-9)
    assert _step(s, 100) == pytest.approx(37.526, abs=0.001)
    assert _step(seed, 100) == pytest.approx(32.285, abs=0.001)  # the chapter's, unchanged


def test_operator_step_with_every_knob_by_hand(seed: Scenario) -> None:
    s = seed.with_(step_method="operator", eta_bw=0.8, eta_kv=0.5, eff=0.5,
                   step_overhead_ms=1.0, seq_overhead_ms=0.01)
    gemm = max(W_MS / 0.8, 100 * GEMM_MS / 0.5)       # 21.792 (compute)
    attn = max(100 * KV_MS / 0.5, 100 * ATTN_MS)     # 53.260 (KV)
    assert _step(s, 100) == pytest.approx(1.0 + gemm + attn + 0.01 * 100, rel=1e-9)
    assert _step(s, 100) == pytest.approx(77.05, abs=0.01)
    d = evaluate(s, [100]).decode
    assert float(d.gemm_ms[0]) == pytest.approx(gemm) and float(d.attention_ms[0]) == pytest.approx(attn)


def test_attention_floor_flattens_as_the_batch_fills(seed: Scenario) -> None:
    s = seed.with_(step_method="operator", attn_sat_batch=3.0)
    # batch 1: attention reads KV as if 3 sequences were there: 3 x 0.2663 ms
    assert _step(s, 1) == pytest.approx(W_MS + 3 * KV_MS, rel=1e-9)
    assert _step(s, 2) == pytest.approx(W_MS + 3 * KV_MS, rel=1e-9)
    # batch 4 > b_sat: the floor no longer binds
    assert _step(s, 4) == pytest.approx(W_MS + 4 * KV_MS, rel=1e-9)
    # an empty batch has no attention at all
    assert _step(s, 0) == pytest.approx(W_MS, rel=1e-9)
    # zero (the default) is no floor
    assert _step(seed.with_(step_method="operator"), 1) == pytest.approx(W_MS + KV_MS)


def test_chapter_method_ignores_the_operator_knobs_but_not_per_sequence_overhead(
        seed: Scenario) -> None:
    s = seed.with_(eta_kv=0.3, attn_sat_batch=50.0)
    assert _step(s, 50) == _step(seed, 50)
    assert _step(seed.with_(seq_overhead_ms=0.1), 50) == pytest.approx(_step(seed, 50) + 5.0)


def test_the_100_x_8k_row_differs_by_the_gemm_compute(seed: Scenario) -> None:
    """The chapter's table: at 100 x 8K the GEMMs turn compute-bound, and run before
    attention instead of under it: the operator step is 10.9 - 5.65 = 5.24 ms longer."""
    chapter = capacity_table(seed)[2]
    operator = capacity_table(seed.with_(step_method="operator"))[2]
    assert operator.tpot_ms - chapter.tpot_ms == pytest.approx(100 * GEMM_MS - W_MS, abs=1e-6)


def test_unknown_method_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="unknown step method 'fast'"):
        step_method("fast")
    with pytest.raises(InputError, match="unknown step method"):
        make_scenario(step_method="fast")
    with pytest.raises(InputError, match="eta_kv"):
        make_scenario(eta_kv=1.5)


_CAT = default_catalog()
_MODELS = sorted(k for k in _CAT.variant_keys())
_GPUS = sorted(_CAT.gpus)


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(_MODELS), gpu=st.sampled_from(_GPUS),
       batch=st.integers(0, 2048), context=st.integers(16, 131072))
@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_operator_at_spec_sheet_is_never_faster_than_the_chapter(
        model: str, gpu: str, batch: int, context: int) -> None:
    """The upper-bound property: at eta = eff = 1, no overheads and no floor, the operator
    step (a sum of two maxima) is at least the chapter's combination (the max of the sums) of
    the same bytes and FLOPs. (Over its own terms the chapter also counts an untied embedding
    table the operator method leaves out: see the next test.)"""
    s = make_scenario(model, gpu, catalog=_CAT, context_tokens=context,
                      allow_long_context=True).with_(step_method="operator")
    ev = evaluate(s, [batch])
    sm = decode_model(s, ev.kv_request.exact_bytes)
    chapter = dataclasses.replace(sm, method="chapter").step_ms([batch])
    assert float(ev.decode.step_ms[0]) >= float(chapter[0]) * (1 - 1e-12)
    if s.model.lookup_params_b == 0:
        plain = evaluate(s.with_(step_method="chapter"), [batch]).decode.step_ms
        assert float(ev.decode.step_ms[0]) >= float(plain[0]) * (1 - 1e-12)


def test_operator_leaves_an_untied_embedding_table_out_of_decode() -> None:
    """Llama-3.1-8B (untied, 128,256 x 4,096 = 0.525 B lookup parameters of 8.03 B): the
    operator step reads W x (1 - 0.525 / 8.03) and multiplies 2 x (8.03 - 0.525) B per
    sequence; a tied model (Gemma 3) and one whose entry does not say (Qwen3.5-9B) keep all."""
    s = make_scenario("llama-3.1-8b", "h100-sxm", catalog=_CAT, context_tokens=1024)
    lookup = 128256 * 4096 / 1e9
    assert s.model.lookup_params_b == pytest.approx(lookup)
    op = decode_model(s.with_(step_method="operator"), 0.0)
    ch = decode_model(s, 0.0)
    w = s.weights_per_gpu_gb * 1e9
    assert float(op.weight_read_bytes(np.asarray(4.0))) == pytest.approx(w * (1 - lookup / 8.03))
    assert float(ch.weight_read_bytes(np.asarray(4.0))) == pytest.approx(w)
    assert float(op.flops(np.asarray(1.0))) == pytest.approx(2 * (8.03 - lookup) * 1e9)
    for key in ("gemma-3-27b", "qwen3.5-9b"):
        m = make_scenario(key, "h100-sxm", catalog=_CAT).model
        assert m.lookup_params_b == 0.0
        assert m.head_params_b == pytest.approx(m.vocab * m.hidden / 1e9)


def test_prefill_by_parts_keeps_the_chapter_and_splits_attention(seed: Scenario) -> None:
    pf = prefill_flops(seed.model, 8192)
    same = prefill_seconds_by_parts(pf, 165.2, 0.3)
    assert float(same) == float(prefill_seconds(pf.total_flops, 165.2, 0.3))
    linear_s = float(pf.linear_flops) / (165.2e12 * 0.3)
    assert linear_s == pytest.approx(2.975, abs=0.001)  # the chapter's linear TTFT
    split = prefill_seconds_by_parts(pf, 165.2, 0.3, attn_mfu=0.6, overhead_s=0.01)
    assert float(split) == pytest.approx(0.01 + linear_s + float(pf.attention_flops)
                                         / (165.2e12 * 0.6), rel=1e-12)
    with pytest.raises(InputError, match="attention MFU"):
        prefill_seconds_by_parts(pf, 165.2, 0.3, attn_mfu=0.0)


def test_scenario_ttft_uses_the_attention_efficiency(seed: Scenario) -> None:
    base = float(evaluate(seed).ttft_s)
    slower = float(evaluate(seed.with_(attn_mfu=0.15)).ttft_s)
    pf = prefill_flops(seed.model, 8192)
    # attention at half the MFU takes twice as long: the difference is one attention at MFU
    assert slower - base == pytest.approx(float(pf.attention_flops) / (165.2e12 * 0.3), rel=1e-9)


def test_planner_grid_uses_the_operator_step() -> None:
    from capacity.model.workload import Workload
    from capacity.plan.options import PlanInputs
    from capacity.plan.units import replica_units
    wl = Workload(peak_concurrency=10, context_tokens=8192, output_tokens=256)
    inp = PlanInputs(model="qwen3.5-9b-awq", workload=wl, gpus=("rtx-4090",), max_gpus=1,
                     kv_dtypes=("fp16",), step_method="operator", attn_sat_batch=3.0)
    _, _, u = replica_units(inp, _CAT)
    assert float(np.asarray(u.step.step_ms(np.array([1.0]))).ravel()[0]) == pytest.approx(
        W_MS + 3 * KV_MS, rel=1e-9)


def test_explorer_says_why_the_methods_differ(seed: Scenario) -> None:
    from capacity.report.explain import method_note, show_math
    from capacity.report.i18n import note_text
    assert method_note(seed, 50) is None  # bandwidth binds both groups: the same step
    note = method_note(seed, 100)
    assert note is not None and note.code == "method_gemm_compute"
    assert "compute-bound" in note and "37.5 ms" in note and "32.3 ms" in note
    assert "GEMM" in note_text(note, "zh") and "37.526" in note_text(note, "zh")
    step = next(m for m in show_math(seed, 100) if m.key == "operator_step")
    assert step.value == pytest.approx(37.526, abs=0.001) and step.note == note
    floor = method_note(seed.with_(attn_sat_batch=8.0), 1)
    assert floor is not None and floor.code == "method_knobs"


def test_sensitivity_moves_the_operator_knobs_when_in_use(seed: Scenario) -> None:
    from capacity.fit.uncertainty import OPERATOR_INPUTS, sensitivity
    chapter = {r.name for r in sensitivity(seed, 4)}
    assert not chapter & set(OPERATOR_INPUTS)
    rows = {r.name: r for r in sensitivity(seed.with_(step_method="operator"), 4)}
    assert set(OPERATOR_INPUTS) <= set(rows)
    floor = rows["attn_sat_batch"]  # at 0 (no floor) it moves over its typical range, 1..8
    assert (floor.low, floor.high) == (1.0, 8.0)
    # batch 4 at 8K: a floor of 8 sequences reads 4 more sequences' KV (4 x 0.2663 ms)
    assert floor.swing == pytest.approx(4 * KV_MS, rel=1e-6)
    assert rows["eta_kv"].high == 1.0  # unset: eta_bw's 1.0, capped at 1


def test_operator_prefill_counts_the_head_once_and_no_lookup() -> None:
    """F6b's weight count: Llama-3.1-8B at 1,000 tokens, 2 x 8.03e9 x 1000 = 1.606e13 under F6
    against 2 x (8.03e9 - 2 x 0.525e9) x 1000 + 2 x 0.525e9 = 1.396e13 under F6b; a cached
    prefix keeps the head (the last token is always computed)."""
    s = make_scenario("llama-3.1-8b", "h100-sxm", catalog=_CAT, context_tokens=2048,
                      prompt_tokens=1000)
    vh = 128256 * 4096
    f6 = prefill_flops(s.model, 1000)
    f6b = prefill_flops(s.model, 1000, by_operator=True)
    assert float(f6.linear_flops) == pytest.approx(2 * 8.03e9 * 1000)
    assert float(f6b.linear_flops) == pytest.approx(2 * (8.03e9 - 2 * vh) * 1000 + 2 * vh)
    assert float(f6b.linear_flops) == pytest.approx(1.396e13, rel=1e-3)
    assert f6b.head_flops == pytest.approx(2 * vh)
    assert float(f6b.attention_flops) == float(f6.attention_flops)
    op = s.with_(step_method="operator")
    assert float(evaluate(op).ttft_s) < float(evaluate(s).ttft_s)
    from capacity.model.prefix import cached_prefill_flops, cached_prefill_s
    rest = float(cached_prefill_flops(op, 1000, 400))
    full = prefill_flops(s.model, 1000, by_operator=True)
    hit = prefill_flops(s.model, 400, by_operator=True)
    assert rest == pytest.approx(float(full.total_flops - hit.total_flops) + 2 * vh)
    assert float(cached_prefill_s(op, 1000)) == pytest.approx(float(evaluate(op).ttft_s))
    by_parts = op.with_(attn_mfu=0.2)
    assert float(cached_prefill_s(by_parts, 1000)) == pytest.approx(
        float(evaluate(by_parts).ttft_s))


def test_explorer_explains_the_weight_count_of_the_operator_method() -> None:
    """Llama-3.1-8B (untied): at one sequence the operator step is shorter than the chapter's
    (it does not read the 1.05 GB input table), and its TTFT line shows F6b's count."""
    from capacity.report.explain import method_note, show_math
    from capacity.report.i18n import note_text

    s = make_scenario("llama-3.1-8b", "h100-sxm", catalog=_CAT, context_tokens=2048,
                      prompt_tokens=1000)
    note = method_note(s, 1)
    assert note is not None and note.code == "method_embedding"
    assert "1.05 GB" in note and "词嵌入" in note_text(note, "zh")
    ttft = next(m for m in show_math(s.with_(step_method="operator"), 1) if m.key == "ttft")
    assert "lookup" in ttft.formula and ttft.note.code == "method_prefill"  # type: ignore[attr-defined]
    assert "13% fewer" in ttft.note and "13%" in note_text(ttft.note, "zh")  # type: ignore[arg-type]
    assert ttft.value == pytest.approx(float(evaluate(s.with_(step_method="operator")).ttft_s))
    plain = next(m for m in show_math(s, 1) if m.key == "ttft")
    assert "lookup" not in plain.formula and plain.note == ""


@pytest.mark.parametrize("method", ["chapter", "operator"])
def test_batch1_factor_scales_the_step_of_one_sequence_only(seed: Scenario, method: str) -> None:
    """An engine that runs one sequence through other kernels (llama.cpp's CPU backend: its
    matrix-vector code at 1, GEMM from 2): the step at batch 1 is the factor times the
    formula's, every other batch is untouched, and the parts still add up to the step."""
    base = seed.with_(step_method=method, seq_overhead_ms=0.01, step_overhead_ms=0.5)
    fast = base.with_(batch1_factor=0.7)
    c = [1.0, 2.0, 50.0]
    a, b = evaluate(base, c).decode, evaluate(fast, c).decode
    assert b.step_ms[0] == pytest.approx(0.7 * a.step_ms[0])
    assert np.allclose(b.step_ms[1:], a.step_ms[1:])
    parts = b.overhead_ms + np.maximum(b.bandwidth_ms, b.compute_ms) + b.comm_ms + b.serial_ms
    assert np.allclose(parts, b.step_ms)
    # the batched overhead: every batch of two or more pays it, one sequence not
    slow = base.with_(batched_overhead_ms=6.0)
    d = evaluate(slow, c).decode
    assert d.step_ms[0] == pytest.approx(a.step_ms[0])
    assert np.allclose(d.step_ms[1:], a.step_ms[1:] + 6.0)
    parts = d.overhead_ms + np.maximum(d.bandwidth_ms, d.compute_ms) + d.comm_ms + d.serial_ms
    assert np.allclose(parts, d.step_ms)
    assert seed.batched_overhead_ms == 0.0
    with pytest.raises(InputError, match="batched step overhead"):
        make_scenario(batched_overhead_ms=-1.0)
    # the spec sheet is 1 (every golden number stays); out of range is a clear error
    assert seed.batch1_factor == 1.0
    with pytest.raises(InputError, match="batch-1 step factor"):
        make_scenario(batch1_factor=0.0)
    with pytest.raises(InputError, match="batch-1 step factor"):
        make_scenario(batch1_factor=3.0)
