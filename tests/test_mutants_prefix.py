"""Tests written to kill mutmut survivors in capacity/model/prefix.py (issue 28): prefix caching
on the seed scenario (Qwen3.5-9B AWQ on an RTX 4090, 8K context), worked by hand from the
model's shape and the formulas of docs/method.md, "Prefix caching".

The seed model: P = 9e9 active parameters (tied embeddings: no lookup), one group of 8 full
attention layers of 16 query heads of 256 (4 x 8 x 16 x 256 = 131,072 FLOP per attended pair)
and 24 linear-attention layers (no attention FLOPs, no KV per token); KV 8 layers x 4 KV heads x
256 x 2 (K, V) x 2 B = 32,768 B per token, 268,435,456 B at 8,192 tokens; the KV budget of one
RTX 4090 is 14.4e9 B (floor(14.4e9 / 268435456) = 53 requests); 165.2 TFLOP/s, MFU 0.3.
Where a value rests on another module (the decode step, the capacity table, the verdict), the
test takes that module's figure and applies this module's formula to it by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from capacity.errors import InputError
from capacity.model.memory import memory_verdict
from capacity.model.prefix import (
    cached_prefill,
    cached_prefill_s,
    full_load_cost_per_mtok,
    full_load_rate_per_s,
    max_concurrency_shared_prefix,
    prefix_capacity_table,
    prefix_effect,
    shared_prefix_bytes,
)
from capacity.model.scenario import capacity_table, evaluate, make_scenario

SEED = make_scenario()
PAIR = 4 * 8 * 16 * 256            # 131,072 FLOP per attended (query, key) pair
KV_TOKEN = 8 * 4 * 256 * 2 * 2     # 32,768 B of KV per token
KV_8K = KV_TOKEN * 8192            # 268,435,456 B
BUDGET = 14.4e9
PEAK = 165.2e12 * 0.3              # FLOP/s at MFU 0.3


def _flops(L: float, c: float) -> float:
    """F(L) - F(c) of the seed model, by hand: 2 P (L - c) + 131072 (L^2 - c^2) / 2."""
    return 2 * 9e9 * (L - c) + PAIR * (L * L - c * c) / 2


def test_cached_prefill_without_a_cache_is_f6() -> None:
    pf = cached_prefill(SEED, 1000)
    # 2 x 9e9 x 1000 = 1.8e13 exactly; 131072 x 1000^2 / 2 = 6.5536e10 exactly
    assert float(pf.linear_flops) == 2.0 * 9.0 * 1e9 * 1000.0
    assert float(pf.attention_flops) == 131072.0 * 500000.0
    assert float(pf.prompt_tokens) == 1000.0
    assert pf.head_flops == 0.0


def test_one_cached_token_saves_one_tokens_flops() -> None:
    pf = cached_prefill(SEED, 1000, 1)
    # linear 1.8e13 - 1.8e10 = 1.7982e13; attention 6.5536e10 - 131072 x 0.5 = 65,535,934,464
    assert float(pf.linear_flops) == 1.7982e13
    assert float(pf.attention_flops) == 65_535_934_464.0
    assert float(pf.prompt_tokens) == 999.0


def test_cached_prefill_by_hand() -> None:
    pf = cached_prefill(SEED, [1000, 8192], [400, 2000])
    # linear 2 x 9e9 x [600, 6192] = [1.08e13, 1.11456e14];
    # attention 131072 x [(1e6 - 1.6e5) / 2, (8192^2 - 2000^2) / 2] = [5.505024e10, 4.1358987e12]
    np.testing.assert_allclose(pf.linear_flops, [1.08e13, 1.11456e14], rtol=1e-15)
    np.testing.assert_allclose(pf.attention_flops,
                               [PAIR * 420_000.0, PAIR * (8192**2 - 2000**2) / 2], rtol=1e-15)
    np.testing.assert_array_equal(pf.prompt_tokens, [600.0, 6192.0])


def test_cached_prefill_under_the_operator_count_keeps_the_head() -> None:
    # F6b: head = 2 x 1.01711872e9 = 2.03423744e9 FLOP once per prompt; body 9 - 1.01711872
    # = 7.98288128 B: F(1000) = 2 x 7.98288128e9 x 1000 + 2.03423744e9 = 1.596779679744e13;
    # the 400 cached tokens save 2 x 7.98288128e9 x 400 = 6.386305024e12 (not the head)
    s = make_scenario(step_method="operator")
    pf = cached_prefill(s, 1000, 400)
    assert float(pf.head_flops) == pytest.approx(2.03423744e9, rel=1e-12)
    assert float(pf.linear_flops) == pytest.approx(1.596779679744e13 - 6.386305024e12,
                                                   rel=1e-12)


@pytest.mark.parametrize(("L", "c"), [(100, -1), (100, 100), (100, 150), ([100, 100], [0, -5])])
def test_cached_prefill_refuses(L: object, c: object) -> None:
    with pytest.raises(InputError) as err:
        cached_prefill(SEED, L, c)  # type: ignore[arg-type]
    assert str(err.value) == ("cached tokens must be >= 0 and fewer than the prompt's tokens "
                              "(the last prompt token is always computed)")


def test_cached_prefill_seconds_by_hand() -> None:
    # (1.08e13 + 5.505024e10) / (165.2e12 x 0.3) = 0.219028 s
    assert float(cached_prefill_s(SEED, 1000, 400)) == pytest.approx(_flops(1000, 400) / PEAK,
                                                                     rel=1e-12)
    assert float(cached_prefill_s(SEED, 1000)) == pytest.approx(_flops(1000, 0) / PEAK,
                                                                rel=1e-12)
    # prefill overhead 50 ms; MFU curve m_half 250 over the 600 new tokens; the seed's AWQ
    # weights (5.7 GB for 9.0 B parameters: 0.6333 bytes each, bf16 arithmetic) on the RTX 4090
    # scale m_half by (165.2 x 0.6333 / 2 / 1008) / (989 / 3350) = 0.175793
    # (`gemm_read_scale`): 43.95 tokens, 0.3 / (1 + (43.95 / 600)^2.5)^0.4 = 0.299826 ->
    # 0.05 + 1.08550502e13 / (165.2e12 x 0.299826)
    s = make_scenario(prefill_overhead_ms=50.0, mfu_half_tokens=250.0)
    half = 250.0 * (165.2e12 / 1008e9) / (989e12 / 3350e9) * (5.7 / 9.0) / 2
    assert half == pytest.approx(43.95, abs=0.01)
    mfu = 0.3 / (1 + (half / 600) ** 2.5) ** 0.4
    assert mfu == pytest.approx(0.299826, abs=1e-6)
    want = 0.05 + _flops(1000, 400) / (165.2e12 * mfu)
    assert float(cached_prefill_s(s, 1000, 400)) == pytest.approx(want, rel=1e-12)


def test_shared_prefix_by_hand() -> None:
    # 2000 tokens x 32768 B = 65,536,000 B; none without a prefix
    assert float(shared_prefix_bytes(SEED, 2000)) == 65_536_000.0
    assert float(shared_prefix_bytes(SEED, 0)) == 0.0
    # two replicas of one GPU each: floor((14.4e9 - 65.536e6) / (268435456 - 65.536e6))
    # = floor(14,334,464,000 / 202,899,456) = floor(70.65) = 70 per replica -> 140
    s2 = make_scenario(n_gpus=2)
    out = max_concurrency_shared_prefix(s2, 2000)
    assert int(out) == 140 and out.dtype == np.int64
    assert int(max_concurrency_shared_prefix(SEED, 2000)) == 70
    # no prefix: floor(14.4e9 / 268435456) = 53 per replica
    assert int(max_concurrency_shared_prefix(s2, 0)) == 106


def test_full_load_rate_and_cost() -> None:
    # two replicas; slots 10 per replica: the step of 2 x 10 = 20 sequences (F4, from the
    # decode step of evaluate) -> rate = 2 / (prefill + (200 - 1) x step / 10)
    s2 = make_scenario(n_gpus=2)
    step_s = float(evaluate(s2, [20]).decode.step_ms[0]) / 1e3
    rate = full_load_rate_per_s(s2, prefill_s=np.array([1.0, 0.5]), output_tokens=200,
                                slots=10)
    np.testing.assert_allclose(rate, [2 / (1.0 + 199 * step_s / 10),
                                      2 / (0.5 + 199 * step_s / 10)], rtol=1e-12)
    # F7: price 2.0 per GPU-hour x 2 GPUs / (rate x 200 tok x 3600 s) x 1e6
    cost = full_load_cost_per_mtok(s2, prefill_s=np.array([1.0, 0.5]), output_tokens=200,
                                   slots=10)
    np.testing.assert_allclose(cost, 2.0 * 2 / (rate * 200 * 3600.0) * 1e6, rtol=1e-12)
    # one slot is enough: the step of 2 sequences
    one_step_s = float(evaluate(s2, [2]).decode.step_ms[0]) / 1e3
    one = full_load_rate_per_s(s2, prefill_s=1.0, output_tokens=3, slots=1)
    assert float(one) == pytest.approx(2 / (1.0 + 2 * one_step_s), rel=1e-12)
    with pytest.raises(InputError) as err:
        full_load_rate_per_s(s2, prefill_s=1.0, output_tokens=3, slots=0)
    assert str(err.value) == "no request fits in memory (0 slots)"


def _full_and_hit(s, prefix: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    return float(cached_prefill_s(s, s.prompt)), float(cached_prefill_s(s, s.prompt, prefix))


def test_prefix_effect_by_hand() -> None:
    e = prefix_effect(SEED, 2000, 0.5)
    full, hit = _full_and_hit(SEED, 2000)
    # full: (1.47456e14 + 131072 x 8192^2 / 2) / 4.956e13 = 3.0640 s; hit: F(8192) - F(2000)
    assert full == pytest.approx(_flops(8192, 0) / PEAK, rel=1e-12)
    assert hit == pytest.approx(_flops(8192, 2000) / PEAK, rel=1e-12)
    assert e.prefix_tokens == 2000 and e.share == 0.5
    assert e.ttft_s[0] == pytest.approx(full, rel=1e-12)
    assert e.ttft_s[1] == pytest.approx(0.5 * hit + 0.5 * full, rel=1e-12)
    # C_vram: without 53; with: floor((14.4e9 - 65.536e6) / (268435456 - 0.5 x 65.536e6))
    # = floor(14,334,464,000 / 235,667,456) = floor(60.8) = 60
    assert e.c_vram == (53, 60)
    costs = evaluate(SEED, [53, 60]).cost_per_mtok
    assert e.cost_per_mtok == pytest.approx((float(costs[0]), float(costs[1])), rel=1e-12)


def test_prefix_effect_share_edges() -> None:
    # share 0 with a long prefix (8000 tokens, 262,144,000 B): nothing held once, the budget
    # stays whole: floor(14.4e9 / 268435456) = 53 (with the prefix taken out it would be 52)
    e = prefix_effect(SEED, 8000, 0.0)
    assert e.c_vram == (53, 53)
    assert e.ttft_s[1] == pytest.approx(e.ttft_s[0], rel=1e-12)
    # share 1: every request holds only the rest: floor((14.4e9 - 65.536e6) / 202,899,456) = 70
    e = prefix_effect(SEED, 2000, 1.0)
    assert e.c_vram == (53, 70)
    _, hit = _full_and_hit(SEED, 2000)
    assert e.ttft_s[1] == pytest.approx(hit, rel=1e-12)
    for bad in (-0.1, 1.5):
        with pytest.raises(InputError) as err:
            prefix_effect(SEED, 2000, bad)
        assert str(err.value) == f"prefix share is a fraction of requests in [0, 1], got {bad}"


def test_prefix_effect_caps_the_prefix() -> None:
    # no prefix: p 0 and nothing changes
    e = prefix_effect(SEED, 0, 1.0)
    assert e.prefix_tokens == 0 and e.c_vram == (53, 53)
    assert e.ttft_s[1] == pytest.approx(e.ttft_s[0], rel=1e-12)
    # one token: p 1, the hit prefill F(8192) - F(1)
    e = prefix_effect(SEED, 1, 1.0)
    assert e.prefix_tokens == 1
    assert e.ttft_s[1] == pytest.approx(_flops(8192, 1) / PEAK, rel=1e-12)
    # at most the prompt less one token: 8191 at a full-context prompt, 3999 at a 4000-token one
    assert prefix_effect(SEED, 10**6, 1.0).prefix_tokens == 8191
    short = make_scenario(prompt_tokens=4000)
    assert prefix_effect(short, 10**6, 1.0).prefix_tokens == 3999


def test_prefix_capacity_table_by_hand() -> None:
    rows = [(4, 8192), (0, 8192)]
    plain = capacity_table(SEED, rows)
    table = prefix_capacity_table(SEED, rows, 2000, 0.5)
    full, hit = _full_and_hit(SEED, 2000)
    ratio = (0.5 * hit + 0.5 * full) / full
    # 4 requests on one replica: KV 4 x 268435456 - 0.5 x 4 x 65.536e6 + 65.536e6
    # = 1,073,741,824 - 131,072,000 + 65,536,000 = 1,008,205,824 B
    r, p = table[0], plain[0]
    assert r.kv_total_bytes == 1_008_205_824.0
    assert r.vram_subtotal_bytes == pytest.approx(p.vram_subtotal_bytes - 65_536_000.0,
                                                  rel=1e-15)
    assert r.verdict == memory_verdict(r.vram_subtotal_bytes, p.usable_bytes, SEED.headroom)
    assert r.ttft_s == pytest.approx(p.ttft_s * ratio, rel=1e-12)
    assert r.tpot_ms == p.tpot_ms and r.concurrency == 4
    # no request: nothing held, the row's memory as it was
    assert table[1].kv_total_bytes == plain[1].kv_total_bytes == 0.0
    assert table[1].vram_subtotal_bytes == plain[1].vram_subtotal_bytes


def test_prefix_capacity_table_edges() -> None:
    rows = [(10, 8192)]
    plain = capacity_table(SEED, rows)
    # no share, no prefix, no rows: the table as it is
    assert prefix_capacity_table(SEED, rows, 2000, 0.0) == plain
    assert prefix_capacity_table(SEED, rows, 0, 0.5) == plain
    assert prefix_capacity_table(SEED, [], 2000, 0.5) == []
    # share 1 and a one-token prefix (32,768 B): 10 x 268435456 - 10 x 32768 + 32768
    one = prefix_capacity_table(SEED, rows, 1, 1.0)
    assert one[0].kv_total_bytes == 10 * 268435456 - 9 * 32768
    # the prefix capped at the prompt less one (8191 tokens, 268,402,688 B), share 1:
    # 10 x 268435456 - 10 x 268402688 + 268402688 = 268,730,368 B
    capped = prefix_capacity_table(SEED, rows, 10**6, 1.0)
    assert capped[0].kv_total_bytes == 268_730_368.0
    short = make_scenario(prompt_tokens=4000)
    # 3999 tokens x 32768 = 131,039,232 B; 10 requests at 8K: 10 x 268435456 - 9 x 131039232
    assert prefix_capacity_table(short, rows, 10**6, 1.0)[0].kv_total_bytes == (
        10 * 268435456 - 9 * 131_039_232)
    with pytest.raises(InputError) as err:
        prefix_capacity_table(SEED, rows, 2000, 1.5)
    assert str(err.value) == "prefix share is a fraction of requests in [0, 1], got 1.5"


def test_prefix_capacity_table_two_replicas() -> None:
    # 10 requests over 2 replicas: ceil(10 / 2) = 5 per replica, share 1, prefix 2000:
    # per GPU 5 x 268435456 - 5 x 65.536e6 + 65.536e6 = 1,080,049,280 B
    s2 = make_scenario(n_gpus=2)
    t = prefix_capacity_table(s2, [(10, 8192)], 2000, 1.0)
    assert t[0].kv_total_bytes == 5 * 268435456 - 4 * 65_536_000
    assert math.ceil(10 / 2) == 5


def test_full_load_rate_in_double_for_single_precision_prefills() -> None:
    # 1.1 s as float32 is 1.100000023841858 s; the rate 2 / (that + 199 x step / 10) in double
    s2 = make_scenario(n_gpus=2)
    step_s = float(evaluate(s2, [20]).decode.step_ms[0]) / 1e3
    p = np.float32([1.1])
    rate = full_load_rate_per_s(s2, prefill_s=p, output_tokens=200, slots=10)
    assert float(rate[0]) == 2 / (float(p[0]) + (200 - 1) * step_s / 10)


def test_prefix_effect_over_two_replicas() -> None:
    # per replica: without 53, with floor(14,334,464,000 / 202,899,456) = 70 (share 1);
    # the deployment's two replicas: 106 and 140 requests
    e = prefix_effect(make_scenario(n_gpus=2), 2000, 1.0)
    assert e.c_vram == (106, 140)
    assert all(type(c) is int for c in e.c_vram)


def test_prefix_effect_when_one_request_fits() -> None:
    # 300,000 tokens of context: 32768 x 300000 = 9.83e9 B a request, floor(14.4e9 / 9.83e9)
    # = 1 request; F7's cost is that of one sequence decoding, with and without (no prefix)
    s = make_scenario(context_tokens=300_000, allow_long_context=True)
    e = prefix_effect(s, 0, 0.0)
    assert e.c_vram == (1, 1)
    one = float(evaluate(s, [1]).cost_per_mtok[0])
    assert e.cost_per_mtok == pytest.approx((one, one), rel=1e-12)


def test_shared_prefix_of_mla_layers() -> None:
    # DeepSeek-V3: 61 MLA layers of one latent (512 + 64) in fp16, the same on every TP rank:
    # 61 x 576 x 2 = 70,272 B a token; 1000 tokens: 70,272,000 B held once
    s = make_scenario("deepseek-v3", "h100-sxm", n_gpus=8, tp=8)
    assert float(shared_prefix_bytes(s, 1000)) == 70_272_000.0


def test_prefix_capacity_table_recomputes_the_verdict() -> None:
    # 20 % headroom (the default) vs 50 %: usable 21.6e9 B. 40 requests at 8K with a 2000-token
    # prefix shared by all: the subtotal falls by 39 x 65.536e6 = 2.555904e9 B to 15.38e9 B;
    # x 1.5 = 23.07e9 > 21.6e9: 'tight' under 50 % (it would fit under 20 %: 18.46e9)
    s = make_scenario(headroom=0.5)
    plain = capacity_table(s, [(40, 8192), (60, 8192)])
    table = prefix_capacity_table(s, [(40, 8192), (60, 8192)], 2000, 1.0)
    assert table[0].vram_subtotal_bytes == pytest.approx(
        plain[0].vram_subtotal_bytes - 39 * 65_536_000, rel=1e-15)
    assert table[0].verdict == "tight"
    # 60 requests: the plain row does not fit (23.3e9 B); with the prefix held once
    # 23.3e9 - 59 x 65.536e6 = 19.44e9 B: 'tight'
    assert plain[1].verdict == "does_not_fit"
    assert table[1].verdict == "tight"
