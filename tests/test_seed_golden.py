"""Golden tests: every number of the chapter's worked example (docs/method.md), at its rounding.

Source of every expected value: the chapter's worked example, restated in docs/method.md.
"""

from __future__ import annotations

import pytest

from capacity.model.cost import cost_per_mtok
from capacity.model.fixes import suggest_fixes
from capacity.model.scenario import Scenario, capacity_table, evaluate
from capacity.units import GB, KIB


def test_kv_per_token_is_32_kib(seed: Scenario) -> None:
    ev = evaluate(seed)
    assert ev.kv_token.bytes_per_token == 32 * KIB


def test_kv_per_request_at_8k(seed: Scenario) -> None:
    ev = evaluate(seed)
    assert float(ev.kv_request.exact_bytes) == 268_435_456
    assert round(float(ev.kv_request.exact_bytes) / GB, 2) == 0.27


def test_kv_budget_and_c_vram(seed: Scenario) -> None:
    ev = evaluate(seed)
    assert ev.vram.kv_budget_bytes / GB == pytest.approx(14.4)  # 24 x 0.9 - 5.7 - 1.5
    assert int(ev.max_concurrency_vram) == 53


@pytest.mark.parametrize(
    ("c", "bandwidth_ms", "compute_ms", "tok_s"),
    [
        pytest.param(1, 5.92, 0.11, 169, id="C=1"),
        pytest.param(50, 18.97, 5.45, 53, id="C=50"),
        pytest.param(100, 32.28, 10.9, 31, id="C=100"),
    ],
)
def test_step_time_terms(seed: Scenario, c: int, bandwidth_ms: float, compute_ms: float,
                         tok_s: float) -> None:
    ev = evaluate(seed, [c])
    assert round(float(ev.decode.bandwidth_ms[0]), 2) == pytest.approx(bandwidth_ms, abs=0.011)
    digits = 2 if compute_ms < 10 else 1
    assert round(float(ev.decode.compute_ms[0]), digits) == compute_ms
    assert ev.decode.bound[0] == "bandwidth"
    assert round(float(ev.decode.tok_s_per_request[0])) == tok_s


def test_seed_bandwidth_term_at_100_is_32_2_rounded(seed: Scenario) -> None:
    # The chapter prints 32.2 ms; the exact value is 32.28 ms (the chapter's table: "32.28 computed exactly").
    ev = evaluate(seed, [100])
    assert float(ev.decode.bandwidth_ms[0]) == pytest.approx(32.285, abs=0.001)


def test_kv_of_50_requests_is_more_than_twice_the_weights(seed: Scenario) -> None:
    ev = evaluate(seed, [50])
    kv = float(ev.kv_total_bytes[0])
    assert kv / GB == pytest.approx(13.5, abs=0.1)  # seed: 50 x 0.27 = 13.5
    assert kv > 2 * seed.weights_gb * GB


def test_no_crossover_at_8k(seed: Scenario) -> None:
    assert evaluate(seed).crossover_concurrency is None


@pytest.mark.parametrize("ctx", [1024, 2048])
def test_crossover_appears_at_short_context(seed: Scenario, ctx: int) -> None:
    """F5 (docs/method.md): at 1-2K it appears at tens (low eff) to 100+ (eff = 1)."""
    at_full = evaluate(seed.with_(context_tokens=ctx)).crossover_concurrency
    at_low = evaluate(seed.with_(context_tokens=ctx, eff=0.3)).crossover_concurrency
    assert at_full is not None and at_low is not None
    assert 10 <= at_low < 100 and at_full > at_low
    if ctx == 2048:
        assert at_full >= 100


def test_ttft_8k_linear_is_about_3_s(seed: Scenario) -> None:
    ev = evaluate(seed)
    assert round(float(ev.ttft_linear_s), 3) == 2.975
    assert float(ev.ttft_s) > float(ev.ttft_linear_s)  # the attention term adds


@pytest.mark.parametrize(
    ("tok_s", "cny"),
    [pytest.param(1000, 0.56, id="1k"), pytest.param(3000, 0.19, id="3k"),
     pytest.param(5000, 0.11, id="5k")],
)
def test_cost_per_million_tokens(tok_s: float, cny: float) -> None:
    assert round(float(cost_per_mtok(2.0, 1, tok_s)), 2) == cny


def test_capacity_table(seed: Scenario) -> None:
    rows = {r.concurrency: r for r in capacity_table(seed)}
    r10, r50, r100 = rows[10], rows[50], rows[100]
    assert round(r10.kv_total_bytes / GB, 1) == 2.7
    assert round(r10.vram_subtotal_bytes / GB, 1) == 9.9
    assert r10.verdict == "fits"
    # The chapter multiplies the rounded 0.27 GB: 13.5 and 20.7; exact values are 13.42 and 20.62.
    assert r50.kv_total_bytes / GB == pytest.approx(13.5, abs=0.1)
    assert r50.vram_subtotal_bytes / GB == pytest.approx(20.7, abs=0.1)
    assert r50.verdict == "tight" and r50.usable_bytes / GB == pytest.approx(21.6)
    assert round(r50.ttft_linear_s) == 3
    assert round(r50.tok_s_per_request) == 53
    assert round(r50.aggregate_tok_s / 1000, 1) == 2.6
    assert r100.kv_total_bytes / GB == pytest.approx(27, abs=0.2)
    assert r100.vram_subtotal_bytes / GB == pytest.approx(34.2, abs=0.2)
    assert r100.verdict == "does_not_fit"


def test_100_at_8k_fixes_are_two_cards_fp8_kv_or_4k(seed: Scenario) -> None:
    fixes = {f.kind: f for f in suggest_fixes(seed, 100)}
    assert fixes["gpus"].value == 2
    assert fixes["kv_dtype"].value == "fp8"
    assert fixes["context"].value == 4096
    assert all(f.verdict != "does_not_fit" for f in fixes.values())


def test_fitting_setups_need_no_fix(seed: Scenario) -> None:
    assert suggest_fixes(seed, 50) == []
