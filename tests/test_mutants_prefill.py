"""Tests written to kill mutmut survivors in capacity/model/prefill.py (issue 28): F6's prefill
FLOPs (linear and attention parts), F6b's count by parts and F6c's MFU curve, on a made-up
model with round numbers. Every expected value is worked out in the comment beside it."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.catalog.loader import LayerGroup, Model
from capacity.errors import InputError
from capacity.model.prefill import (
    PrefillFlops,
    attended_pairs,
    prefill_flops,
    prefill_seconds,
    prefill_seconds_by_parts,
    step_mfu,
)

# P_active 1e9; vocab x hidden = 10,000 x 1,000 = 1e7 = 0.01 B, untied: lookup 0.01 B and head
# 0.01 B. Layers: one linear-attention layer first (no attention FLOPs, though it has heads),
# 2 full layers and 1 sliding layer (window 4), each 4 query heads of 8.
MODEL = Model(key="made-up", name="Made-up", hf_repo="none/made-up", params_total_b=1.0,
              params_active_b=1.0, hidden=1000, vocab=10_000, max_context_tokens=32768,
              layer_groups=(LayerGroup(kind="linear", count=1, q_heads=4, head_dim=8,
                                       state_bytes=1000.0),
                            LayerGroup(kind="full", count=2, kv_heads=1, head_dim=8, q_heads=4),
                            LayerGroup(kind="sliding", count=1, kv_heads=1, head_dim=8,
                                       q_heads=4, window_tokens=4)),
              moe=None, default_format="bf16", stated_variants=(),
              source="tests/test_mutants_prefill.py", as_of="2026-12-02", tied_embeddings=False)


def _close(got: object, want: list[float]) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=1e-12)


def test_attended_pairs_by_hand() -> None:
    # no window: L^2 / 2 = [0.5, 5000, 500000]
    _close(attended_pairs([1.0, 100.0, 1000.0]), [0.5, 5000.0, 500000.0])
    _close(attended_pairs([100.0], 0), [5000.0])
    # window 256: 100 -> 5000; 256 -> 32768; 1000 -> 256^2 / 2 + 744 x 256 = 32768 + 190464
    _close(attended_pairs([100.0, 256.0, 1000.0], 256), [5000.0, 32768.0, 223232.0])
    # window 1: 100 tokens attend 1/2 + 99 x 1 = 99.5 pairs; 1 token 0.5
    _close(attended_pairs([1.0, 100.0], 1), [0.5, 99.5])
    # window 2 at 3 tokens: 2 + 1 x 2 = 4 (not 4.5 = 3^2 / 2)
    _close(attended_pairs([3.0], 2), [4.0])
    assert attended_pairs(10.0).dtype == np.float64


def test_prefill_flops_chapter_count() -> None:
    pf = prefill_flops(MODEL, [10.0, 2.0])
    # linear 2 x 1e9 x L = [2e10, 4e9]
    _close(pf.linear_flops, [2e10, 4e9])
    # full: 4 x 2 layers x 4 x 8 = 256 per pair, L^2/2 = [50, 2] -> [12800, 512];
    # sliding (w 4): 4 x 1 x 4 x 8 = 128 per pair, pairs [8 + 6 x 4 = 32, 2] -> [4096, 256];
    # the linear layer adds none -> [16896, 768]
    _close(pf.attention_flops, [16896.0, 768.0])
    _close(pf.total_flops, [2e10 + 16896.0, 4e9 + 768.0])
    _close(pf.prompt_tokens, [10.0, 2.0])
    assert pf.head_flops == 0.0
    # one token is a prompt: 2e9 linear, 0.5 pairs x (256 + 128) = 192 attention
    one = prefill_flops(MODEL, 1)
    _close(one.linear_flops, [2e9])
    _close(one.attention_flops, [192.0])


def test_prefill_flops_by_operator() -> None:
    pf = prefill_flops(MODEL, [10.0], by_operator=True)
    # head 2 x 0.01e9 = 2e7; body 1 - 0.01 - 0.01 = 0.98 B: 2 x 0.98e9 x 10 + 2e7 = 1.962e10
    _close(pf.linear_flops, [1.962e10])
    assert float(pf.head_flops) == pytest.approx(2e7)
    _close(pf.attention_flops, [16896.0])
    # what a cached prefix of this length saves: all but the head, 1.96e10
    part = pf.per_token_part()
    _close(part.linear_flops, [1.96e10])
    _close(part.attention_flops, [16896.0])
    _close(part.prompt_tokens, [10.0])
    assert part.head_flops == 0.0
    assert part.linear_flops.dtype == np.float64


@pytest.mark.parametrize("bad", [0.0, -3.0, [5.0, 0.0]])
def test_prefill_flops_refuses_empty_prompts(bad: object) -> None:
    with pytest.raises(InputError) as err:
        prefill_flops(MODEL, bad)  # type: ignore[arg-type]
    assert str(err.value) == "prompt length must be > 0 tokens"


def test_prefill_seconds_by_hand() -> None:
    # 1e12 FLOP / (100e12 x 0.5) = 0.02 s, + 0.1 s overhead = 0.12 s
    _close(prefill_seconds(1e12, 100.0, 0.5, 0.1), [0.12])
    _close(prefill_seconds([1e12, 2e12], 100.0, 1.0), [0.01, 0.02])   # MFU 1 is allowed
    for mfu in (0.0, 1.5, -0.1):
        with pytest.raises(InputError) as err:
            prefill_seconds(1e12, 100.0, mfu)
        assert str(err.value) == f"MFU must be in (0, 1], got {mfu}"
    with pytest.raises(InputError) as err:
        prefill_seconds(1e12, 0.0, 0.5)
    assert str(err.value) == "TFLOP/s must be > 0, got 0.0"


PF = PrefillFlops(prompt_tokens=np.array([1000.0]), linear_flops=np.array([1e12]),
                  attention_flops=np.array([2e11]))


def test_prefill_by_parts_by_hand() -> None:
    # attention at MFU: (1e12 + 2e11) / (100e12 x 0.5) = 0.024 s
    _close(prefill_seconds_by_parts(PF, 100.0, 0.5), [0.024])
    _close(prefill_seconds_by_parts(PF, 100.0, 0.5, None, 0.5), [0.524])
    # attn_mfu 0.25: 1e12 / 5e13 = 0.02 + 2e11 / 2.5e13 = 0.008 -> 0.028 (+ 0.002 overhead)
    _close(prefill_seconds_by_parts(PF, 100.0, 0.5, 0.25), [0.028])
    _close(prefill_seconds_by_parts(PF, 100.0, 0.5, 0.25, 0.002), [0.030])
    _close(prefill_seconds_by_parts(PF, 100.0, 0.5, 1.0), [0.022])     # attn_mfu 1 allowed
    # MFU curve, m_half 250 at the prompt's 1000 tokens: 0.5 / (1 + 0.25^2.5)^0.4 =
    # 0.5 / 1.012377 = 0.493887: 1e12 / 4.93887e13 = 0.020248 + 0.008 = 0.028248
    at_1000 = 0.5 / (1 + 0.25 ** 2.5) ** 0.4
    _close(prefill_seconds_by_parts(PF, 100.0, 0.5, 0.25, half_tokens=250.0),
           [1e12 / (1e14 * at_1000) + 0.008])
    assert 1e12 / (1e14 * at_1000) + 0.008 == pytest.approx(0.028248, abs=1e-6)
    # the same over a pass of 250 tokens, the ridge: MFU 0.5 / 2^0.4 = 0.378929 ->
    # 0.026390 + 0.008 = 0.034390
    _close(prefill_seconds_by_parts(PF, 100.0, 0.5, 0.25, half_tokens=250.0,
                                    step_tokens=250.0), [1e12 * 2 ** 0.4 / 5e13 + 0.008])
    # curve with attention at MFU(m): 1.2e12 / (100e12 x 0.493887) = 0.024297
    _close(prefill_seconds_by_parts(PF, 100.0, 0.5, half_tokens=250.0),
           [1.2e12 / (1e14 * at_1000)])
    # step_tokens without a curve changes nothing
    _close(prefill_seconds_by_parts(PF, 100.0, 0.5, 0.25, step_tokens=10.0), [0.028])


def test_prefill_by_parts_refuses() -> None:
    for mfu in (0.0, 1.5):
        with pytest.raises(InputError) as err:
            prefill_seconds_by_parts(PF, 100.0, mfu)
        assert str(err.value) == f"MFU must be in (0, 1], got {mfu}"
    with pytest.raises(InputError) as err:
        prefill_seconds_by_parts(PF, -1.0, 0.5)
    assert str(err.value) == "TFLOP/s must be > 0, got -1.0"
    for attn in (0.0, 1.01):
        with pytest.raises(InputError) as err:
            prefill_seconds_by_parts(PF, 100.0, 0.5, attn)
        assert str(err.value) == f"attention MFU must be in (0, 1], got {attn}"


def test_step_mfu_by_hand() -> None:
    # plateau 0.7, m_half 128: the ridge 0.7 / 2^0.4 = 0.530501; 0.7 / (1 + (1/16)^2.5)^0.4 =
    # 0.699727
    _close(step_mfu([128.0, 2048.0], mfu=0.7, half_tokens=128.0),
           [0.7 / 2 ** 0.4, 0.7 / (1 + (128 / 2048) ** 2.5) ** 0.4])
    # no curve: the plateau, in the tokens' shape, even at 0 tokens
    out = step_mfu([0.0, 5.0, 9.0], mfu=0.7)
    _close(out, [0.7, 0.7, 0.7])
    assert out.shape == (3,) and out.dtype == np.float64
    # m_half 0.5 at one token: 0.6 / (1 + 0.5^2.5)^0.4 = 0.6 / 1.067278 = 0.562177
    _close(step_mfu(1.0, mfu=0.6, half_tokens=0.5), [0.6 / (1 + 0.5 ** 2.5) ** 0.4])
    assert float(step_mfu(1.0, mfu=0.6, half_tokens=0.5)) == pytest.approx(0.562177, abs=1e-6)


def test_step_mfu_refuses() -> None:
    with pytest.raises(InputError) as err:
        step_mfu(100.0, mfu=0.5, half_tokens=-1.0)
    assert str(err.value) == "half-efficiency tokens must be >= 0, got -1.0"
    for bad in (0.0, [10.0, -1.0]):
        with pytest.raises(InputError) as err:
            step_mfu(bad, mfu=0.5, half_tokens=128.0)
        assert str(err.value) == "tokens per step must be > 0"


def test_prefill_seconds_below_one_tflops_and_in_double() -> None:
    # 1e12 FLOP on 0.5 TFLOP/s at MFU 0.5: 1e12 / 2.5e11 = 4 s
    _close(prefill_seconds(1e12, 0.5, 0.5), [4.0])
    # float32 FLOPs (3e11 is 299999985664 in float32) divided in double:
    # 299999985664 / (165.2e12 x 0.3) = 6.05326847587e-3 s (in float32: 6.05326844e-3)
    f = np.float32([3e11])
    assert float(prefill_seconds(f, 165.2, 0.3)[0]) == float(f[0]) / (165.2 * 1e12 * 0.3)


def test_prefill_flops_shapes_and_layer_kinds() -> None:
    # whole token counts in: the prompt comes back as float64 tokens
    pf = prefill_flops(MODEL, [10, 2])
    assert pf.prompt_tokens.dtype == np.float64
    _close(pf.prompt_tokens, [10.0, 2.0])
    # linear-attention layers only: no attention FLOPs, one 0 per prompt
    linear_only = Model(key="lin", name="Lin", hf_repo="none/lin", params_total_b=1.0,
                        params_active_b=1.0, hidden=1000, vocab=10_000,
                        max_context_tokens=32768,
                        layer_groups=(LayerGroup(kind="linear", count=4, q_heads=4, head_dim=8,
                                                 state_bytes=1000.0),),
                        moe=None, default_format="bf16", stated_variants=(),
                        source="tests/test_mutants_prefill.py", as_of="2026-12-02")
    out = prefill_flops(linear_only, [10.0, 20.0])
    assert out.attention_flops.shape == (2,) and not out.attention_flops.any()
    # a full layer attends the whole prompt whatever its window field says:
    # 4 x 1 x 4 x 8 x 10^2 / 2 = 6,400 (a window of 4 would give 128 x 32 = 4,096)
    full_with_window = Model(key="fw", name="FW", hf_repo="none/fw", params_total_b=1.0,
                             params_active_b=1.0, hidden=1000, vocab=10_000,
                             max_context_tokens=32768,
                             layer_groups=(LayerGroup(kind="full", count=1, kv_heads=1,
                                                      head_dim=8, q_heads=4,
                                                      window_tokens=4),),
                             moe=None, default_format="bf16", stated_variants=(),
                             source="tests/test_mutants_prefill.py", as_of="2026-12-02")
    _close(prefill_flops(full_with_window, 10.0).attention_flops, [6400.0])


def test_attended_pairs_in_double_for_single_precision_prompts() -> None:
    # 1000.1 as float32 is 1000.0999755859375: its square over 2 in double is 500100.0 less a
    # hair (500,099.97558...); float32 arithmetic would round it to 24 bits
    L = np.float32([1000.1])
    assert float(attended_pairs(L)[0]) == float(L[0]) * float(L[0]) / 2.0


def test_prefill_by_parts_curve_and_peak_edges() -> None:
    # m_half 0.5 at 1000 tokens: MFU 0.5 / (1 + 0.0005^2.5)^0.4, 2.2e-9 below the plateau (the
    # check's rtol is 1e-12, so a curve left out is caught); (1e12 + 2e11) / (100e12 x that)
    want = 1.2e12 / (100e12 * 0.5 / (1 + 0.0005 ** 2.5) ** 0.4)
    assert want / 0.024 - 1 == pytest.approx(0.4 * 0.0005 ** 2.5, rel=1e-3)
    _close(prefill_seconds_by_parts(PF, 100.0, 0.5, half_tokens=0.5), [want])
    # 0.5 TFLOP/s is a (slow) device: 1.2e12 / (0.5e12 x 0.5) = 4.8 s; 0 is refused
    _close(prefill_seconds_by_parts(PF, 0.5, 0.5), [4.8])
    with pytest.raises(InputError) as err:
        prefill_seconds_by_parts(PF, 0.0, 0.5)
    assert str(err.value) == "TFLOP/s must be > 0, got 0.0"
