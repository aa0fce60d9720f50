"""The Results page through Streamlit's AppTest: overlay, calibration saved and reused, imports,
reference curves, uncertainty and the vLLM log."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.measure_state import FITTED
from capacity.bench.storage import RunWriter
from capacity.fit.calibration import predict_ms
from capacity.fit.calibration_store import load
from capacity.fit.measured import MeasuredPoint, run_scenario

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "streamlit_app.py")
PAGE = "pages/results.py"  # entered through the app's navigation (docs/app-internals.md)
FIXTURES = Path(__file__).parent / "fixtures"
PROMPT, OUTPUT = 1000.0, 128.0
TRUTH = dict(eta_bw=0.7, step_overhead_ms=1.0, mfu=0.45, prefill_overhead_ms=15.0)


def store_run(root: Path, label: str, levels: tuple[int, ...], failed_at: int | None = None,
              warnings: list[object] | None = None, engine: str | None = None,
              tok_s: tuple[float, ...] | None = None) -> str:
    """A stored run whose levels are what a deployment with the TRUTH knobs does (their output
    tok/s `tok_s` where given)."""
    base = run_scenario("qwen3.5-9b-awq", "rtx-4090", prompt_tokens=PROMPT, output_tokens=OUTPUT)
    # the page fits the operator step and F6b's prefill count (the head at the last position
    # only), so the truth is written in the same terms
    s = base.with_(**TRUTH, step_method="operator")
    pts = [MeasuredPoint(concurrency=c, context_tokens=1128, prompt_tokens=PROMPT,
                         output_tokens=OUTPUT) for c in levels]
    step, ttft = predict_ms(s, pts)
    with RunWriter(root, label) as w:
        w.write_meta({"run_id": w.run_id, "label": label, "status": "finished",
                      "started_at": "2026-11-20T10:00:00+00:00", "model": "qwen3.5-9b-awq",
                      "args": {"base_url": "http://127.0.0.1:9/v1", "endpoint": "chat",
                               "gpu": "rtx-4090", "predict_model": "qwen3.5-9b-awq",
                               "concurrency": list(levels)},
                      **({"warnings": warnings} if warnings is not None else {}),
                      **({"engine_info": {"engine": engine}} if engine else {})})
        for i, (c, st_ms, tt) in enumerate(zip(levels, step.tolist(), ttft.tolist(),
                                               strict=True)):
            w.write_summary({
                "run_id": w.run_id, "label": label, "concurrency": c, "endpoint": "chat",
                "model": "qwen3.5-9b-awq", "requests_total": 4 * c,
                "requests_ok": 4 * c, "requests_failed": 2 if c == failed_at else 0,
                "ttft_p50_ms": tt, "ttft_p90_ms": tt * 1.1, "ttft_p99_ms": tt * 1.2,
                "tpot_p50_ms": st_ms, "tpot_p90_ms": st_ms * 1.05, "tpot_p99_ms": st_ms * 1.2,
                "output_tok_s": (tok_s[i] if tok_s is not None
                                 else c * OUTPUT * 1e3 / (tt + (OUTPUT - 1) * st_ms)),
                "prompt_tokens_mean": PROMPT,
                "output_tokens_mean": OUTPUT, "row_complete": 1})
        return w.run_id


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.setenv("CAPACITY_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    store_run(tmp_path / "bench", "sweep-a", (1, 2, 4, 8, 16, 32))
    return tmp_path


def texts(at: AppTest) -> str:
    return "\n".join([*(x.value for x in at.markdown), *(x.value for x in at.caption),
                      *(x.value for x in at.info), *(x.value for x in at.success)])


@pytest.mark.slow
def test_overlay_renders_and_calibration_is_saved_and_reused(env: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    assert not at.exception and not at.error
    assert at.dataframe[0].value["label"].tolist() == ["sweep-a"]
    spec_only = at.get("vega_lite_chart")
    assert len(spec_only) == 5  # four metrics and the ratio chart
    assert "calibration: spec-sheet only" in texts(at)
    assert "predicted under load, each level as the bench ran it" in texts(at)
    ttft = at.get("vega_lite_chart")[0].proto.spec
    assert "roofline, no queueing" in ttft and '"area"' in ttft  # both curves and the band
    assert "predicted, calibrated" not in ttft  # no calibration chosen: none in the legend
    # one run chosen: the legend names it by its label alone (a long name was cut at 1000 px)
    assert '"sweep-a"' in ttft and '"sweep-a · ' not in ttft and '"orient": "top"' in ttft
    # the spec-sheet prediction is off (the truth is 30% slower on bandwidth)
    medians = at.dataframe[1].value.set_index("metric")
    assert float(medians.loc["TPOT (ms)", "predicted, spec-sheet"].rstrip("%")) > 20

    at.text_input(key="r_cal_name").set_value("sweep-a-cal")
    at.button(key="r_fit").click().run()
    assert not at.exception and not at.error
    assert at.selectbox(key="r_calibration").value == "__fitted__"
    knobs = next(d.value for d in at.dataframe if "knob" in d.value.columns).set_index("knob")
    assert float(knobs.loc["bandwidth efficiency η_bw (fraction)", "fitted"]) == \
        pytest.approx(0.7, rel=0.05)
    assert float(knobs.loc["prefill MFU (fraction)", "fitted"]) == pytest.approx(0.45, rel=0.1)
    medians = at.dataframe[1].value.set_index("metric")
    assert float(medians.loc["TPOT (ms)", "predicted, calibrated"].rstrip("%")) < 3
    assert "held-out method: TPOT: leave-one-level-out" in texts(at)

    at.button(key="r_save").click().run()
    assert (env / "cal" / "sweep-a-cal.toml").is_file()
    assert load("sweep-a-cal", env / "cal").eta_bw == pytest.approx(0.7, rel=0.05)

    # issue 28: renamed after the fit, it saves under the new name (no refit needed)...
    at.text_input(key="r_cal_name").set_value("sweep-a-renamed").run()
    at.button(key="r_save").click().run()
    assert not at.exception and not at.error
    assert load("sweep-a-renamed", env / "cal").name == "sweep-a-renamed"
    # ...and a name that is taken asks before it overwrites
    before = (env / "cal" / "sweep-a-cal.toml").read_text(encoding="utf-8")
    at.text_input(key="r_cal_name").set_value("sweep-a-cal").run()
    at.button(key="r_save").click().run()
    assert any("A calibration named sweep-a-cal is saved already" in w.value for w in at.warning)
    assert (env / "cal" / "sweep-a-cal.toml").read_text(encoding="utf-8") == before
    at.button(key="r_save_cancel").click().run()
    assert not at.warning
    at.button(key="r_save").click().run()
    at.button(key="r_save_overwrite").click().run()
    assert not at.exception and not at.error and not at.warning
    assert "Saved to" in texts(at)
    assert load("sweep-a-cal", env / "cal").name == "sweep-a-cal"

    # a new session reuses the saved one
    fresh = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    fresh.run()
    assert "sweep-a-cal" in fresh.selectbox(key="r_calibration").options
    fresh.selectbox(key="r_calibration").set_value("sweep-a-cal").run()
    assert not fresh.exception
    assert "calibration: sweep-a-cal" in texts(fresh)
    assert "calibration 'sweep-a-cal'" in texts(fresh)  # the band comes from it


def test_a_saved_calibration_replaces_the_unsaved_entry(env: Path) -> None:
    """Fit, then Save: the choice listed the saved 'sweep-a-cal' and still '(fitted now, not
    saved)' beside it, the unsaved one selected. The saved entry replaces it, selected, and the
    page's figures stay those of the fit; a new fit brings the unsaved entry back."""
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    at.text_input(key="r_cal_name").set_value("sweep-a-cal")
    at.button(key="r_fit").click().run()
    before = at.selectbox(key="r_calibration")
    assert before.value == "__fitted__"
    # the saved ones: the bundled calibration, and in a checkout whatever the user saved in
    # its data/calibrations (the README's `calibrate --save my-4090`)
    assert before.options[0] == "spec-sheet only" and "rtx-4090-vllm-published" in before.options
    assert before.options[-1] == "sweep-a-cal (fitted now, not saved)"
    fitted_medians = at.dataframe[1].value

    at.button(key="r_save").click().run()
    assert not at.exception and not at.error
    choice = at.selectbox(key="r_calibration")
    assert choice.options == [*before.options[:-1], "sweep-a-cal"]
    assert choice.value == "sweep-a-cal"
    assert at.dataframe[1].value.equals(fitted_medians)  # the same calibration, now saved
    assert "calibration: sweep-a-cal" in texts(at)

    at.button(key="r_fit").click().run()  # a new fit is unsaved again
    choice = at.selectbox(key="r_calibration")
    assert choice.options[-1] == "sweep-a-cal (fitted now, not saved)"
    assert choice.value == "__fitted__"


def test_the_sensitivity_table_sweeps_a_knob_fitted_at_zero_over_its_typical_range(
        env: Path) -> None:
    """With the published RTX 4090 calibration (per-step overhead 2.8e-15 ms, a fit's 0) the
    "what moves the decode step" table swept that overhead over "0 to 0 ms"; it sweeps the
    typical 0.3 to 5 ms instead, and the caption says why."""
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    at.selectbox(key="r_calibration").set_value("rtx-4090-vllm-published").run()
    assert not at.exception and not at.error
    table = next(d.value for d in at.dataframe if "swing" in d.value.columns)
    row = table.set_index("input").loc["per-step overhead (ms)"]
    assert (row["low"], row["high"]) == ("0.3", "5")
    assert float(row["swing"]) > 1
    assert not ((table["low"] == "0") & (table["high"] == "0")).any()
    assert any("an overhead at zero" in c.value for c in at.caption)


@pytest.mark.slow
def test_the_runs_warnings_are_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the bench warned about (here: the server's prefix cache served the prompts) is on
    the page beside the numbers it qualifies, each once, and a meta.json with junk in its
    warnings costs nothing."""
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.setenv("CAPACITY_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    cached = ("level 2: the server took 31% of the prompt tokens from its prefix cache "
              "(prompt_cached_tokens): TTFT here is shorter than a cold prefill's")
    store_run(tmp_path / "bench", "cached", (1, 2), warnings=[cached, cached, 7, {"x": 1}])
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    assert not at.exception and not at.error
    [shown] = [w.value for w in at.warning if "warned about this run" in w.value]
    assert "(1)" in shown and shown.count("prefix cache") == 1


@pytest.mark.slow
def test_a_llamacpp_run_fits_the_batch1_factor(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose meta.json says llama.cpp: Fit also frees the step of one sequence (its CPU
    backend's matrix-vector path), and says so; another engine's run keeps it at 1."""
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.setenv("CAPACITY_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    store_run(tmp_path / "bench", "llama", (1, 2, 4, 8), engine="llama.cpp")
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    assert any("one sequence on its own" in c.value for c in at.caption)
    at.button(key="r_fit").click().run()
    assert not at.exception and not at.error
    cal = at.session_state[FITTED]
    assert cal.batch1_factor is not None
    assert cal.batch1_factor == pytest.approx(1.0, rel=0.1)  # this run has no such switch


@pytest.mark.slow
def test_compare_runs_filters_and_saturation(env: Path) -> None:
    store_run(env / "bench", "sweep-b", (1, 4, 16), failed_at=16)
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    assert sorted(at.dataframe[0].value["label"]) == ["sweep-a", "sweep-b"]
    at.multiselect(key="r_f_label").set_value(["sweep-b"]).run()
    assert at.dataframe[0].value["label"].tolist() == ["sweep-b"]
    assert "First failures at concurrency 16" in texts(at)
    at.multiselect(key="r_f_label").set_value([]).run()
    ids = at.multiselect(key="r_pick").options
    at.multiselect(key="r_pick").set_value(list(ids)).run()
    assert not at.exception
    assert "Runs side by side" in texts(at)


def test_two_runs_of_one_label_in_one_second_are_both_pickable(env: Path) -> None:
    """Streamlit's picker holds a choice by its shown text: two runs named alike (one label, one
    start second: two users who pressed Start together) collapsed into one option, and picking
    both gave the first twice (CI's sign-in browser test read one run of two)."""
    second = store_run(env / "bench", "sweep-a", (1, 2))  # the same label and started_at
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    pick = at.multiselect(key="r_pick")
    assert len(pick.options) == 2 and len(set(pick.options)) == 2, pick.options
    assert all(o.startswith("sweep-a · ") for o in pick.options)
    assert any(o.endswith(second) for o in pick.options)  # told apart by the run id
    first = next(f.parent.name for f in (env / "bench" / "sweep-a").glob("*/meta.json")
                 if f.parent.name != second)
    pick.set_value([first, second]).run()
    assert not at.exception
    assert at.multiselect(key="r_pick").value == [first, second]
    assert "Runs side by side" in texts(at)


@pytest.mark.slow
def test_import_reference_vllm_log_and_chinese(env: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    at.radio(key="r_source").set_value("import").run()
    assert "Pick a stored run, import a file" in texts(at)
    ref = at.multiselect(key="r_reference")
    rtx = next(o for o in ref.options if "RTX 4090" in o)
    ref.set_value([rtx]).run()
    assert not at.exception and not at.error
    assert len(at.get("vega_lite_chart")) == 5
    log = (FIXTURES / "vllm_logs" / "v0.11.0.log").read_text()
    at.text_area(key="r_vllm").set_value(log).run()
    assert not at.exception
    terms = at.dataframe[-1].value
    assert {"term", "logged", "predicted", "likely cause"} <= set(terms.columns)
    assert len(terms) >= 3
    at.sidebar.segmented_control(key="lang").set_value("zh").run()
    assert at.title[0].value == "结果：实测与预测"


@pytest.mark.slow
def test_accuracy_on_your_runs(env: Path) -> None:
    """The scorecard's table for one's own run: every level and metric, spec-sheet only until a
    calibration is chosen; headed in the page's language."""
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    assert not at.exception and not at.error
    assert "Accuracy on your runs" in [h.value for h in at.subheader]
    table = next(d.value for d in at.dataframe if "optimism (x)" in d.value.columns)
    assert len(table) == 6 * 3  # six levels x (step, TTFT, throughput)
    assert set(table["metric"]) == {"decode step (ms)", "TTFT (ms)", "throughput (tok/s)"}
    assert "calibrated, no queueing" not in table.columns  # no calibration: no empty columns
    assert "calibrated: no calibration chosen." in texts(at)
    assert (table["optimism (x)"] >= 1).all()  # the truth is slower than peak
    assert ("18 of 18 rows: the spec sheet without queueing is not slower than measured "
            "(100.0%)") in texts(at)
    at.sidebar.segmented_control(key="lang").set_value("zh").run()
    assert not at.exception
    assert "在您的测量上的准确度" in [h.value for h in at.subheader]
    assert any("乐观倍数（x）" in d.value.columns for d in at.dataframe)


@pytest.mark.slow
def test_the_uncertainty_band_rests_on_the_pages_own_basis(env: Path) -> None:
    """A browser audit of /results: the saturation note said "a predicted C_vram of 864"
    while the Uncertainty section said "C_vram 779, band 589 to 806" (864 outside its own
    band), and its TTFT read 0.182 s beside the accuracy table's spec-sheet 48.43 ms: the band
    was computed on the chapter's basis (MFU 0.3, the spec sheet's decimal GB), the rest of
    the page on the spec sheet. One basis: the same C_vram and TTFT wherever they are shown."""
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    assert not at.exception and not at.error
    note = next(x.value for x in at.info if "C_vram" in x.value)
    c_vram = int(re.search(r"C_vram (?:of|is) (\d+)", note).group(1))  # type: ignore[union-attr]
    shown = {m.label: m.value for m in at.metric}
    assert int(shown["C_vram"]) == c_vram
    lo, hi = (int(x) for x in next(
        re.fullmatch(r"band (\d+) to (\d+)", c.value).groups()  # type: ignore[union-attr]
        for c in at.caption if re.fullmatch(r"band \d+ to \d+", c.value)))
    assert lo <= c_vram <= hi
    # the band's TTFT is the accuracy table's at the same concurrency (the largest measured)
    table = next(d.value for d in at.dataframe if "optimism (x)" in d.value.columns)
    spec = next(c for c in table.columns if c.startswith("spec-sheet"))
    rows = table[(table["metric"] == "TTFT (ms)") & (table["concurrency"] == 32)]
    [ttft_label] = [k for k in shown if k.startswith("TTFT")]
    assert float(shown[ttft_label].removesuffix(" ms")) == pytest.approx(
        float(rows[spec].iloc[0]), rel=1e-9)
    assert "around the spec-sheet prediction" in texts(at)


@pytest.mark.slow
def test_the_accuracy_table_says_it_leaves_out_queueing(env: Path) -> None:
    """A browser audit of /results: the charts' predicted TTFT and aggregate tok/s include
    queueing while the accuracy table's "spec-sheet" column did not and did not say so (TTFT
    48.43 ms at every level, aggregate 4,659 tok/s at C=32 beside a chart near 1,000). Its
    columns now say "no queueing", its caption names the charts' line it equals, and that line
    is the same computation: the table's TTFT and throughput are the roofline's per level."""
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    assert not at.exception and not at.error
    table = next(d.value for d in at.dataframe if "optimism (x)" in d.value.columns)
    assert "spec-sheet, no queueing" in table.columns
    assert 'grey dotted "roofline, no queueing" line' in texts(at)
    # the charts' caption gives the line's formula (it said C × 1000 / TPOT: 176 tok/s at C=1
    # here, where the line and the table read 158, a closed loop with its prefill)
    assert "C × n / (TTFT + (n - 1) × TPOT)" in texts(at)
    ratios = next(d.value for d in at.dataframe if "roofline, no queueing" in d.value.columns)
    for shown, drawn in (("TTFT (ms)", "TTFT (ms)"), ("throughput (tok/s)", "aggregate tok/s")):
        rows = table[table["metric"] == shown].set_index("concurrency")
        line = ratios[ratios["metric"] == drawn].set_index("concurrent requests")
        assert len(rows) == 6
        for c, v in rows["spec-sheet, no queueing"].items():
            assert v == float(f"{line.loc[c, 'roofline, no queueing']:.4g}"), (shown, c)


@pytest.mark.slow
@pytest.mark.parametrize("tok_s, note, saturated", [
    # the old note's rule (growth under a tenth of the concurrency's) saw a plateau after 8
    # here, while the table's (at most 5% above a lower level) saw none
    pytest.param((100.0, 400.0, 430.0), "No saturation seen", [False, False, False],
                 id="still-scaling"),
    pytest.param((100.0, 400.0, 410.0), "stops scaling after concurrency 8",
                 [False, False, True], id="plateau")])
def test_the_saturation_note_and_the_table_share_one_rule(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tok_s: tuple[float, ...], note: str,
        saturated: list[bool]) -> None:
    """A browser audit of /results: the note said "throughput stops scaling after concurrency
    8" while the accuracy table's saturated column said "no" at 32, two rules and neither named.
    One rule (`flat_levels`) now marks both, and the page says which."""
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.setenv("CAPACITY_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    store_run(tmp_path / "bench", "flat", (1, 8, 32), tok_s=tok_s)
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    assert not at.exception and not at.error
    shown = next(x.value for x in at.info if "C_vram" in x.value)
    assert note in shown and "5%" in shown, shown
    table = next(d.value for d in at.dataframe if "optimism (x)" in d.value.columns)
    flags = table[table["metric"] == "throughput (tok/s)"].set_index("concurrency")["saturated"]
    assert [flags.loc[c] == "yes" for c in (1.0, 8.0, 32.0)] == saturated
    assert "Saturated: a level whose throughput is at most 5% above a lower level's" in texts(at)


def test_a_runs_engine_schedules_its_prediction_under_load() -> None:
    """The run's engine (meta.json's engine_info; the simulator's own profile from /sim/info)
    picks the scheduling the Results page predicts its levels under load with: a vLLM run is
    not predicted with the chapter's whole-prompt prefills (a level at 32 clients read 5,587
    ms of TTFT against 1,346 measured, vLLM's scheduling 708; an audit, 2026-12-07)."""
    from app.results_state import run_engine
    from capacity.bench.engine_info import engine_profile_of

    assert engine_profile_of({"engine_info": {"engine": "vLLM"}}) == "vllm"
    assert engine_profile_of({"engine_info": {"engine": "SGLang"}}) == "sglang"
    assert engine_profile_of({"engine_info": {"engine": "llama.cpp"}}) == "llamacpp"
    sim = {"engine_info": {"engine": "capacity sim-server", "sim_engine": "vllm"}}
    assert engine_profile_of(sim) == "vllm" == run_engine(sim)
    for unknown in ({}, {"engine_info": {"engine": "TGI"}},
                    {"engine_info": {"engine": "capacity sim-server", "sim_engine": "nope"}}):
        assert run_engine(unknown) == "chapter"
