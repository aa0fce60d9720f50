"""F4c (the ridge) and F4d (CUDA-graph and tile padding of the decode GEMMs), issue 25: every
expected value below is computed by hand in the comments, not read off the code."""

from __future__ import annotations

import math

import numpy as np
import pytest

from capacity.catalog.loader import Catalog
from capacity.errors import CatalogError, InputError
from capacity.fit.planning import ridge_edges
from capacity.fit.typical import parse_engines
from capacity.model.basis import CHAPTER_KNOBS, SPEC_KNOBS, BasisKind, kind_of_knobs, knobs_of
from capacity.model.padding import (
    cuda_graph_largest,
    cuda_graph_tokens,
    gemm_tokens,
    tile_tokens,
)
from capacity.model.roofline import StepModel, combine_step, ridge_ms
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.step_combine import check_ridge_sharpness
from capacity.report.bases import knobs_text

# -- F4c: the ridge -------------------------------------------------------------------------


def test_ridge_near_the_balance_is_slower_than_the_max() -> None:
    # sqrt(10^2 + 7.1^2) = sqrt(100 + 50.41) = sqrt(150.41) = 12.2642 ms, +22.6 % over 10
    out = float(ridge_ms(10.0, 7.1, 2.0))
    assert out == pytest.approx(12.2642, abs=1e-4)
    assert out / 10.0 - 1.0 == pytest.approx(0.2264, abs=1e-4)


def test_ridge_far_from_the_balance_is_the_max_within_a_percent() -> None:
    # sqrt(100 + 1) = 10.0499: 0.5 % over the max
    assert float(ridge_ms(10.0, 1.0, 2.0)) == pytest.approx(10.0499, abs=1e-4)
    # k = 4, t_comp = 5: (10^4 + 5^4)^(1/4) = 10625^(1/4) = 10.1527 (1.5 %)
    assert float(ridge_ms(10.0, 5.0, 4.0)) == pytest.approx(10.1527, abs=1e-4)


def test_ridge_limits_max_and_sum() -> None:
    a, b = np.array([10.0, 0.0, 3.0]), np.array([7.1, 0.0, 4.0])
    np.testing.assert_array_equal(ridge_ms(a, b, 0.0), [10.0, 0.0, 4.0])   # max
    np.testing.assert_array_equal(ridge_ms(a, b, math.inf), [10.0, 0.0, 4.0])
    np.testing.assert_allclose(ridge_ms(a, b, 1.0), [17.1, 0.0, 7.0])       # sum
    # equal terms: 2^(1/k) x the max; k = 2: 1.41421 x 5
    assert float(ridge_ms(5.0, 5.0, 2.0)) == pytest.approx(7.0711, abs=1e-4)


def test_ridge_sharpness_check() -> None:
    assert check_ridge_sharpness(0.0) is None and check_ridge_sharpness(1.0) is None
    assert check_ridge_sharpness(8.0) is None
    for bad in (0.5, -1.0, math.nan):
        assert check_ridge_sharpness(bad)
    with pytest.raises(InputError, match="ridge sharpness"):
        make_scenario(ridge_sharpness=0.5)


# -- F4d: CUDA-graph and tile padding -------------------------------------------------------


def test_cuda_graph_sizes_are_vllms() -> None:
    # vLLM: 1, 2, 4, 8, 16, ..., 248, 256, 272, ..., 512
    m = np.array([0.0, 1.0, 2.0, 3.0, 5.0, 50.0, 249.0, 256.0, 257.0, 300.0, 511.0, 512.0,
                  513.0, 600.0])
    want = [0.0, 1.0, 2.0, 4.0, 8.0, 56.0, 256.0, 256.0, 272.0, 304.0, 512.0, 512.0,
            513.0, 600.0]    # above the largest captured size: eager, unpadded
    np.testing.assert_array_equal(cuda_graph_tokens(m, 512.0), want)
    np.testing.assert_array_equal(cuda_graph_tokens(m, 0.0), m)        # no graphs
    # the largest captured size: range(256, max + 1, 16) -> 300 gives 288; 100 -> 96
    assert (cuda_graph_largest(300.0), cuda_graph_largest(100.0), cuda_graph_largest(3.0)) == (
        288.0, 96.0, 2.0)
    # 290 rounds to 304 > 288: eager at 290; 280 -> 288
    np.testing.assert_array_equal(cuda_graph_tokens([290.0, 280.0], 300.0), [290.0, 288.0])


def test_tile_quantisation() -> None:
    np.testing.assert_array_equal(tile_tokens([50.0, 64.0, 65.0, 0.0], 64.0),
                                  [64.0, 64.0, 128.0, 0.0])
    np.testing.assert_array_equal(tile_tokens([50.0], 1.0), [50.0])    # 1: none
    np.testing.assert_array_equal(tile_tokens([50.0], 0.0), [50.0])    # 0: none
    # 50 -> graph 56 -> 64-row tile 64; 24 -> graph 24 -> 16-row tile 32
    np.testing.assert_array_equal(
        gemm_tokens([50.0, 24.0], cuda_graph_max_tokens=512.0, gemm_tile_tokens=64.0),
        [64.0, 64.0])
    np.testing.assert_array_equal(
        gemm_tokens([50.0, 24.0], cuda_graph_max_tokens=512.0, gemm_tile_tokens=16.0),
        [64.0, 32.0])


# -- the step, by hand ----------------------------------------------------------------------
# W = 10 GB at 1000 GB/s: 10 ms. 2 x 7.1e9 x 50 FLOP at 100 TFLOP/s: 7.1 ms.

def _hand(**kw: object) -> StepModel:
    fields: dict[str, object] = {"weights_bytes": 10e9, "kv_request_bytes": 0.0,
                                 "bandwidth_gb_s": 1000.0, "tflops": 100.0,
                                 "params_active_b": 7.1, **kw}
    return StepModel(**fields)  # type: ignore[arg-type]


def test_chapter_step_with_the_ridge() -> None:
    sm = _hand(ridge_sharpness=2.0)
    b = np.array([50.0])
    assert float(sm.step_ms(b)[0]) == pytest.approx(12.2642, abs=1e-4)        # lean path
    p = sm.parts(b)
    assert float(p.step_ms[0]) == pytest.approx(12.2642, abs=1e-4)
    # the bandwidth and compute totals are unchanged; the ridge's 2.2642 ms is serial
    assert (float(p.bandwidth_ms[0]), float(p.compute_ms[0])) == pytest.approx((10.0, 7.1))
    assert float(p.serial_ms[0]) == pytest.approx(2.2642, abs=1e-4)
    # the default sharpness is today's max: 10 ms
    assert float(_hand().step_ms(b)[0]) == pytest.approx(10.0)


def test_chapter_ridge_takes_the_kv_read_into_the_memory_term() -> None:
    # KV 1e7 B a sequence x 50 = 5e8 B: 0.5 ms; sqrt(10.5^2 + 7.1^2) = sqrt(160.66) = 12.6752
    sm = _hand(ridge_sharpness=2.0, kv_request_bytes=1e7)
    assert float(sm.step_ms(np.array([50.0]))[0]) == pytest.approx(12.6752, abs=1e-4)


def test_operator_step_ridge_is_on_the_weight_gemms_only() -> None:
    # GEMMs sqrt(10^2 + 7.1^2) = 12.2642; attention max(0.5 ms KV, 0 FLOPs) = 0.5 -> 12.7642
    sm = _hand(ridge_sharpness=2.0, kv_request_bytes=1e7, method="operator")
    p = sm.parts(np.array([50.0]))
    assert float(p.step_ms[0]) == pytest.approx(12.7642, abs=1e-4)
    assert float(p.gemm_ms[0]) == pytest.approx(12.2642, abs=1e-4)
    assert float(p.attention_ms[0]) == pytest.approx(0.5)


def test_padding_grows_the_gemm_flops_only() -> None:
    sm = _hand(cuda_graph_max_tokens=512.0)
    d = sm.decode(np.array([50.0]))
    # 56 rows: 2 x 7.1e9 x 56 = 7.952e11 FLOP, 7.952 ms; weights still 10 GB, no KV
    assert float(d.flops[0]) == pytest.approx(7.952e11)
    assert float(d.compute_ms[0]) == pytest.approx(7.952)
    assert float(d.weight_read_bytes[0]) == 10e9
    assert float(d.step_ms[0]) == pytest.approx(10.0)          # the max: bandwidth binds
    # with the ridge: sqrt(100 + 7.952^2) = sqrt(163.2343) = 12.7763
    both = _hand(cuda_graph_max_tokens=512.0, ridge_sharpness=2.0)
    assert float(both.step_ms(np.array([50.0]))[0]) == pytest.approx(12.7763, abs=1e-4)


def test_a_tile_can_make_the_step_compute_bound() -> None:
    # 70 sequences: 9.94 ms of GEMMs, bandwidth binds at 10 ms; on 64-row tiles 128 rows:
    # 2 x 7.1e9 x 128 / 1e14 = 18.176 ms
    b = np.array([70.0])
    assert float(_hand().step_ms(b)[0]) == pytest.approx(10.0)
    tiled = _hand(gemm_tile_tokens=64.0)
    assert float(tiled.step_ms(b)[0]) == pytest.approx(18.176)
    assert float(tiled.parts(b).step_ms[0]) == pytest.approx(18.176)
    # the crossover moves down to where padded GEMMs first pass 10 ms: 64 rows is 9.088 ms,
    # so the first batch past 64 sequences (65 -> 128 rows)
    assert tiled.crossover_batch() == pytest.approx(65.0, abs=1.0)


def test_speculative_verify_rows_are_padded() -> None:
    # 20 sequences x (k + 1 = 3) = 60 rows -> graph 64: 2 x 7.1e9 x 64 = 9.088e11 FLOP
    sm = _hand(cuda_graph_max_tokens=512.0, verify_tokens=3.0)
    assert float(sm.flops(np.array([20.0]))[0]) == pytest.approx(9.088e11)


def test_combine_step_default_is_bit_identical_to_the_max() -> None:
    terms = {"weight_peak_ms": np.array([10.0, 3.0]), "kv_peak_ms": np.array([0.5, 0.2]),
             "gemm_peak_ms": np.array([7.1, 9.0]), "attention_peak_ms": np.array([0.1, 0.3]),
             "kv_request_peak_ms": np.array([0.01, 0.01]), "comm_ms": np.array([0.0, 0.2]),
             "batch": np.array([50.0, 90.0])}
    for method in ("chapter", "operator", "bound"):
        a = combine_step(method=method, **terms, eff=0.5, eta_bw=0.8)  # type: ignore[arg-type]
        b = combine_step(method=method, **terms, eff=0.5, eta_bw=0.8,  # type: ignore[arg-type]
                         ridge_sharpness=0.0)
        np.testing.assert_array_equal(a.step_ms, b.step_ms)
    # chapter: max((10 + 0.5) / 0.8, 7.1 / 0.5) = max(13.125, 14.2) = 14.2
    a = combine_step(method="chapter", **terms, eff=0.5, eta_bw=0.8)  # type: ignore[arg-type]
    assert float(a.step_ms[0]) == pytest.approx(14.2)


# -- scenarios, bases and surfaces ----------------------------------------------------------


def test_spec_sheet_stays_the_upper_bound(catalog: Catalog) -> None:
    s = make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog)
    spec = s.with_(**SPEC_KNOBS)
    C = np.array([1.0, 8.0, 24.0, 50.0, 100.0, 200.0])
    fast = evaluate(spec, C).decode.step_ms
    for knobs in ({"ridge_sharpness": 2.0}, {"cuda_graph_max_tokens": 512.0},
                  {"gemm_tile_tokens": 64.0},
                  {"ridge_sharpness": 1.0, "cuda_graph_max_tokens": 512.0,
                   "gemm_tile_tokens": 128.0, "eff": 0.3, "step_method": "operator"}):
        slow = evaluate(spec.with_(**knobs), C).decode.step_ms
        assert np.all(slow >= fast), knobs


def test_defaults_leave_the_seed_unchanged(catalog: Catalog) -> None:
    s = make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog)
    assert (s.ridge_sharpness, s.cuda_graph_max_tokens, s.gemm_tile_tokens) == (0.0, 0.0, 0.0)
    # the chapter's worked example at C = 50: bandwidth 18.97 ms binds (docs/method.md)
    assert float(evaluate(s, [50]).decode.step_ms[0]) == pytest.approx(18.97, abs=0.01)


def test_scenario_knobs_reach_the_step(catalog: Catalog) -> None:
    # the seed at C = 50 with eff 0.3: compute 5.45 / 0.3 = 18.17 ms against bandwidth
    # 18.97 ms; k = 2: sqrt(18.97^2 + 18.17^2) = sqrt(359.86 + 330.15) = 26.27 ms
    s = make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog, eff=0.3)
    d = evaluate(s.with_(ridge_sharpness=2.0), [50]).decode
    bw, cp = float(d.bandwidth_ms[0]), float(d.compute_ms[0])
    assert (bw, cp) == pytest.approx((18.97, 18.17), abs=0.02)
    assert float(d.step_ms[0]) == pytest.approx(26.27, abs=0.03)
    # graphs: 50 -> 56 rows, compute 18.17 x 56 / 50 = 20.35 ms binds over 18.97
    g = evaluate(s.with_(cuda_graph_max_tokens=512.0), [50]).decode
    assert float(g.step_ms[0]) == pytest.approx(20.35, abs=0.03)
    with pytest.raises(InputError, match="tile"):
        make_scenario(gemm_tile_tokens=-1.0)


def test_bases_carry_the_knobs() -> None:
    assert SPEC_KNOBS["ridge_sharpness"] == CHAPTER_KNOBS["ridge_sharpness"] == 0.0
    assert SPEC_KNOBS["cuda_graph_max_tokens"] == SPEC_KNOBS["gemm_tile_tokens"] == 0.0
    s = make_scenario()
    assert kind_of_knobs(knobs_of(s)) == BasisKind.CHAPTER
    assert kind_of_knobs(knobs_of(s.with_(ridge_sharpness=2.0))) == BasisKind.ENTERED
    assert "ridge sharpness 2" in knobs_text(s.with_(ridge_sharpness=2.0), "en")
    assert "512" in knobs_text(s.with_(cuda_graph_max_tokens=512.0), "zh")
    assert "ridge" not in knobs_text(s, "en")


def test_engines_file_knobs() -> None:
    def engines_text(extra: str) -> str:
        base = "\n".join(f"[e.{k}]\ntypical = 0.5\nlow = 0.5\nhigh = 0.5" for k in (
            "eta_bw", "eff", "mfu", "step_overhead_ms", "prefill_overhead_ms",
            "draft_overhead_ms", "verify_overhead_ms"))
        return '[e]\nname = "E"\nsource = "s"\nas_of = "2026"\n' + base + extra

    typ = parse_engines(engines_text(""))["e"]
    assert (typ.typical["ridge_sharpness"], typ.typical["cuda_graph_max_tokens"],
            typ.typical["gemm_tile_tokens"]) == (0.0, 0.0, 0.0)
    typ = parse_engines(engines_text(
        "\n[e.cuda_graph_max_tokens]\ntypical = 512.0\nlow = 512.0\nhigh = 512.0"))["e"]
    assert typ.typical["cuda_graph_max_tokens"] == 512.0
    with pytest.raises(CatalogError, match="ridge"):
        parse_engines(engines_text(
            "\n[e.ridge_sharpness]\ntypical = 0.5\nlow = 0.5\nhigh = 0.5"))
    # 0 is the max, the fast edge; of the others the smallest is the slow edge
    assert ridge_edges(0.0, 2.0, 4.0) == (2.0, 0.0)
    assert ridge_edges(2.0, 4.0) == (2.0, 4.0)
    assert ridge_edges(0.0, 0.0) == (0.0, 0.0)
