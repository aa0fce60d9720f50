"""Issue 14, items 8 and 11 on the Results page (AppTest through streamlit_app.py): runs are
chosen freely (none is a valid state), Fit uses exactly the chosen runs, the calibration name
follows the choice, the axes span every shown series, and the calibration report is exported
(Markdown and CSV) with the knobs' labels and units instead of their code names."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app import measure_state as ms
from capacity.fit import calibration as calib
from capacity.fit import calibration_report
from capacity.fit.measured import MeasuredPoint, run_scenario
from capacity.fit.overlay import build_overlay, measured_frame
from capacity.report.overlay_charts import overlay_chart
from tests.test_app_results import APP, PAGE, store_run, texts


@pytest.fixture
def two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.setenv("CAPACITY_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    old = store_run(tmp_path / "bench", "sweep-a", (1, 2, 4, 8))
    new = store_run(tmp_path / "bench", "sweep-b", (16, 32, 64))  # the newest
    return old, new


def _fitted_sources(at: AppTest) -> set[str]:
    cal = at.session_state[ms.FITTED]
    return {p.source for p in cal.points}


@pytest.mark.slow
def test_runs_can_be_emptied_and_fit_uses_only_the_chosen(two_runs: tuple[str, str]) -> None:
    old, new = two_runs
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    first = at.multiselect(key="r_pick").value  # one run (the newest), on a first visit
    assert len(first) == 1
    assert "What Fit uses" not in texts(at)  # no stray string drawn by Streamlit's magic
    assert at.text_input(key="r_cal_name").value == {old: "sweep-a", new: "sweep-b"}[first[0]]
    # emptied: it stays empty (no snap-back to the newest run) and the page says what to do
    at.multiselect(key="r_pick").set_value([]).run()
    assert not at.exception
    assert at.multiselect(key="r_pick").value == []
    assert "No run chosen" in texts(at)
    at.run()  # and on the next rerun too
    assert at.multiselect(key="r_pick").value == []
    # the older run alone: Fit uses it and only it, and the name follows the choice
    at.multiselect(key="r_pick").set_value([old]).run()
    assert at.text_input(key="r_cal_name").value == "sweep-a"
    at.button(key="r_fit").click().run()
    assert not at.exception and not at.error
    assert _fitted_sources(at) == {old}
    assert at.session_state[ms.FITTED].name == "sweep-a"
    # both: Fit uses both runs' points, the name names both
    at.multiselect(key="r_pick").set_value([old, new]).run()
    assert at.text_input(key="r_cal_name").value == "sweep-a_sweep-b"
    at.button(key="r_fit").click().run()
    assert not at.exception and not at.error
    assert _fitted_sources(at) == {old, new}
    # a name the user typed is kept while the choice stays
    at.text_input(key="r_cal_name").set_value("mine").run()
    assert at.text_input(key="r_cal_name").value == "mine"


@pytest.mark.slow
def test_second_run_within_the_axes(two_runs: tuple[str, str]) -> None:
    old, new = two_runs
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    at.multiselect(key="r_pick").set_value([old, new]).run()
    assert not at.exception
    for chart in at.get("vega_lite_chart")[:4]:
        spec = json.loads(chart.proto.spec)
        lo, hi = next(layer["encoding"]["x"]["scale"]["domain"] for layer in spec["layer"]
                      if "x" in layer.get("encoding", {}))
        assert lo < 1 and hi > 64  # run b's 64 is inside, with a margin


def test_axes_span_every_series_with_a_margin() -> None:
    s = run_scenario("qwen3.5-9b-awq", "rtx-4090", prompt_tokens=1000, output_tokens=128)
    pts = [MeasuredPoint(concurrency=c, context_tokens=1064, prompt_tokens=1000,
                         output_tokens=128, tpot_ms=10.0 + c, ttft_ms=50.0 * c,
                         output_tok_s=c * 50.0) for c in (1, 2, 4)]
    ov = build_overlay(pts, s, series="a")
    far = [MeasuredPoint(concurrency=c, context_tokens=1064, prompt_tokens=1000,
                         output_tokens=128, tpot_ms=500.0, ttft_ms=90_000.0,
                         output_tok_s=50_000.0) for c in (128, 512)]
    extra = measured_frame(far, "b")
    for metric, top in (("tpot_ms", 500.0), ("ttft_ms", 90_000.0)):
        spec = overlay_chart(ov, metric, extra_measured=extra).to_dict()
        scales = [layer["encoding"][a]["scale"] for layer in spec["layer"]
                  for a in ("x", "y") if "scale" in layer.get("encoding", {}).get(a, {})]
        x_dom = next(sc["domain"] for sc in scales if sc.get("nice") is False)
        assert x_dom[0] < 1 and x_dom[1] > 512
        y_dom = [sc["domain"] for sc in scales if sc.get("nice") is not False and "domain" in sc]
        assert y_dom and y_dom[0][1] > top


@pytest.mark.slow
def test_report_export_and_knob_labels_in_both_languages(two_runs: tuple[str, str]) -> None:
    old, _ = two_runs
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    at.multiselect(key="r_pick").set_value([old]).run()
    at.button(key="r_fit").click().run()
    assert not at.exception and not at.error
    knobs = next(d.value for d in at.dataframe if "knob" in d.value.columns)
    names = knobs["knob"].tolist()
    assert "step overhead (ms)" in names and "bandwidth efficiency η_bw (fraction)" in names
    assert not {"eta_bw", "step_overhead_ms", "mfu", "prefill_overhead_ms"} & set(names)
    md = at.get("download_button")
    labels = [b.proto.label for b in md]
    assert "Download report (Markdown)" in labels and "Download tables (CSV)" in labels
    at.sidebar.segmented_control(key="lang").set_value("zh").run()
    assert not at.exception
    knobs = next(d.value for d in at.dataframe if "参数" in d.value.columns)
    assert "每步开销（ms）" in knobs["参数"].tolist()
    assert "下载报告（Markdown）" in [b.proto.label for b in at.get("download_button")]


def test_report_markdown_and_csv() -> None:
    base = run_scenario("qwen3.5-9b-awq", "rtx-4090", prompt_tokens=1000, output_tokens=128)
    truth = base.with_(eta_bw=0.7, step_overhead_ms=1.0, mfu=0.45, prefill_overhead_ms=15.0)
    pts = [MeasuredPoint(concurrency=c, context_tokens=1064, prompt_tokens=1000,
                         output_tokens=128) for c in (1, 2, 4, 8, 16)]
    step, ttft = calib.predict_ms(truth, pts)
    pts = [MeasuredPoint(concurrency=p.concurrency, context_tokens=1064, prompt_tokens=1000,
                         output_tokens=128, tpot_ms=float(a), ttft_ms=float(b), source="r1")
           for p, a, b in zip(pts, step, ttft, strict=True)]
    cal = calib.fit(pts, base, name="c1", inputs="bench run x/r1")
    md = calibration_report.report_markdown(cal, base, words={"step_overhead_ms": "step overhead (ms)"})
    assert md.startswith("# Calibration 'c1'")
    assert "| step overhead (ms) |" in md and "| eta_bw |" in md
    assert "| TPOT |" in md and "bench run x/r1" in md
    rows = list(csv.DictReader(io.StringIO(calibration_report.report_csv(cal, base))))
    knob = {r["name"]: r for r in rows if r["table"] == "knob"}
    assert float(knob["eta_bw"]["fitted"]) == pytest.approx(0.7, rel=0.05)
    assert float(knob["eta_bw"]["spec"]) == pytest.approx(base.eta_bw)
    err = {r["name"]: r for r in rows if r["table"] == "error"}
    assert set(err) == {"tpot", "ttft"}
    assert float(err["tpot"]["fitted"]) < 0.03


def test_runs_side_by_side_name_their_columns_in_the_readers_language() -> None:
    """Item 12: the comparison table's headers come from the page (Chinese in Chinese)."""
    import pandas as pd

    from capacity.fit.overlay import COMPARE_COLUMNS, compare_table

    df = pd.DataFrame({"concurrency": [1, 2], "ttft_p50_ms": [10.0, 12.0],
                       "tpot_p50_ms": [5.0, 6.0], "output_tok_s": [100.0, 180.0],
                       "requests_failed": [0, 0]})
    english = compare_table([("a", df), ("b", df)])
    assert list(english.columns)[:2] == ["concurrency", "a: TTFT p50 ms"]
    zh = {"concurrency": "并发数", **{c: f"列{i}" for i, c in enumerate(COMPARE_COLUMNS)}}
    table = compare_table([("a", df), ("b", df)], zh)
    assert list(table.columns) == ["并发数", *(f"{r}: 列{i}" for r in "ab"
                                             for i in range(len(COMPARE_COLUMNS)))]


@pytest.mark.slow
def test_the_fits_residuals_are_headed_in_chinese(two_runs: tuple[str, str]) -> None:
    """Item 12: after a Fit in Chinese, the residuals table has no English header."""
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    at.sidebar.segmented_control(key="lang").set_value("zh").run()
    at.button(key="r_fit").click().run()
    assert not at.exception and not at.error
    headers = {str(c) for d in at.dataframe for c in d.value.columns}
    assert {"类型", "实测（ms）", "拟合误差", "留出误差"} <= headers
    assert not headers & {"kind", "measured_ms", "fitted_error", "held_out_error"}
