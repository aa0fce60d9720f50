"""Measured points on predicted curves: frames, ratios, saturation, filters and charts."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from capacity.bench.store import RunStore
from capacity.errors import InputError
from capacity.fit.calibration import Calibration, fit, predict_ms
from capacity.fit.measured import MeasuredPoint, run_scenario
from capacity.fit.overlay import (
    METRICS,
    Predicted,
    build_overlay,
    c_vram,
    compare_table,
    filter_runs,
    measured_frame,
    median_abs_error,
    points_from_summary,
    read_upload,
    saturation,
    typical_lengths,
)
from capacity.model.scenario import Scenario
from capacity.report.overlay_charts import overlay_chart, ratio_chart

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[1]
PROMPT, OUTPUT = 1000.0, 128.0


@pytest.fixture(scope="module")
def base() -> Scenario:
    return run_scenario("qwen3.5-9b-awq", "rtx-4090", prompt_tokens=PROMPT, output_tokens=OUTPUT)


def synthetic(s: Scenario, levels: tuple[float, ...], *, slow: float = 1.0
              ) -> list[MeasuredPoint]:
    """Points that are the prediction of `s` times `slow` (with a p90/p99 band)."""
    grid = [MeasuredPoint(concurrency=c, context_tokens=int(PROMPT + OUTPUT),
                          prompt_tokens=PROMPT, output_tokens=OUTPUT) for c in levels]
    step, ttft = predict_ms(s, grid)
    return [MeasuredPoint(concurrency=c, context_tokens=int(PROMPT + OUTPUT),
                          prompt_tokens=PROMPT, output_tokens=OUTPUT, tpot_ms=st * slow,
                          tpot_p90_ms=st * slow * 1.1, tpot_p99_ms=st * slow * 1.3,
                          ttft_ms=tt * slow, ttft_p90_ms=tt * slow * 1.2,
                          ttft_p99_ms=tt * slow * 1.5,
                          output_tok_s=c * OUTPUT * 1e3 / ((tt + (OUTPUT - 1) * st) * slow))
            for c, st, tt in zip(levels, step, ttft, strict=True)]


def test_run_scenario_uses_prompt_plus_output_as_context(base: Scenario) -> None:
    assert base.context_tokens == 1128 and base.prompt_tokens == 1000
    with pytest.raises(InputError, match="prompt tokens"):
        run_scenario("qwen3.5-9b-awq", "rtx-4090", prompt_tokens=0, output_tokens=1)


def test_points_that_are_the_prediction_have_ratio_one(base: Scenario) -> None:
    pts = synthetic(base, (1, 4, 16, 64))
    ov = build_overlay(pts, base, series="run", load="none")
    assert set(ov.predicted["series"]) == {Predicted.SPEC_SHEET} and ov.load == "none"
    assert set(ov.measured["metric"]) == set(METRICS)
    np.testing.assert_allclose(ov.ratios[f"ratio_{Predicted.SPEC_SHEET}"], 1.0, rtol=1e-9)
    assert median_abs_error(ov.ratios, Predicted.SPEC_SHEET, "tpot_ms") == pytest.approx(0.0, abs=1e-9)
    assert median_abs_error(ov.ratios, Predicted.CALIBRATED, "tpot_ms") is None
    assert ov.c_vram_spec == c_vram(base) and ov.c_vram_calibrated is None


def test_band_and_derived_metrics(base: Scenario) -> None:
    pts = synthetic(base, (2,))
    m = measured_frame(pts, "x").set_index("metric")
    assert m.loc["tok_s_per_request", "p50"] == pytest.approx(1e3 / pts[0].tpot_ms)  # type: ignore[operator]
    # tok/s band is the inverse of the TPOT band: p99 is the slowest request, the lowest tok/s
    assert m.loc["tok_s_per_request", "p99"] < m.loc["tok_s_per_request", "p90"]
    assert m.loc["ttft_ms", "p99"] == pytest.approx(pts[0].ttft_ms * 1.5)  # type: ignore[operator]
    assert math.isnan(m.loc["aggregate_tok_s", "p90"])


@pytest.mark.slow
def test_calibrated_curve_is_closer_than_the_spec_sheet(base: Scenario) -> None:
    truth = base.with_(eta_bw=0.7, step_overhead_ms=1.5, mfu=0.5, prefill_overhead_ms=20.0)
    pts = synthetic(truth, (1, 2, 8, 32, 64))
    cal = fit(pts, base, name="t")
    ov = build_overlay(pts, base, series="run", calibration=cal)
    assert set(ov.predicted["series"]) == {Predicted.SPEC_SHEET, Predicted.CALIBRATED, Predicted.ROOFLINE}
    spec_err = median_abs_error(ov.ratios, Predicted.SPEC_SHEET, "tpot_ms")
    cal_err = median_abs_error(ov.ratios, Predicted.CALIBRATED, "tpot_ms")
    assert spec_err is not None and cal_err is not None
    assert spec_err > 0.2 and cal_err < 0.02
    assert ov.calibration == "t"


def test_prediction_beyond_c_vram_is_capped(base: Scenario) -> None:
    cv = c_vram(base)
    pts = synthetic(base, (1.0, float(cv)))
    far = MeasuredPoint(concurrency=cv * 4.0, context_tokens=int(PROMPT + OUTPUT),
                        prompt_tokens=PROMPT, output_tokens=OUTPUT, tpot_ms=pts[1].tpot_ms,
                        output_tok_s=pts[1].output_tok_s)
    ov = build_overlay([*pts, far], base, series="run", load="none")
    r = ov.ratios[ov.ratios["metric"] == "aggregate_tok_s"].set_index("concurrency")
    assert r.loc[cv * 4.0, f"ratio_{Predicted.SPEC_SHEET}"] == pytest.approx(1.0)


@pytest.mark.parametrize("agg, failed, expect", [
    pytest.param([100, 390, 1500], [0, 0, 0], (None, ""), id="scales"),
    pytest.param([100, 390, 400], [0, 0, 0], (4.0, "plateau"), id="plateau"),
    pytest.param([100, 390, 1500], [0, 0, 3], (16.0, "errors"), id="errors")])
def test_saturation(agg: list[float], failed: list[int], expect: tuple[float | None, str]
                    ) -> None:
    df = pd.DataFrame({"concurrency": [1.0, 4.0, 16.0], "aggregate_tok_s": agg,
                       "requests_failed": failed})
    s = saturation(df, 53)
    assert (s.concurrency, s.kind) == expect
    assert s.ratio == (None if expect[0] is None else expect[0] / 53)


def summary_rows() -> pd.DataFrame:
    return pd.DataFrame({
        "run_id": ["r1"] * 3, "concurrency": [1, 4, 8], "ttft_p50_ms": [180.0, 700.0, None],
        "ttft_p90_ms": [190.0, 740.0, None], "ttft_p99_ms": [200.0, 750.0, None],
        "tpot_p50_ms": [5.7, 6.0, None], "tpot_p90_ms": [5.8, 8.0, None],
        "tpot_p99_ms": [5.9, 14.0, None], "output_tok_s": [117.0, 229.0, None],
        "prompt_tokens_mean": [500.0, 500.0, None], "output_tokens_mean": [64.0, 64.0, None],
        "requests_failed": [0, 0, 8]})


def test_points_from_summary_skips_levels_without_successes() -> None:
    pts = points_from_summary(summary_rows(), model="m", gpu="g")
    assert [p.concurrency for p in pts] == [1.0, 4.0]
    assert pts[1].tpot_p99_ms == 14.0 and pts[0].context_tokens == 564
    assert pts[0].source == "r1" and pts[0].model == "m"


def test_failures_of_a_level_with_no_success_mark_saturation(base: Scenario) -> None:
    df = summary_rows()
    ov = build_overlay(points_from_summary(df), base, series="r1", failures=df)
    assert (ov.saturation.concurrency, ov.saturation.kind) == (8.0, "errors")


def test_filter_and_compare_runs() -> None:
    runs = pd.DataFrame({"run_id": ["a", "b", "c"], "label": ["x", "y", "x"],
                         "base_url": ["u1", "u1", "u2"], "model": ["m", "m", "n"],
                         "started_at": ["2026-11-01T10:00", "2026-11-05T10:00",
                                        "2026-11-09T10:00"]})
    assert filter_runs(runs, labels=["x"])["run_id"].tolist() == ["a", "c"]
    assert filter_runs(runs, endpoints=["u1"], models=["m"])["run_id"].tolist() == ["a", "b"]
    assert filter_runs(runs, since="2026-11-05", until="2026-11-05")["run_id"].tolist() == ["b"]
    assert len(filter_runs(runs)) == 3
    s = summary_rows()
    t = compare_table([("one", s), ("two", s.iloc[:2])])
    assert t["concurrency"].tolist() == [1, 4, 8]
    assert {"one: TPOT p50 ms", "two: TPOT p50 ms", "two: failed"} <= set(t.columns)
    assert compare_table([]).empty


def test_read_upload_each_format_and_a_clear_error() -> None:
    for name in ("measured_sweep.csv", "vllm_bench_serve_c16.json",
                 "profile_export_aiperf.json"):
        pts = read_upload(name, (FIXTURES / name).read_bytes())
        assert pts and all(p.tpot_ms is not None for p in pts), name
    with pytest.raises(InputError, match="missing column"):
        read_upload("bad.csv", b"a,b\n1,2\n")
    with pytest.raises(InputError, match="empty"):
        read_upload("x.csv", b"")


def test_charts_are_valid_vega_lite(base: Scenario) -> None:
    pts = synthetic(base, (1, 4, 16))
    cal = Calibration(name="c", model=base.variant.key, gpu=base.gpu.key, eta_bw=0.7)
    ov = build_overlay(pts, base, series="run", calibration=cal,
                       failures=pd.DataFrame({"concurrency": [16.0], "requests_failed": [2]}))
    extra = measured_frame(synthetic(base, (2, 8), slow=1.2), "published: x")
    for m in METRICS:
        spec = overlay_chart(ov, m, extra_measured=extra).to_dict()
        marks = [layer["mark"]["type"] for layer in spec["layer"]]
        # the predicted band under load (TTFT), curves, the measured p90-p99 band (none for
        # aggregate tok/s), points, rules and their labels
        pband = ["area"] if m == "ttft_ms" else []
        band = [] if m == "aggregate_tok_s" else ["rule"]
        assert marks == [*pband, "line", *band, "point", "rule", "text"], m
    ratio = ratio_chart(ov.ratios).to_dict()
    shown = {r["series"] for d in ratio["datasets"].values() for r in d if "series" in r}
    assert shown == {"predicted, spec-sheet", "predicted, calibrated"}  # not the roofline


def _legend(spec: dict[str, Any]) -> dict[str, Any]:
    """The predicted lines' legend of a chart spec: its series, their colours and dashes."""
    line = next(lr for lr in spec["layer"] if lr["mark"]["type"] == "line")
    enc = line["encoding"]
    return {"color": enc["color"]["scale"]["domain"], "colors": enc["color"]["scale"]["range"],
            "dashes": enc["strokeDash"]["scale"]["range"],
            "dash_domain": enc["strokeDash"]["scale"]["domain"]}


def test_the_legend_lists_only_the_series_drawn(base: Scenario) -> None:
    """A browser audit of /results: without a calibration the legend still listed "predicted,
    calibrated" (and, on TPOT, "roofline, no queueing"), series the chart does not draw."""
    pts = synthetic(base, (1, 4, 16))
    plain = build_overlay(pts, base, series="run")
    for m in METRICS:
        leg = _legend(overlay_chart(plain, m).to_dict())
        drawn = ["predicted, spec-sheet"] + (["roofline, no queueing"]
                                             if m in ("ttft_ms", "aggregate_tok_s") else [])
        assert leg["color"] == leg["dash_domain"] == drawn, m
        # each series keeps its own style whatever else is drawn
        assert leg["colors"][0] == "#555555" and leg["dashes"][0] == [6, 4]
        if len(drawn) == 2:
            assert leg["colors"][1] == "#b0b0b0" and leg["dashes"][1] == [2, 3]
    cal = Calibration(name="c", model=base.variant.key, gpu=base.gpu.key, eta_bw=0.7)
    leg = _legend(overlay_chart(build_overlay(pts, base, series="run", calibration=cal),
                                "tpot_ms").to_dict())
    assert leg["color"] == ["predicted, spec-sheet", "predicted, calibrated"]
    assert leg["colors"] == ["#555555", "#d62728"] and leg["dashes"] == [[6, 4], [1, 0]]
    flat = _legend(overlay_chart(build_overlay(pts, base, series="run", load="none"),
                                 "ttft_ms").to_dict())
    assert flat["color"] == ["predicted, spec-sheet"]  # no roofline without load


SAMPLE_LEVELS = (8.0, 32.0, 64.0)


@pytest.fixture(scope="module")
def sample_run() -> tuple[list[MeasuredPoint], pd.DataFrame, Scenario]:
    """The bundled sample run (the simulator as an RTX 4090 on vLLM's typical knobs, closed
    loops at 1, 8, 32, 64) and the scenario it simulated, on that basis."""
    with RunStore(ROOT / "data" / "bench") as store:
        runs = store.list_runs(label="sample-rtx-4090-sim")
        summary = store.summary(str(runs["run_id"].iloc[0]))
    pts = points_from_summary(summary)
    prompt, output = typical_lengths(pts)
    s = run_scenario("qwen3.5-9b-awq", "rtx-4090", prompt_tokens=prompt, output_tokens=output)
    from capacity.fit.planning import scenario_with_basis

    return pts, summary, scenario_with_basis(s, "typical:vllm")


def test_under_load_prediction_follows_the_sample_run_and_the_roofline_does_not(
        sample_run: tuple[list[MeasuredPoint], pd.DataFrame, Scenario]) -> None:
    """Closed loop at 8-64: TTFT within 15% and aggregate tok/s within 5% of measured (the
    sample was simulated on the basis predicted with: the event model and the simulator share
    the physics); the no-load roofline is off by more than 3x on TTFT, and by 1.9x to 6x on
    aggregate tok/s (more the more clients)."""
    pts, summary, s = sample_run
    ov = build_overlay(pts, s, series="sample", failures=summary)
    assert ov.load == "closed"
    r = ov.ratios.set_index(["metric", "concurrency"])
    for c in SAMPLE_LEVELS:
        assert 0.85 < r.loc[("ttft_ms", c), f"ratio_{Predicted.SPEC_SHEET}"] < 1.15, c
        assert 0.95 < r.loc[("aggregate_tok_s", c), f"ratio_{Predicted.SPEC_SHEET}"] < 1.05, c
        assert r.loc[("ttft_ms", c), f"ratio_{Predicted.ROOFLINE}"] > 3.0, c
        assert r.loc[("aggregate_tok_s", c), f"ratio_{Predicted.ROOFLINE}"] < (
            0.55 if c == 8.0 else 1 / 3), c
    # TPOT stays F4's step at the batch, which the measurement follows too
    for c in (1.0, *SAMPLE_LEVELS):
        assert 0.8 < r.loc[("tpot_ms", c), f"ratio_{Predicted.SPEC_SHEET}"] < 1.25, c
    # each closed level is predicted as the bench ran it, with its own request count. Its
    # identical requests prefilled whole stay in lock step, every round one burst, so one
    # round predicts what three do; half a round (C / 2 requests, the other clients idle) is
    # a burst of half the prompts, its median TTFT about half as long
    rounds = {n: build_overlay(pts, s, series="sample", failures=summary.assign(
        requests_total=(summary["concurrency"] * n).clip(lower=1).astype(int))
        ).ratios.set_index(["metric", "concurrency"]) for n in (1.0, 0.5)}
    for c in SAMPLE_LEVELS:
        at = ("ttft_ms", c)
        assert rounds[1.0].loc[at, Predicted.SPEC_SHEET] == pytest.approx(
            r.loc[at, Predicted.SPEC_SHEET], rel=1e-6), c
        assert 0.4 < (rounds[0.5].loc[at, Predicted.SPEC_SHEET]
                      / r.loc[at, Predicted.SPEC_SHEET]) < 0.6, c
    # the curve the chart draws is the one the ratios use, with a TTFT band around it
    curve = ov.predicted[(ov.predicted["series"] == Predicted.SPEC_SHEET)
                         & (ov.predicted["metric"] == "ttft_ms")].set_index("concurrency")
    for c in SAMPLE_LEVELS:
        assert curve.loc[c, "value"] == pytest.approx(r.loc[("ttft_ms", c), Predicted.SPEC_SHEET])
        assert curve.loc[c, "value"] <= curve.loc[c, "p90"] <= curve.loc[c, "p99"]
    assert 10 <= curve.index.size <= 20  # log grid plus the measured levels
    # reverting to the roofline (load="none") puts TTFT off by far more than 3x
    flat = build_overlay(pts, s, series="sample", failures=summary, load="none")
    off = flat.ratios.set_index(["metric", "concurrency"])
    assert off.loc[("ttft_ms", 32.0), f"ratio_{Predicted.SPEC_SHEET}"] > 3.0


def test_open_loop_uses_each_levels_rate_and_falls_back_without_output(
        sample_run: tuple[list[MeasuredPoint], pd.DataFrame, Scenario]) -> None:
    pts, summary, s = sample_run
    light = summary.assign(request_rate_rps=[0.5, 1.0, 2.0, 3.0])
    ov = build_overlay(pts, s, series="open", failures=light)
    assert ov.load == "open"
    spec = ov.predicted[ov.predicted["series"] == Predicted.SPEC_SHEET]
    assert sorted(set(spec["concurrency"])) == [1.0, 8.0, 32.0, 64.0]
    agg = ov.ratios[ov.ratios["metric"] == "aggregate_tok_s"].set_index("concurrency")[Predicted.SPEC_SHEET]
    # below saturation an open loop delivers its arrival rate x output tokens
    assert agg.loc[8.0] == pytest.approx(1.0 * 64, rel=0.2)
    # an open level is its rate's steady state (200 Poisson arrivals), whatever the run's count
    few = build_overlay(pts, s, series="open", failures=light.assign(requests_total=16))
    pd.testing.assert_frame_equal(few.predicted, ov.predicted)
    no_output = [MeasuredPoint(concurrency=p.concurrency, context_tokens=p.context_tokens,
                               prompt_tokens=p.prompt_tokens, ttft_ms=p.ttft_ms,
                               tpot_ms=p.tpot_ms) for p in pts]
    assert build_overlay(no_output, s, series="x").load == "none"
    # a model that does not fit has nothing to queue: the roofline still draws (C_vram = 0)
    big = run_scenario("llama-3.1-70b", "rtx-4090", prompt_tokens=500, output_tokens=64)
    assert build_overlay(pts, big, series="x").load == "none"
    with pytest.raises(InputError, match="load must be"):
        build_overlay(pts, s, series="x", load="busy")
