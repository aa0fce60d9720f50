"""Calibration that learns the engine (F4b, F6b, docs/calibration.md): recovery of known knobs
from the simulated engine, held-out and cross-model error, identifiability, the decode step from
the median inter-token latency, the measurement plan, and old files.

The "engine" is `sim.virtual.run_virtual` (the simulated engine on its virtual clock) whose
physics is the library's own step with known knobs (`TRUTH`), measured on the cells of
`measurement_plan` with 1 % seeded lognormal noise: fit on model A, predict other cells of A
and of model B on the same GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from capacity.cli.main import main
from capacity.fit.calibration import (
    Calibration,
    apply,
    decode_measured_ms,
    fit,
    predict_ms,
)
from capacity.fit.calibration_problem import PINNED_RATIO
from capacity.fit.calibration_store import load, save
from capacity.fit.imports import parse_bench_summary
from capacity.fit.measured import MeasuredPoint
from capacity.fit.sweep import (
    DESIGN_KNOBS,
    OUTPUT_TOKENS,
    candidate_cells,
    design_knobs,
    measurement_plan,
)
from capacity.model.scenario import make_scenario
from capacity.sim.scheduler import SimConfig
from capacity.sim.virtual import Workload, run_virtual

GPU = "h100-sxm"
MODEL_A = "llama-3.1-8b-bf16"
MODEL_B = "qwen3-14b-bf16"
TRUTH: dict[str, float] = {
    "eta_bw": 0.78, "eta_kv": 0.62, "eff": 0.42, "attn_sat_batch": 5.0,
    "step_overhead_ms": 0.6, "seq_overhead_ms": 0.006, "mfu": 0.5, "attn_mfu": 0.3,
    "prefill_overhead_ms": 12.0}
NOISE = 0.01


def measure(model: str, cells: list[tuple[int, int]], seed: int = 0) -> list[MeasuredPoint]:
    """Each (prompt, concurrency) cell on the simulated engine with the `TRUTH` knobs: a
    closed loop of C clients, one request each, OUTPUT_TOKENS tokens; medians over requests."""
    rng = np.random.default_rng(seed)
    out = []
    for p, c in cells:
        s = make_scenario(model, GPU, context_tokens=p + OUTPUT_TOKENS, step_method="operator",
                          **TRUTH)  # type: ignore[arg-type]
        recs = run_virtual(s, Workload(prompt_tokens=p, output_tokens=OUTPUT_TOKENS,
                                       requests=c, clients=c), SimConfig(max_num_seqs=512))
        a, b = np.exp(rng.normal(0.0, NOISE, 2))
        out.append(MeasuredPoint(
            concurrency=c, context_tokens=p + OUTPUT_TOKENS, prompt_tokens=p,
            output_tokens=OUTPUT_TOKENS, tpot_ms=float(np.median([r["tpot_ms"] for r in recs])) * a,
            ttft_ms=float(np.median([r["ttft_ms"] for r in recs])) * b, source=f"{p}x{c}"))
    return out


@pytest.fixture(scope="module")
def calibrated() -> Calibration:
    base = make_scenario(MODEL_A, GPU, step_method="operator")
    cells = [(c.prompt_tokens, c.concurrency) for c in measurement_plan(base).cells]
    assert len(cells) <= 8  # the target: an 8-point (or smaller) sweep
    return fit(measure(MODEL_A, cells), base, name="sim-h100")


def _held_out(model: str, n: int = 14, seed: int = 3) -> list[tuple[int, int]]:
    grid = candidate_cells(make_scenario(model, GPU))
    rng = np.random.default_rng(seed)
    return [grid[int(i)] for i in rng.choice(len(grid), n, replace=False)]


def _tpot_errors(cal: Calibration, model: str) -> np.ndarray:
    pts = measure(model, _held_out(model), seed=5)
    tpot, _ = predict_ms(apply(cal, make_scenario(model, GPU)), pts)
    return np.abs(tpot / np.array([p.tpot_ms for p in pts]) - 1.0)


@pytest.mark.slow
def test_recovers_the_engines_knobs(calibrated: Calibration) -> None:
    cal = calibrated
    assert cal.step_method == "operator"
    for knob in ("eta_kv", "mfu", "attn_mfu"):
        assert getattr(cal, knob) == pytest.approx(TRUTH[knob], rel=0.06), knob
    # the simulated engine's step is the max of memory and compute (F4c's sharpness 0); the
    # plan's points are fitted as well by a smooth ridge, so the sharpness is the one whose
    # fits predict the levels they leave out best (calibration_ridge), and eff, the GEMMs'
    # efficiency where compute binds, trades off with it: 0.35 at sharpness 4 against the
    # true 0.42 at the max (before 2026-12-02 the max was kept when the points could not
    # tell, and eff came back at 0.42; on the real llama.cpp sweep that default missed levels
    # left out by 15%, the levels' choice by 4%)
    assert any(getattr(n, "code", "") == "ridge_fitted_levels" for n in cal.notes)
    assert cal.ridge_sharpness is not None and cal.ridge_sharpness >= 2.0
    assert 0.8 * TRUTH["eff"] <= (cal.eff or 0) <= 1.05 * TRUTH["eff"]
    assert cal.attn_sat_batch == pytest.approx(TRUTH["attn_sat_batch"], rel=0.1)
    # the per-sequence term is the other side of that trade-off: 0.0009 ms against 0.006
    assert (cal.seq_overhead_ms or 0) < 2 * TRUTH["seq_overhead_ms"]
    assert cal.prefill_overhead_ms == pytest.approx(TRUTH["prefill_overhead_ms"], abs=5.0)
    for knob in ("eta_kv", "eff", "attn_sat_batch", "seq_overhead_ms", "mfu"):
        assert cal.pinned(knob), knob
    # one model: the fixed overhead and the weights' bandwidth efficiency trade off (both are
    # constant in batch and context); the report says so, and their sum is what is pinned
    assert cal.pinned("eta_bw") is False
    w_ms = 16.06e9 / 3350e9 * 1e3  # Llama-3.1-8B bf16 weights over the H100's bandwidth
    truth = TRUTH["step_overhead_ms"] + w_ms / TRUTH["eta_bw"]
    assert (cal.step_overhead_ms or 0) + w_ms / (cal.eta_bw or 1) == pytest.approx(truth, rel=0.02)


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_held_out_cells_of_the_same_model_within_5_percent(calibrated: Calibration) -> None:
    err = _tpot_errors(calibrated, MODEL_A)
    assert float(np.median(err)) < 0.05 and float(np.max(err)) < 0.20


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_another_model_on_the_same_gpu_within_10_percent(calibrated: Calibration) -> None:
    err = _tpot_errors(calibrated, MODEL_B)
    assert float(np.median(err)) < 0.10


@pytest.mark.slow
def test_long_prompt_ttft_from_a_fit_at_4k_or_less() -> None:
    """TTFT at 8K, 16K, 32K from prompts of 4K or less (the issue's target: each within 10 %).
    Attention is a small share of a short prompt's prefill, so attn_mfu is not pinned (the
    report says so) but pulled off MFU as far as 4K shows (0.33 against the true 0.3 here)."""
    base = make_scenario(MODEL_A, GPU, step_method="operator")
    cal = fit(measure(MODEL_A, [(p, 1) for p in (512, 1024, 2048, 4096)]), base)
    assert cal.pinned("attn_mfu") is False and cal.pinned("mfu") is True
    long = measure(MODEL_A, [(p, 1) for p in (8192, 16384, 32768)], seed=9)
    _, ttft = predict_ms(apply(cal, make_scenario(MODEL_A, GPU)), long)
    err = ttft / np.array([p.ttft_ms for p in long]) - 1.0
    assert np.all(np.abs(err) < 0.10)
    assert np.all(err < 0)  # attention faster than measured: the optimistic side


@pytest.mark.slow
def test_identifiability_names_the_knobs_the_data_cannot_pin() -> None:
    base = make_scenario(MODEL_A, GPU, step_method="operator")
    cal = fit(measure(MODEL_A, [(1024, c) for c in (1, 4, 16)]), base)
    assert cal.pinned("eff") is False  # never compute-bound at these batches
    assert cal.pinned("attn_sat_batch") is False  # no long context at small batch
    assert any(n.startswith("not pinned") and "eff" in n for n in cal.notes)
    ratios = dict(cal.identifiability)
    assert ratios["eff"] > PINNED_RATIO


@pytest.mark.slow
def test_decode_step_comes_from_the_median_inter_token_latency(
        calibrated: Calibration) -> None:
    """A llama.cpp-like engine: prompts of other requests stall decoding, so the mean TPOT is
    30 % above the step; the median inter-token gap is the step, and the fit is the one of
    the clean steps (the module's fixture, the same cells)."""
    base = make_scenario(MODEL_A, GPU, step_method="operator")
    cells = [(c.prompt_tokens, c.concurrency) for c in measurement_plan(base).cells]
    clean = measure(MODEL_A, cells)
    stalled = [MeasuredPoint(**{**p.__dict__, "tpot_ms": (p.tpot_ms or 0) * 1.3,
                                "itl_p50_ms": p.tpot_ms}) for p in clean]
    assert decode_measured_ms(stalled[0]) == clean[0].tpot_ms
    cal = fit(stalled, base)
    assert cal.eff == pytest.approx(calibrated.eff, rel=0.02)
    assert cal.ridge_sharpness == calibrated.ridge_sharpness
    assert any("inter-token latency" in n for n in cal.notes)
    # a median gap far above TPOT: chunks carry several tokens, TPOT is the step
    chunky = MeasuredPoint(concurrency=1, context_tokens=100, tpot_ms=10.0, itl_p50_ms=40.0)
    assert decode_measured_ms(chunky) == 10.0


def test_bench_summary_itl_median_is_read(tmp_path: Path) -> None:
    text = ("concurrency,tpot_p50_ms,ttft_p50_ms,prompt_tokens_mean,output_tokens_mean,"
            "itl_p50_ms\n4,25.0,300,1000,64,20.5\n")
    f = tmp_path / "summary.csv"
    f.write_text(text)
    (p,) = parse_bench_summary(f, text)
    assert p.itl_p50_ms == 20.5 and decode_measured_ms(p) == 20.5


def test_bench_summary_p90s_are_read(tmp_path: Path) -> None:
    """The bench writes TTFT and TPOT p90 beside p50 and p99: `calibrate --label`'s
    closed-loop bounds check at p90 needs them (its table showed '-'; an audit, 2026-12-07)."""
    text = ("concurrency,tpot_p50_ms,ttft_p50_ms,prompt_tokens_mean,output_tokens_mean,"
            "ttft_p90_ms,tpot_p90_ms,ttft_p99_ms\n4,25.0,300,1000,64,1153.6,31.5,1400\n")
    f = tmp_path / "summary.csv"
    f.write_text(text)
    (p,) = parse_bench_summary(f, text)
    assert (p.ttft_p90_ms, p.tpot_p90_ms, p.ttft_p99_ms) == (1153.6, 31.5, 1400.0)


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_save_load_keeps_method_and_identifiability(calibrated: Calibration,
                                                    tmp_path: Path) -> None:
    path = save(calibrated, tmp_path / "sim.toml")
    back = load(path)
    assert back.step_method == "operator"
    assert back.identifiability == calibrated.identifiability
    assert back.attn_sat_batch == calibrated.attn_sat_batch
    s = apply(back, make_scenario(MODEL_B, GPU))
    assert s.step_method == "operator" and s.eta_kv == calibrated.eta_kv


LEGACY = Path(__file__).parent / "fixtures" / "calibrations" / "legacy-chapter-rtx-4090.toml"
"""A calibration saved before the operator method (the bundled RTX 4090 one until 2026-11-30):
no step_method, no identifiability."""


def test_old_calibration_files_load_as_the_chapter_method() -> None:
    cal = load(LEGACY)
    assert cal.step_method == "" and cal.identifiability == () and cal.pinned("eta_bw") is None
    s = apply(cal, make_scenario(step_method="operator"))
    assert s.step_method == "chapter"  # its knobs were fitted under the chapter's formula


def test_plan_has_batch_one_at_every_prompt_and_pins_the_floor_and_eff() -> None:
    plan = measurement_plan(make_scenario(MODEL_A, GPU))
    for _, levels in plan.sweeps():
        assert 1 in levels
    ratios = dict(plan.ratios)
    for knob in ("eff", "attn_sat_batch", "eta_kv", "seq_overhead_ms", "mfu"):
        assert ratios[knob] < PINNED_RATIO, knob
    pins = {c.pins for c in plan.cells}
    assert {"eff", "eta_kv"} <= pins


def test_the_plan_is_designed_at_the_fits_own_eff_prior() -> None:
    # the plan looks for compute where a fit on the GPU centres eff: 0.706 x the H100's
    # measured matmul ceiling (0.803) = 0.567, an RTX 4090's 0.706 (its spec sheet); the other
    # design knobs as they were
    h100 = design_knobs(make_scenario("llama-3.1-8b", "h100-sxm"))
    assert h100["eff"] == pytest.approx(0.706 * 0.803, rel=2e-3)
    assert design_knobs(make_scenario("llama-3.1-8b", "rtx-4090"))["eff"] == pytest.approx(0.706)
    assert {k: v for k, v in h100.items() if k != "eff"} == {
        k: v for k, v in DESIGN_KNOBS.items() if k != "eff"}


@pytest.mark.slow
def test_calibrate_plan_cli_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--plan", "--model", MODEL_A, "--gpu", GPU]) == 0
    text = capsys.readouterr().out
    assert "Measurement plan" in text and "--prompt-chars" in text and "attn_sat_batch" in text
    assert main(["calibrate", "--plan", "--model", MODEL_A, "--gpu", GPU,
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["output_tokens"] == OUTPUT_TOKENS and doc["sweeps"] and doc["cells"]
    assert set(doc["ratios"]) >= {"eta_bw", "eff", "attn_sat_batch", "mfu", "attn_mfu"}


def test_calibrate_plan_with_save_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--plan", "--model", MODEL_A, "--gpu", GPU, "--save", "x"]) == 2
    assert "--plan fits nothing" in capsys.readouterr().err


@pytest.mark.slow
def test_levels_far_beyond_memory_are_left_out_of_the_decode_fit() -> None:
    """The Measure preset runs every level at every prompt length: 512 requests of 32K do not
    fit on one H100 (C_vram about 12), the engine ran a smaller batch: not a decode point."""
    base = make_scenario(MODEL_A, GPU, step_method="operator")
    pts = measure(MODEL_A, [(256, 1), (256, 64), (8192, 1), (8192, 16)])
    crowded = MeasuredPoint(concurrency=512, context_tokens=32768 + OUTPUT_TOKENS,
                            prompt_tokens=32768, output_tokens=OUTPUT_TOKENS, tpot_ms=40.0)
    cal = fit([*pts, crowded], base)
    assert all(p.concurrency != 512 for p in cal.points)
    assert any("left out of the decode fit" in n for n in cal.notes)
