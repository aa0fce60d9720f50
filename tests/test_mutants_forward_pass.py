"""Tests written to kill mutmut survivors in capacity/model/forward_pass.py (issue 28): F6c's
slowdown of a pass and the CPU-offload stream per pass. Expected values by hand, in comments."""

from __future__ import annotations

import math

import pytest

from capacity.errors import InputError
from capacity.model.forward_pass import offload_ms, pass_slowdown, scenario_offload_ms
from capacity.model.scenario import make_scenario


def test_pass_slowdown_by_hand() -> None:
    # (1 + (m_half / m)^2.5)^0.4 - 1: 256 / 512 -> (1 + 0.5^2.5)^0.4 - 1 = 1.176777^0.4 - 1 =
    # 0.067278; at the ridge (one token at m_half 1) 2^0.4 - 1 = 0.319508; m_half 1 at 512:
    # (1 + 512^-2.5)^0.4 - 1 = 0.4 x 512^-2.5 = 6.74e-8 (far above the ridge: the plateau)
    assert pass_slowdown(512, 256) == pytest.approx(0.067278, abs=1e-6)
    assert pass_slowdown(1, 1) == pytest.approx(0.319508, abs=1e-6)
    assert pass_slowdown(512, 1) == pytest.approx(0.4 * 512 ** -2.5, rel=1e-6)
    assert pass_slowdown(0.5, 0.5) == pytest.approx(2 ** 0.4 - 1)  # fractions of a token count
    # below the ridge the read sets the time: m_half 1,000 at 10 tokens, (1 + 100^2.5)^0.4 - 1
    # = (1 + 1e5)^0.4 - 1 = 99.0 (about m_half / m - 1: the weights' read over 10 tokens' work)
    assert pass_slowdown(10, 1000) == pytest.approx((1 + 1e5) ** 0.4 - 1)
    assert pass_slowdown(10, 1000) == pytest.approx(99.0, abs=0.1)


def test_pass_slowdown_is_zero_without_a_curve_or_tokens() -> None:
    assert pass_slowdown(512, 0.0) == 0.0
    assert pass_slowdown(512, -5.0) == 0.0
    assert pass_slowdown(0, 256) == 0.0        # a pass with no tokens: no prompt work to stretch
    assert pass_slowdown(-1, 256) == 0.0


def test_offload_by_hand() -> None:
    # 4 GiB = 4 x 1.073741824e9 B over 63e9 B/s = 0.0681741 s = 68.1741 ms
    assert offload_ms(4.0, 63.0) == pytest.approx(4 * 1.073741824 / 63 * 1e3, rel=1e-12)
    assert offload_ms(0.0, 63.0) == 0.0
    # 1 GiB over 1 GB/s: 1.073741824 s
    assert offload_ms(1.0, 1.0) == pytest.approx(1073.741824, rel=1e-12)


@pytest.mark.parametrize(("gib", "gb_s", "message"), [
    (-1.0, 63.0, "CPU offload must be >= 0 GiB, got -1.0"),
    (math.nan, 63.0, "CPU offload must be >= 0 GiB, got nan"),
    (math.inf, 63.0, "CPU offload must be >= 0 GiB, got inf"),
    (1.0, 0.0, "host-link bandwidth must be > 0 GB/s, got 0.0"),
    (1.0, -2.0, "host-link bandwidth must be > 0 GB/s, got -2.0"),
    (1.0, math.nan, "host-link bandwidth must be > 0 GB/s, got nan"),
    (1.0, math.inf, "host-link bandwidth must be > 0 GB/s, got inf"),
])
def test_offload_refuses(gib: float, gb_s: float, message: str) -> None:
    with pytest.raises(InputError) as err:
        offload_ms(gib, gb_s)
    assert str(err.value) == message


def test_scenario_offload_over_the_gpus_host_link() -> None:
    # RTX 4090 (the default GPU): PCIe 4.0 x16, 31.5 GB/s (data/host_links.toml).
    # 3.7 GiB: 3.7 x 1.073741824 / 31.5 s = 0.126122 s = 126.122 ms
    s = make_scenario(weights_gb=4.0)
    assert scenario_offload_ms(s, 3.7) == pytest.approx(3.7 * 1.073741824 / 31.5 * 1e3,
                                                        rel=1e-12)
    # the weights one GPU holds: 4e9 B = 4e9 / 2^30 = 3.7253 GiB; exactly that much is allowed
    assert scenario_offload_ms(s, 4e9 / 2**30) == pytest.approx(4.0 / 31.5 * 1e3, rel=1e-12)
    with pytest.raises(InputError) as err:
        scenario_offload_ms(s, 3.8)
    assert str(err.value) == ("--cpu-offload-gb 3.8 GiB exceeds the 3.73 GiB of weights one "
                              "GPU holds")
    # TP 2 halves the weights per GPU: 2e9 B = 1.86 GiB
    s2 = make_scenario(weights_gb=4.0, n_gpus=2, tp=2)
    with pytest.raises(InputError, match="exceeds the 1.86 GiB"):
        scenario_offload_ms(s2, 1.9)


# -- one unified KV cache (llama.cpp) ---------------------------------------------------------


def test_dense_pairs_by_hand() -> None:
    from capacity.model.forward_pass import dense_pairs
    # five 359-token prompts (1,795 tokens) into an empty cache, ubatches of 512, pad 256:
    # 512 x 512 + 512 x 1,024 + 512 x 1,536 + 259 x 2,048 = 2,103,296
    assert dense_pairs(0, 1795, 512, 256) == 2_103_296
    # one prompt: 359 x pad(359) = 359 x 512 = 183,808; no tokens: none
    assert dense_pairs(0, 359, 512, 256) == 183_808
    assert dense_pairs(100, 0, 512, 256) == 0.0
    # two decode tokens after 600 cells: 2 x pad(602) = 2 x 768 = 1,536; pad 1: 2 x 602
    assert dense_pairs(600, 2, 512, 256) == 1_536
    assert dense_pairs(600, 2, 512, 1) == 1_204
    with pytest.raises(InputError, match="ubatch"):
        dense_pairs(0, 10, 0, 256)


def test_unified_kv_extra_pairs_by_hand() -> None:
    from capacity.model.forward_pass import unified_kv_extra_pairs
    # the burst: 2,103,296 - 5 x 183,808 = 1,184,256 pairs no prompt alone computes
    assert unified_kv_extra_pairs(chunks=[(0, 359)] * 5, ubatch_tokens=512,
                                  pad_tokens=256) == 1_184_256
    # one chunk alone (a prompt, or one prompt a pass beside decoding sequences): nothing
    assert unified_kv_extra_pairs(chunks=[(0, 359)], ubatch_tokens=512, pad_tokens=256) == 0.0
    assert unified_kv_extra_pairs(chunks=[], ubatch_tokens=512, pad_tokens=256) == 0.0
    # a 400-token prompt's second chunk of 100 after its first 300 and a new 300-token prompt:
    # 400 tokens after 300 cells, 400 x pad(700) = 400 x 768 = 307,200; alone 100 x pad(400)
    # = 51,200 and 300 x pad(300) = 153,600: 102,400 across them
    assert unified_kv_extra_pairs(chunks=[(300, 100), (0, 300)], ubatch_tokens=512,
                                  pad_tokens=256) == 102_400


def test_unified_kv_time_and_the_profiles_that_have_it() -> None:
    from capacity.catalog.engines import engine_profile
    from capacity.model.forward_pass import attention_pair_ms, unified_kv
    s = make_scenario(attn_mfu=0.5)
    # qwen3.5-9b: 8 full layers of 16 x 256 (the seed): 4 x 8 x 16 x 256 = 131,072 FLOP a
    # pair, / (F x 0.5) ms
    f = s.tflops * 1e12 * 0.5
    assert attention_pair_ms(s) == pytest.approx(131_072 / f * 1e3)
    ll = engine_profile("llamacpp")
    u = unified_kv(s, ll)
    assert u is not None and unified_kv(s, engine_profile("vllm")) is None
    assert u.extra_ms([(300, 100), (0, 300)]) == pytest.approx(102_400 * attention_pair_ms(s))
    assert u.extra_ms([(0, 300)]) == 0.0
    assert (ll.kv_attention, ll.ubatch_tokens, ll.kv_pad_tokens) == ("unified", 512, 256)
    assert all(engine_profile(e).kv_attention == "sequence" for e in ("vllm", "sglang",
                                                                       "chapter"))
