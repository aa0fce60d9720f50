"""Issue 31: a calibration fitted on two model sizes at once, the overhead / bandwidth split that
one model cannot identify (its note and its band), and the closed-loop TTFT bound."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

from capacity.cli.main import main
from capacity.fit.calibration import (
    Calibration,
    PointKind,
    apply,
    fit,
    predict_ms,
    split_extremes,
)
from capacity.fit.calibration_store import load, save
from capacity.fit.calibration_ttft import burst_batches, burst_ttft_bound_ms
from capacity.fit.measured import MeasuredPoint
from capacity.fit.uncertainty import band
from capacity.model.scenario import Scenario, evaluate, make_scenario

TRUTH = {"eta_bw": 0.6, "step_overhead_ms": 3.0, "eff": 0.3, "mfu": 0.45,
         "prefill_overhead_ms": 25.0, "seq_overhead_ms": 0.02}
GRID = [(c, p, 64) for p in (256, 2048) for c in (1, 4, 16, 64)]
SMALL = make_scenario("llama-3.1-8b-bf16", "h100-sxm", step_method="operator")
BIG = make_scenario("qwen3-14b-bf16", "h100-sxm", step_method="operator")


def synth(base: Scenario, noise: float, seed: int) -> list[MeasuredPoint]:
    """Points measured on a deployment with the `TRUTH` knobs, seeded lognormal noise."""
    shape = [MeasuredPoint(concurrency=c, context_tokens=p + o, prompt_tokens=p,
                           output_tokens=o) for c, p, o in GRID]
    tpot, ttft = predict_ms(base.with_(**TRUTH), shape)
    a, b = np.exp(np.random.default_rng(seed).normal(0, noise, (2, len(shape))))
    return [MeasuredPoint(concurrency=s.concurrency, context_tokens=s.context_tokens,
                          prompt_tokens=s.prompt_tokens, output_tokens=s.output_tokens,
                          tpot_ms=float(t * x), ttft_ms=float(f * y))
            for s, t, f, x, y in zip(shape, tpot, ttft, a, b, strict=True)]


@pytest.fixture(scope="module")
def fits() -> tuple[Calibration, Calibration]:
    small, big = synth(SMALL, 0.01, 1), synth(BIG, 0.01, 2)
    return fit(small, SMALL, name="one"), fit(small, SMALL, name="two", others=[(BIG, big)])


@pytest.mark.slow
def test_two_sizes_separate_overhead_from_bandwidth(fits: tuple[Calibration, Calibration]
                                                    ) -> None:
    one, two = fits
    # one model: the note says so, and the ridge is kept for the band
    assert any(getattr(n, "code", "") == "split_unidentified" for n in one.notes)
    assert one.split_ridge_ms is not None and one.models == ()
    # two sizes (16 GB and 28 GB of weights): both knobs come back near the truth
    assert two.models == ("llama-3.1-8b-bf16", "qwen3-14b-bf16")
    assert two.eta_bw == pytest.approx(0.6, rel=0.05)
    assert two.step_overhead_ms == pytest.approx(3.0, abs=0.3)
    assert two.split_ridge_ms is None
    assert not any(getattr(n, "code", "") == "split_unidentified" for n in two.notes)
    assert "leave-one-model-out over 2 models" in two.holdout_method
    out = two.errors(PointKind.TPOT, "model_out")
    assert out.size == len(GRID) * 2 and float(np.median(np.abs(out))) < 0.03
    assert {p.model for p in two.points} == set(two.models)


def test_split_extremes_keep_the_sum_the_data_pinned() -> None:
    """Hand-computed: eta_bw 0.5, t0 2 ms, a weight read of 4 ms at peak: S = 2 + 4 / 0.5 =
    10 ms. Ends: eta_bw 1 with t0 = 10 - 4 = 6 ms; t0 0 with eta_bw = 4 / 10 = 0.4."""
    cal = Calibration(name="c", model="m", gpu="g", eta_bw=0.5, step_overhead_ms=2.0,
                      split_ridge_ms=4.0)
    fast_w, slow_w = split_extremes(cal)
    assert (fast_w.eta_bw, fast_w.step_overhead_ms) == pytest.approx((1.0, 6.0))
    assert (slow_w.eta_bw, slow_w.step_overhead_ms) == pytest.approx((0.4, 0.0))
    # a model reading twice the weights (w2 = 8 ms): 10 + 4 = 14 ms and 10 x 2 = 20 ms
    for end, step in ((fast_w, 14.0), (slow_w, 20.0)):
        assert end.eta_bw is not None and end.step_overhead_ms is not None
        assert 8.0 / end.eta_bw + end.step_overhead_ms == pytest.approx(step)
    assert split_extremes(Calibration(name="c", model="m", gpu="g", eta_bw=0.5,
                                      step_overhead_ms=2.0)) == ()


@pytest.mark.slow
def test_the_band_of_one_model_spans_the_other_size(fits: tuple[Calibration, Calibration]
                                                    ) -> None:
    one, _ = fits
    c = [1.0]
    wide = band(BIG, c, one)
    narrow = band(BIG, c, Calibration(**{**one.__dict__, "split_ridge_ms": None}))
    assert wide.step_ms[0][0] < narrow.step_ms[0][0] and wide.step_ms[2][0] > narrow.step_ms[2][0]
    ends = [float(evaluate(apply(e, BIG), c).decode.step_ms[0]) for e in split_extremes(one)]
    assert wide.step_ms[0][0] <= min(ends) and wide.step_ms[2][0] >= max(ends)
    truth = float(evaluate(BIG.with_(**TRUTH), c).decode.step_ms[0])
    assert wide.step_ms[0][0] <= truth <= wide.step_ms[2][0]


@pytest.mark.slow
def test_models_and_ridge_survive_saving(fits: tuple[Calibration, Calibration],
                                         tmp_path: Path) -> None:
    one, two = fits
    assert load(save(two, tmp_path / "two.toml")).models == two.models
    back = load(save(one, tmp_path / "one.toml"))
    assert back.split_ridge_ms == pytest.approx(one.split_ridge_ms)
    assert [p.model_out_ms for p in load(tmp_path / "two.toml").points] == [
        p.model_out_ms for p in two.points]


def test_burst_bound_hand_computed() -> None:
    # C = 4, P = 100, n_batch 2048: n_b = 4 + floor(400 / 2048) = 4;
    # 4 x 10 + 4 x 20 + 5 x 30 = 40 + 80 + 150 = 270 ms
    assert burst_batches(4, 100, 2048) == 4
    assert burst_ttft_bound_ms(concurrency=4, prompt_tokens=100, prefill_work_ms=10.0,
                               prefill_overhead_ms=20.0, step_ms=30.0,
                               batch_tokens=2048) == pytest.approx(270.0)
    # C = 8, P = 400: 3,200 prompt tokens cut once by 2,048 -> n_b = 9;
    # 8 x 40 + 9 x 5 + 10 x 12 = 320 + 45 + 120 = 485 ms
    assert burst_batches(8, 400, 2048) == 9
    assert burst_ttft_bound_ms(concurrency=8, prompt_tokens=400, prefill_work_ms=40.0,
                               prefill_overhead_ms=5.0, step_ms=12.0,
                               batch_tokens=2048) == pytest.approx(485.0)
    # C = 1: one prompt, its overhead, the step in flight and the step it finishes in
    assert burst_ttft_bound_ms(concurrency=1, prompt_tokens=100, prefill_work_ms=10.0,
                               prefill_overhead_ms=20.0, step_ms=30.0,
                               batch_tokens=2048) == pytest.approx(90.0)


def _csv(path: Path, base: Scenario, seed: int) -> Path:
    rows = ["concurrency,context_tokens,prompt_tokens,output_tokens,tpot_ms,ttft_ms"]
    rows += [f"{p.concurrency:g},{p.context_tokens},{p.prompt_tokens:g},{p.output_tokens:g},"
             f"{p.tpot_ms},{p.ttft_ms}" for p in synth(base, 0.01, seed)]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.slow
def test_calibrate_also_fits_two_models_and_bounds_closed_loop_ttft(tmp_path: Path) -> None:
    a, b = _csv(tmp_path / "a.csv", SMALL, 1), _csv(tmp_path / "b.csv", BIG, 2)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["calibrate", "--model", "llama-3.1-8b-bf16", "--gpu", "h100-sxm",
                     "--measured", str(a), "--also", f"qwen3-14b-bf16={b}",
                     "--save", str(tmp_path / "two.toml")])
    text = out.getvalue()
    assert code == 0
    assert "llama-3.1-8b-bf16 + qwen3-14b-bf16 on h100-sxm" in text
    assert "model held out" in text and "each model held out whole" in text
    assert "Closed-loop TTFT" in text and "the bound holds at" in text
    assert load(tmp_path / "two.toml").models == ("llama-3.1-8b-bf16", "qwen3-14b-bf16")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["calibrate", "--model", "llama-3.1-8b-bf16", "--gpu", "h100-sxm",
                     "--measured", str(a), "--also", "no-equals-sign"]) != 0


@pytest.mark.slow
def test_two_sizes_end_to_end_against_the_simulated_endpoint(tmp_path: Path) -> None:
    """Plumbing, not physics: two `capacity sim-server` processes (two model sizes on one GPU,
    on vLLM's typical knobs, in real time: a sped-up simulator's run is refused by calibrate),
    `capacity bench` against each, `calibrate --label ... --also` from the stored runs; the fit
    carries both models and holds each out whole."""
    import os
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    runs = tmp_path / "bench"
    for key, label in (("llama-3.1-8b-bf16", "small"), ("qwen3-14b-bf16", "big")):
        proc = subprocess.Popen(
            [sys.executable, "-m", "capacity", "sim-server", "--port", "0", "--model", key,
             "--gpu", "h100-sxm", "--ctx", "4096", "--typical", "vllm"], cwd=str(root),
            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(root)})
        try:
            assert proc.stderr is not None
            match = re.search(r"(http://127\.0\.0\.1:\d+/v1)", proc.stderr.readline())
            assert match
            with contextlib.redirect_stdout(io.StringIO()):
                assert main(["bench", "--base-url", match.group(1), "--concurrency", "1,4",
                             "--requests", "12", "--prompt-chars", "800", "--max-tokens", "32",
                             "--label", label, "--out", str(runs), "--gpu", "h100-sxm",
                             "--warmup", "0"]) == 0
        finally:
            proc.terminate()
            proc.wait(10)
            if proc.stderr is not None:
                proc.stderr.close()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["calibrate", "--model", "llama-3.1-8b-bf16", "--gpu", "h100-sxm",
                     "--ctx", "4096", "--label", "small", "--also", "qwen3-14b-bf16=big",
                     "--bench-dir", str(runs), "--save", str(tmp_path / "sim.toml")])
    assert code == 0, out.getvalue()
    cal = load(tmp_path / "sim.toml")
    assert cal.models == ("llama-3.1-8b-bf16", "qwen3-14b-bf16")
    assert {p.model for p in cal.points} == set(cal.models)
    assert cal.errors(PointKind.TPOT, "model_out").size == 4
    assert "leave-one-model-out over 2 models" in cal.holdout_method
