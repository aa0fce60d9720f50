"""F3-F8 and F10 beyond the chapter: properties and edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity.catalog.loader import Catalog
from capacity.errors import InputError
from capacity.model.memory import max_concurrency, memory_verdict, vram_budget
from capacity.model.moe import expected_experts_touched, weight_bytes_read
from capacity.model.prefill import attended_pairs, prefill_flops
from capacity.model.roofline import attainable_tflops, ridge_point
from capacity.model.scenario import Scenario, evaluate, make_scenario

SETUPS = st.sampled_from([
    ("qwen3.5-9b-awq", "rtx-4090"), ("llama-3.1-8b", "h100-sxm"), ("qwen3-30b-a3b", "l40s"),
    ("gemma-3-27b-fp8", "h200-sxm"), ("gpt-oss-20b", "rtx-5090"),
    ("llama-3.1-70b-awq", "a100-80gb-sxm"),
])


@settings(max_examples=30, deadline=None)
@given(setup=SETUPS, ctx=st.integers(256, 32768), eff=st.floats(0.05, 1.0))
def test_step_time_never_falls_as_concurrency_rises(catalog: Catalog, setup: tuple[str, str],
                                                    ctx: int, eff: float) -> None:
    s = make_scenario(*setup, catalog=catalog, context_tokens=ctx, eff=eff)
    c = np.arange(1, 600)
    step = evaluate(s, c).decode.step_ms
    assert np.all(np.diff(step) >= -1e-12)


@settings(max_examples=30, deadline=None)
@given(setup=SETUPS, kv=st.sampled_from(["fp16", "fp8", "int4"]))
def test_c_vram_never_rises_as_context_rises(catalog: Catalog, setup: tuple[str, str],
                                              kv: str) -> None:
    s = make_scenario(*setup, catalog=catalog, kv_dtype=kv)
    ctx = np.geomspace(64, 32768, 60).round()
    c_vram = evaluate(s, [1], ctx).max_concurrency_vram
    assert np.all(np.diff(c_vram) <= 0)


@settings(max_examples=50, deadline=None)
@given(intensity=st.floats(1e-3, 1e5), tflops=st.floats(1, 5000), bw=st.floats(100, 10000))
def test_attainable_never_exceeds_peak(intensity: float, tflops: float, bw: float) -> None:
    assert float(attainable_tflops(intensity, tflops, bw)) <= tflops
    assert float(attainable_tflops(ridge_point(tflops, bw), tflops, bw)) == pytest.approx(tflops)


def test_ridge_point_rtx_4090() -> None:
    assert ridge_point(165.2, 1008) == pytest.approx(163.9, abs=0.1)


def test_weights_do_not_fit_gives_shortfall_not_negative(catalog: Catalog) -> None:
    s = make_scenario("llama-3.1-70b", "rtx-4090", catalog=catalog)  # 141 GB of bf16 weights
    ev = evaluate(s, [1, 10])
    assert not ev.vram.weights_fit
    assert ev.vram.shortfall_bytes / 1e9 == pytest.approx(141.2 + 1.5 - 21.6)
    assert int(ev.max_concurrency_vram) == 0
    assert list(ev.verdict) == ["does_not_fit", "does_not_fit"]


def test_max_concurrency_zero_budget() -> None:
    assert max_concurrency(-5.0, [1.0, 2.0]).tolist() == [0, 0]
    assert max_concurrency(10.0, [3.0]).tolist() == [3]


def test_verdict_thresholds() -> None:
    v = memory_verdict([10.0, 17.0, 21.0], 20.0, headroom=0.2)
    assert v.tolist() == ["fits", "tight", "does_not_fit"]


@pytest.mark.parametrize("util", [0, -0.1, 1.01, 7])
def test_util_outside_unit_interval_is_rejected(util: float) -> None:
    with pytest.raises(InputError, match="util must be in"):
        vram_budget(vram_gb=24, util=util, weights_gb=5, overhead_gb=1)


def test_moe_reads_more_experts_as_batch_grows(catalog: Catalog) -> None:
    m = catalog.models["qwen3-30b-a3b"]
    assert float(expected_experts_touched(128, 8, 1)) == pytest.approx(8)
    assert float(expected_experts_touched(128, 8, 10_000)) == pytest.approx(128)
    w = 61e9
    read = weight_bytes_read(m, w, [1, 8, 64, 4096])
    assert np.all(np.diff(read) > 0)
    assert read[0] / w == pytest.approx(3.3 / 30.5, rel=0.02)  # ~active share at C = 1
    assert read[-1] == pytest.approx(w, rel=1e-3)


def test_moe_compute_uses_active_params(catalog: Catalog) -> None:
    moe = make_scenario("qwen3-30b-a3b", "h100-sxm", catalog=catalog)
    ev = evaluate(moe, [64])
    expected_ms = 2 * 3.3e9 * 64 / (989e12 * 1.0) * 1e3
    assert float(ev.decode.compute_ms[0]) == pytest.approx(expected_ms)


def test_prefill_attention_term(catalog: Catalog) -> None:
    m = catalog.models["llama-3.1-8b"]
    pf = prefill_flops(m, 8192)
    assert float(pf.linear_flops) == pytest.approx(2 * 8.03e9 * 8192)
    assert float(pf.attention_flops) == pytest.approx(2 * 32 * 32 * 128 * 8192**2)


def test_sliding_pairs() -> None:
    assert float(attended_pairs(100, 1000)) == 5000
    assert float(attended_pairs(3000, 1000)) == 1000 * 1000 / 2 + 2000 * 1000


def test_replicas_double_capacity_and_cost(seed: Scenario) -> None:
    two = seed.with_(n_gpus=2)
    one_ev, two_ev = evaluate(seed, [50]), evaluate(two, [100])
    assert int(two_ev.max_concurrency_vram) == 2 * int(one_ev.max_concurrency_vram)
    assert float(two_ev.decode.step_ms[0]) == pytest.approx(float(one_ev.decode.step_ms[0]))
    assert float(two_ev.cost_per_mtok[0]) == pytest.approx(float(one_ev.cost_per_mtok[0]))


def test_tp_splits_weights_and_adds_communication(catalog: Catalog) -> None:
    tp2 = make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog, n_gpus=2, tp=2)
    ev = evaluate(tp2, [50])
    assert tp2.weights_per_gpu_gb == pytest.approx(2.85)
    assert float(ev.decode.comm_ms[0]) > 0
    assert ev.vram.nccl_bytes > 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"tp": 3, "n_gpus": 3}, "does not divide", id="tp-heads"),
        pytest.param({"tp": 2, "n_gpus": 3}, "does not divide 3 GPUs", id="tp-gpus"),
        pytest.param({"util": 1.5}, "util must be in", id="util"),
        pytest.param({"vram_gb": -1}, "VRAM must be > 0", id="vram"),
        pytest.param({"context_tokens": 10**6}, "exceeds", id="long-context"),
        pytest.param({"eff": 2.0}, "<= 1", id="eff"),
        pytest.param({"prompt_tokens": 9000}, "exceeds the context", id="prompt"),
        pytest.param({"overhead_gb": -1}, "overhead must be >= 0", id="overhead"),
    ],
)
def test_bad_scenarios_are_rejected(catalog: Catalog, kwargs: dict[str, object],
                                    message: str) -> None:
    with pytest.raises(InputError, match=message):
        make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog, **kwargs)  # type: ignore[arg-type]


def test_long_context_allowed_with_warning(catalog: Catalog) -> None:
    s = make_scenario("mistral-7b-v0.3", "h100-sxm", catalog=catalog, context_tokens=65536,
                      allow_long_context=True)
    assert s.warnings and "exceeds" in s.warnings[0]


def test_currency_conversion_of_catalog_price(catalog: Catalog) -> None:
    s = make_scenario(catalog=catalog, currency="USD", cny_per_usd=8.0)
    assert s.price_per_hour == pytest.approx(0.25)


def test_grid_broadcasts(seed: Scenario) -> None:
    c = np.arange(1, 513, dtype=float)[:, None]
    ctx = np.geomspace(512, 131072, 64).round()[None, :]
    ev = evaluate(seed.with_(context_tokens=131072), c, ctx)
    assert ev.decode.step_ms.shape == (512, 64)
    assert ev.verdict.shape == (512, 64)
    assert ev.max_concurrency_vram.shape == (1, 64)
