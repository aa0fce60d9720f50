"""capacity/model/scenario.py: the cases that mutation testing found unchecked (issue 28).

`mutmut run "capacity.model.scenario.*"` left alive: make_scenario's input checks at their
boundaries (and which input a refusal names), the fields it passes through, the context-limit
notes' codes and parameters, evaluate's TP, replica, block-size, headroom and prefill-overhead
terms, capacity_table's row checks, the TP-size helpers and the fixes' fields. Every expected
value is worked by hand from the chapter's example (docs/method.md, "The worked example"):
Qwen3.5-9B AWQ (W = 5.7 GB, limit 262,144 tokens) on an RTX 4090 (24 GB, 1008 GB/s,
165.2 TFLOP/s BF16, CNY 2 per hour), util 0.9, overhead 1.5 GB, 8K context, fp16 KV
(32 KiB per token: 268,435,456 B = 0.268435456 GB per 8K request). GB = 1e9 bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

from capacity.catalog.loader import default_catalog
from capacity.errors import InputError
from capacity.model.fixes import FixKind, suggest_fixes
from capacity.model.memory import MemoryVerdict
from capacity.model.scenario import (
    capacity_table,
    context_limit_note,
    evaluate,
    make_scenario,
    nearest_valid_tp,
    valid_tp_sizes,
    with_parallel,
    with_weights,
)

KV_8K_GB = 0.268435456
"""KV of one 8K request (F2): 8192 tokens x 32 KiB = 268,435,456 B."""


# ---- make_scenario: refusals name the input, boundaries are inclusive where documented ----

@pytest.mark.parametrize(("kwargs", "message"), [
    ({"vram_gb": 0.0}, r"^VRAM must be > 0 GB, got 0.0$"),
    ({"bandwidth_gb_s": 0.0}, r"^bandwidth must be > 0 GB/s, got 0.0$"),
    ({"tflops": -1.0}, r"^TFLOP/s must be > 0 , got -1.0$"),
    ({"weights_gb": 0.0}, r"^weights must be > 0 GB, got 0.0$"),
    ({"context_tokens": 0}, r"^context must be > 0 tokens, got 0$"),
    ({"eff": 0.0}, r"^eff must be > 0 , got 0.0$"),
    ({"mfu": 0.0}, r"^MFU must be > 0 , got 0.0$"),
    ({"eta_bw": 0.0}, r"^eta_bw must be > 0 , got 0.0$"),
    ({"cny_per_usd": 0.0}, r"^exchange rate must be > 0 CNY per USD, got 0.0$"),
    ({"prompt_tokens": 0}, r"^prompt length must be > 0 tokens, got 0$"),
    ({"prompt_tokens": 8193}, "prompt of 8193 tokens exceeds the context of 8192 tokens"),
    ({"spare_gpus": 65}, r"^spare GPUs must be a whole number 0\.\.64, got 65$"),
    ({"spare_gpus": 1.5}, r"^spare GPUs must be a whole number 0\.\.64, got 1.5$"),
    ({"util": 0.0}, r"^util must be in \(0, 1\]"),
    ({"mfu": 1.5}, r"^eff, MFU and eta_bw are fractions of peak: each must be <= 1$"),
    ({"eta_bw": 1.5}, r"^eff, MFU and eta_bw are fractions of peak: each must be <= 1$"),
    ({"eta_kv": 0.0}, r"^eta_kv is a fraction of peak: it must be in \(0, 1\], got 0.0$"),
    ({"attn_mfu": 0.0},
     r"^attention MFU is a fraction of peak: it must be in \(0, 1\], got 0.0$"),
    ({"headroom": -1.0}, r"^headroom must be >= 0, got -1.0$"),
    ({"step_overhead_ms": -1.0}, r"^step overhead must be >= 0, got -1.0$"),
    ({"layer_overhead_ms": -1.0}, r"^per-layer step overhead must be >= 0, got -1.0$"),
    ({"seq_overhead_ms": -1.0}, r"^per-sequence overhead must be >= 0, got -1.0$"),
    ({"attn_sat_batch": -1.0}, r"^attention saturation batch must be >= 0, got -1.0$"),
    ({"draft_overhead_ms": -1.0}, r"^draft overhead must be >= 0, got -1.0$"),
    ({"verify_overhead_ms": -1.0}, r"^verify overhead must be >= 0, got -1.0$"),
    ({"prefill_overhead_ms": -1.0}, r"^prefill overhead must be >= 0, got -1.0$"),
    ({"mfu_half_tokens": -1.0}, r"^MFU half-efficiency tokens must be >= 0, got -1.0$"),
    ({"block_size": 0}, r"^block size must be >= 1 token, got 0$"),
    ({"currency": "EUR"}, r"^unknown currency 'EUR'; use CNY or USD$"),
    ({"price_per_hour": -1.0}, r"^price per hour must be >= 0, got -1.0$"),
])
def test_each_refusal_names_its_input_and_unit(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        make_scenario(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [
    {"spare_gpus": 64}, {"util": 1.0}, {"mfu": 1.0}, {"eta_bw": 1.0}, {"eff": 1.0},
    {"eta_kv": 1.0}, {"attn_mfu": 1.0}, {"batch1_factor": 2.0}, {"block_size": 1},
    {"prompt_tokens": 8192}, {"price_per_hour": 0.0}, {"price_per_hour": 0.5},
    {"context_tokens": 262144},
])
def test_the_inclusive_edges_are_accepted(kwargs: dict[str, object]) -> None:
    # each value sits exactly on a documented closed edge: (0, 1], 0..64, (0, 2], >= 1,
    # prompt <= context, price >= 0, context <= the model's 262,144-token limit
    s = make_scenario(**kwargs)  # type: ignore[arg-type]
    assert s.warnings == ()


def test_overrides_and_knobs_reach_the_scenario() -> None:
    s = make_scenario(bandwidth_gb_s=500.0, tflops=100.0, cny_per_usd=7.0, calibration="x",
                      eta_kv=0.8, attn_mfu=0.5, spare_gpus=1, block_size=32,
                      attn_sat_batch=4.0, batch1_factor=1.5, draft_overhead_ms=0.3,
                      verify_overhead_ms=0.2, cuda_graph_max_tokens=512.0,
                      gemm_tile_tokens=16.0, ridge_sharpness=4.0, price_per_hour=3.0)
    assert (s.bandwidth_gb_s, s.tflops, s.cny_per_usd) == (500.0, 100.0, 7.0)
    assert (s.calibration, s.eta_kv, s.attn_mfu) == ("x", 0.8, 0.5)
    assert (s.spare_gpus, s.paid_gpus, s.block_size) == (1, 2, 32)
    assert (s.attn_sat_batch, s.batch1_factor) == (4.0, 1.5)
    assert (s.draft_overhead_ms, s.verify_overhead_ms) == (0.3, 0.2)
    assert (s.cuda_graph_max_tokens, s.gemm_tile_tokens, s.ridge_sharpness) == (512.0, 16.0, 4.0)
    assert s.price_per_hour == 3.0


def test_catalog_figures_by_default_and_nccl_override() -> None:
    s = make_scenario()
    # RTX 4090: 1008 GB/s, 165.2 TFLOP/s for AWQ's BF16 compute
    assert s.bandwidth_gb_s == 1008.0
    assert s.tflops == pytest.approx(165.2)
    assert make_scenario(n_gpus=2, tp=2, nccl_gb=0.5).nccl_gb == 0.5


def test_context_beyond_the_limit_is_refused_with_its_note() -> None:
    with pytest.raises(InputError) as info:
        make_scenario(context_tokens=262145)
    note = info.value.args[0]
    assert str(note) == ("context 262145 tokens exceeds Qwen3.5-9B's limit of 262144 tokens"
                         " (pass --allow-long-context to compute it anyway)")
    assert note.code == "context_limit"
    assert note.params == {"context": 262145, "model": "Qwen3.5-9B", "limit": 262144}


def test_long_context_allowed_leaves_a_warning_note() -> None:
    s = make_scenario(context_tokens=262145, allow_long_context=True)
    (note,) = s.warnings
    assert str(note) == ("context 262145 tokens exceeds Qwen3.5-9B's limit of 262144 tokens"
                         "; computed anyway")
    assert note.code == "long_context"
    assert note.params == {"context": 262145, "model": "Qwen3.5-9B", "limit": 262144}


def test_context_limit_note_carries_code_and_params() -> None:
    m = make_scenario().model
    note = context_limit_note(300000, m)
    assert str(note) == "context 300000 tokens exceeds Qwen3.5-9B's limit of 262144 tokens"
    assert note.code == "context_limit"
    assert note.params == {"context": 300000, "model": "Qwen3.5-9B", "limit": 262144}


# ---- evaluate ----

def test_negative_concurrency_is_refused() -> None:
    with pytest.raises(InputError, match=r"^concurrency must be >= 0$"):
        evaluate(make_scenario(), [-1])


def test_inputs_become_float_arrays() -> None:
    ev = evaluate(make_scenario(), [1, 50, 100])
    assert ev.concurrency.dtype == np.float64
    assert ev.context_tokens.dtype == np.float64
    assert float(ev.context_tokens) == 8192.0


def test_tp_splits_kv_per_token_and_doubles_prefill_compute() -> None:
    one = evaluate(make_scenario(), [1])
    two = evaluate(make_scenario(n_gpus=2, tp=2), [1])
    assert two.kv_token.tp == 2
    # F10: each GPU holds half the KV heads: 268,435,456 / 2 B per 8K request
    assert float(two.kv_request.exact_bytes) == pytest.approx(134217728.0)
    # the linear TTFT divides by TFLOP/s x TP: half of TP 1's (2.975 s -> 1.4875 s)
    assert float(two.ttft_linear_s[()]) == pytest.approx(float(one.ttft_linear_s[()]) / 2)
    assert float(one.ttft_linear_s[()]) == pytest.approx(2.975, abs=5e-4)


def test_block_size_sets_the_paged_bytes() -> None:
    ev = evaluate(make_scenario(block_size=1000), [1])
    # ceil(8192 / 1000) = 9 blocks = 9000 tokens x 32,768 B = 294,912,000 B
    assert ev.kv_request.block_size == 1000
    assert float(ev.kv_request.paged_bytes) == pytest.approx(294912000.0)


def test_replicas_multiply_both_vram_concurrencies() -> None:
    ev = evaluate(make_scenario(n_gpus=2), [1])
    # floor(14.4 / 0.268435456) = 53 per replica, x 2 replicas
    assert int(ev.max_concurrency_vram) == 106
    assert int(ev.max_concurrency_vram_paged) == 106


def test_headroom_reaches_the_verdict() -> None:
    # 50 x 8K: 5.7 + 1.5 + 50 x 0.268435456 = 20.62 GB against 21.6 GB usable:
    # x 1.2 = 24.7 > 21.6 -> tight at the default 20 %; x 1.0 <= 21.6 -> fits at 0
    assert str(evaluate(make_scenario(), [50]).verdict[0]) == "tight"
    assert str(evaluate(make_scenario(headroom=0.0), [50]).verdict[0]) == "fits"


def test_prefill_overhead_adds_to_ttft_in_seconds() -> None:
    base = float(evaluate(make_scenario(), [1]).ttft_s)
    more = float(evaluate(make_scenario(prefill_overhead_ms=500.0), [1]).ttft_s)
    # 500 ms = 0.5 s more
    assert more - base == pytest.approx(0.5, rel=1e-9)


def test_crossover_is_none_over_an_array_of_contexts_and_scales_with_replicas() -> None:
    assert evaluate(make_scenario(), [1], [1024, 2048]).crossover_concurrency is None
    # at 1K the bandwidth term per sequence (33,554,432 B / 1008 GB/s = 0.033 ms) is below
    # the compute term (2 x 9e9 / 165.2e12 = 0.109 ms): a crossover exists; F10: x replicas
    one = evaluate(make_scenario(context_tokens=1024), [1]).crossover_concurrency
    two = evaluate(make_scenario(context_tokens=1024, n_gpus=2), [1]).crossover_concurrency
    assert one is not None and two is not None
    assert two == pytest.approx(2 * one)


# ---- capacity_table ----

def test_table_without_rows_is_empty() -> None:
    assert capacity_table(make_scenario(), []) == []


@pytest.mark.parametrize("rows", [[(10, 0)], [(-1, 8192)], [(10, -5)]])
def test_table_rows_are_checked(rows: list[tuple[int, int]]) -> None:
    with pytest.raises(InputError,
                       match=r"^table rows need concurrency >= 0 and context > 0$"):
        capacity_table(make_scenario(), rows)


def test_a_one_token_context_row_is_allowed() -> None:
    (row,) = capacity_table(make_scenario(), [(1, 1)])
    # one token of fp16 KV: 32 KiB = 32,768 B
    assert row.kv_request_bytes == pytest.approx(32768.0)


# ---- TP sizes, parallel and weight changes ----

def test_valid_tp_sizes_skip_a_size_that_does_not_divide() -> None:
    m = make_scenario().model
    # 4 GPUs: TP 3 does not divide 4 GPUs; TP 4 still does
    assert valid_tp_sizes(m, 4) == [1, 2, 4]
    assert valid_tp_sizes(m, 1) == [1]


@pytest.mark.parametrize(("n_gpus", "tp", "expected"), [
    (4, 3, 2),   # 2 and 4 are both 1 away: the smaller
    (4, 5, 4),   # 4 is 1 away
    (8, 7, 8),   # 8 is 1 away, 4 is 3
    (4, 2, 2),   # already valid
    (0, 3, 1),   # no valid size: 1
])
def test_nearest_valid_tp(n_gpus: int, tp: int, expected: int) -> None:
    assert nearest_valid_tp(make_scenario().model, n_gpus, tp) == expected


def test_with_parallel_sets_nccl_as_make_scenario_does() -> None:
    s = make_scenario()
    two = with_parallel(s, 2, 2)
    assert (two.n_gpus, two.tp) == (2, 2)
    assert two.nccl_gb == pytest.approx(2.147483648)  # the default NCCL buffers, 2 GiB
    assert with_parallel(make_scenario(n_gpus=2, tp=2, nccl_gb=0.5), 4, 2).nccl_gb == 0.5
    one = with_parallel(make_scenario(n_gpus=2, tp=2), 2, 1)
    assert (one.n_gpus, one.tp, one.nccl_gb) == (2, 1, 0.0)


def test_with_weights_takes_the_formats_weights_and_tflops() -> None:
    s = make_scenario()
    fp8 = default_catalog().variant("qwen3.5-9b", "fp8")
    t = with_weights(s, fp8)
    # FP8 on the RTX 4090: 330.3 TFLOP/s (twice BF16's 165.2); 10.017 GB of weights
    assert t.variant.format.key == "fp8"
    assert t.weights_gb == pytest.approx(10.01711872)
    assert t.tflops == pytest.approx(330.3)


# ---- suggest_fixes ----

def test_seed_fixes_and_their_figures() -> None:
    fixes = suggest_fixes(make_scenario(), 100)
    assert [(f.kind, f.value, f.description) for f in fixes] == [
        (FixKind.GPUS, 2, "2 GPUs (2 replicas)"),
        (FixKind.KV_DTYPE, "fp8", "FP8 KV cache"),
        (FixKind.CONTEXT, 4096, "4K context"),
        (FixKind.CONCURRENCY, 53, "at most 53 concurrent requests"),
    ]
    assert all(f.verdict == MemoryVerdict.TIGHT for f in fixes)
    gpus, kv, ctx, conc = fixes
    # 2 GPUs: 50 per replica: 5.7 + 1.5 + 50 x 0.268435456 = 20.6217728 GB of 21.6
    assert (gpus.n_gpus, gpus.tp) == (2, 1)
    assert gpus.subtotal_gb == pytest.approx(20.6217728)
    assert gpus.usable_gb == pytest.approx(21.6)
    # CNY 2 x 2 GPUs x 730 h = 2920 per month; 4 CNY/h over 2 x 2636 tok/s:
    # 4 / (5272 x 3600) x 1e6 = 0.2108 CNY per M tokens
    assert gpus.monthly_cost == pytest.approx(2920.0)
    assert gpus.cost_per_mtok == pytest.approx(0.2108, rel=1e-3)
    # FP8 KV: 100 x 0.134217728 = 13.42 GB + 7.2 = 20.62 GB on 1 GPU, CNY 2 x 730 = 1460
    assert (kv.n_gpus, kv.tp) == (1, 1)
    assert kv.subtotal_gb == pytest.approx(20.6217728)
    assert kv.monthly_cost == pytest.approx(1460.0)
    # 4K: 100 x 0.134217728 GB likewise
    assert ctx.subtotal_gb == pytest.approx(20.6217728)
    # 53 requests: 7.2 + 53 x 0.268435456 = 21.42708 GB
    assert conc.subtotal_gb == pytest.approx(21.427079168)


def test_no_fixes_when_it_fits() -> None:
    assert suggest_fixes(make_scenario(), 50) == []


def test_larger_tp_and_smaller_weights_fixes() -> None:
    # BF16 weights (18 GB) on 2 GPUs at TP 1, 20 requests at 8K: 10 per replica:
    # 18 + 1.5 + 10 x 0.268 = 22.18 GB > 21.6 usable: does not fit.
    s = make_scenario("qwen3.5-9b", weights="bf16", n_gpus=2)
    fixes = suggest_fixes(s, 20)
    by_kind = {f.kind: f for f in fixes}
    # TP 2 on the 2 GPUs: 9 + 1.5 + 2.147483648 (NCCL) + 20 x 0.134217728 = 15.33 GB:
    # x 1.2 = 18.4 <= 21.6: fits
    tp = by_kind[FixKind.TP]
    assert (tp.value, tp.description, tp.n_gpus, tp.tp) == (2, "TP=2 on 2 GPUs", 2, 2)
    assert tp.verdict == MemoryVerdict.FITS
    assert tp.subtotal_gb == pytest.approx(9 + 1.5 + 2.147483648 + 20 * KV_8K_GB / 2)
    # the largest smaller format that fits: FP8 (10.017 GB): 10.017 + 1.5 + 10 x 0.268 =
    # 14.2 GB, x 1.2 = 17.0 <= 21.6: fits (INT8 is as large)
    w = by_kind[FixKind.WEIGHTS]
    assert w.value in ("fp8", "int8")
    assert w.description in ("FP8 (W8A8, per-channel scales) weights",
                             "INT8 (W8A8, SmoothQuant-style) weights")
    assert w.verdict == MemoryVerdict.FITS
    assert w.subtotal_gb == pytest.approx(10.01711872 + 1.5 + 10 * KV_8K_GB)


def test_prompt_is_cut_to_the_shorter_context() -> None:
    # 100 x 8K with a 6000-token prompt: the 4K fix has a prompt of min(6000, 4096) = 4096
    s = make_scenario(prompt_tokens=6000)
    ctx = next(f for f in suggest_fixes(s, 100) if f.kind == FixKind.CONTEXT)
    assert (ctx.value, ctx.description) == (4096, "4K context")


def test_short_context_fix_in_tokens_below_1k() -> None:
    # 1K context, 500 requests: 500 x 32 KiB x 1024 = 16.78 GB + 7.2 = 23.98: does not fit.
    # Halving: 512 tokens: 8.39 + 7.2 = 15.59, x 1.2 = 18.7 <= 21.6: fits -> "512-token"
    s = make_scenario(context_tokens=1024)
    ctx = next(f for f in suggest_fixes(s, 500) if f.kind == FixKind.CONTEXT)
    assert (ctx.value, ctx.description) == (512, "512-token context")


def test_context_fix_of_exactly_1024_tokens_is_1k() -> None:
    # 2K context, 300 requests: 300 x 2048 x 32 KiB = 20.13 GB + 7.2 = 27.3 > 21.6: no fit.
    # Halving: 1024 tokens: 10.07 + 7.2 = 17.27, x 1.2 = 20.7 <= 21.6: fits -> "1K context"
    s = make_scenario(context_tokens=2048)
    ctx = next(f for f in suggest_fixes(s, 300) if f.kind == FixKind.CONTEXT)
    assert (ctx.value, ctx.description) == (1024, "1K context")


def test_default_tflops_follow_the_formats_compute_dtype() -> None:
    # FP8 weights compute in FP8: 330.3 TFLOP/s on the RTX 4090 (BF16's 165.2 x 2)
    assert make_scenario("qwen3.5-9b", weights="fp8").tflops == pytest.approx(330.3)


def test_tp_doubles_the_decode_compute_rate() -> None:
    # C = 100 at TP 1: compute term 10.9 ms (docs/method.md); a TP-2 group has 2 x 165.2
    # TFLOP/s for the same 100 sequences: half, 5.45 ms
    one = evaluate(make_scenario(), [100]).decode.compute_ms
    two = evaluate(make_scenario(n_gpus=2, tp=2), [100]).decode.compute_ms
    assert float(one[0]) == pytest.approx(10.9, abs=0.05)
    assert float(two[0]) == pytest.approx(float(one[0]) / 2)
