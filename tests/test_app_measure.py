"""The Measure page through Streamlit's AppTest: the form, the guard, a run against the
simulated endpoint started from the page, and the stop button."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app import measure_state as ms
from capacity.bench.form import MeasureForm
from capacity.bench.job import BenchJob, JobRegistry
from capacity.bench.store import RunStore
from capacity.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "streamlit_app.py")
PAGE = "pages/measure.py"  # entered through the app's navigation (docs/app-internals.md)


@pytest.fixture
def bench_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    # the process' registry lists every recent job to every tab: a test sees only its own
    monkeypatch.setattr(ms, "JOBS", JobRegistry())
    monkeypatch.delenv("CAPACITY_MEASURE", raising=False)
    monkeypatch.delenv("CAPACITY_MEASURE_ALLOW_HOSTS", raising=False)
    return tmp_path / "bench"


def texts(at: AppTest) -> str:
    return "\n".join([*(x.value for x in at.markdown), *(x.value for x in at.caption),
                      *(x.value for x in at.info), *(x.value for x in at.success),
                      *(x.value for x in at.warning), *(x.value for x in at.error),
                      *(x.value for x in at.subheader)])


def test_form_renders_with_every_field(bench_dir: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=60).switch_page(PAGE)
    at.run()
    assert not at.exception
    assert at.text_input(key="m_api_key").proto.type == at.text_input(
        key="m_api_key").proto.PASSWORD
    for k in ("m_base_url", "m_model", "m_levels", "m_prompts", "m_label"):
        assert at.text_input(key=k).value is not None
    for k in ("m_requests", "m_rate", "m_max_tokens", "m_slo_ttft", "m_slo_tpot",
              "m_gpus", "m_price"):
        assert at.number_input(key=k).value is not None
    assert at.selectbox(key="m_predict").value == "qwen3.5-9b-awq"
    assert at.selectbox(key="m_workload").value == ""
    assert "Chat (conversation service)" in at.selectbox(key="m_workload").options
    assert "No measurement running" in texts(at)
    at.text_input(key="m_levels").set_value("1,x")
    at.button(key="m_start").click().run()
    assert not at.exception
    assert any("not a whole number" in e.value for e in at.error)


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_switched_off_and_allow_list(bench_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPACITY_MEASURE", "off")
    at = AppTest.from_file(APP, default_timeout=60).switch_page(PAGE)
    at.run()
    assert "switched off" in at.warning[0].value
    assert not at.button  # nothing to click
    monkeypatch.setenv("CAPACITY_MEASURE", "on")
    monkeypatch.setenv("CAPACITY_MEASURE_ALLOW_HOSTS", "gpu1.lan")
    at = AppTest.from_file(APP, default_timeout=60).switch_page(PAGE)
    at.run()
    assert "gpu1.lan" in at.info[0].value
    at.text_input(key="m_base_url").set_value("http://example.com/v1")
    at.button(key="m_connect").click().run()
    assert any("not in CAPACITY_MEASURE_ALLOW_HOSTS" in e.value for e in at.error)


def _wait(at: AppTest, until: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        at.run()
        if until in texts(at):
            return
        time.sleep(0.3)
    raise AssertionError(f"'{until}' never appeared:\n{texts(at)}")


@pytest.mark.slow
def test_simulated_run_from_the_page_then_stop(bench_dir: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=60).switch_page(PAGE)
    at.run()
    # the simulator's expander is keyed: the browser keeps it open or closed as the user left
    # it when a sim starts or stops (without a key it was a new element, drawn closed)
    assert [e.key for e in at.expander] == ["m_sim_box"]
    at.number_input(key="m_sim_speedup").set_value(5.0)
    at.button(key="m_sim_start").click().run()
    sim = at.session_state[ms.SIM]
    try:
        assert not at.exception
        assert [e.key for e in at.expander] == ["m_sim_box"]
        assert at.text_input(key="m_base_url").value == sim.base_url
        at.button(key="m_connect").click().run()
        assert [m.value for m in at.metric] == ["yes", "yes", "1", "yes"]
        assert at.selectbox(key="m_model").value == "qwen3.5-9b-awq"
        at.text_input(key="m_levels").set_value("1,2")
        at.number_input(key="m_requests").set_value(4)
        at.number_input(key="m_passes").set_value(2)
        at.text_input(key="m_prompts").set_value("400")
        at.number_input(key="m_max_tokens").set_value(16)
        at.text_input(key="m_label").set_value("page-run")
        at.button(key="m_start").click().run()
        assert not at.exception and not at.error
        _wait(at, "Stored as run", 40)
        assert "finished" in texts(at)
        assert [round(p.value) for p in at.get("progress")] == [100, 100]
        with RunStore(bench_dir) as store:
            runs = store.list_runs(label="page-run")
            assert runs["status"].tolist() == ["finished"]
            assert store.summary(runs["run_id"][0])["concurrency"].tolist() == [1, 2]
            # two passes (1, 2, 2, 1), two requests of each level in each
            reqs = store.requests(runs["run_id"][0])
            assert reqs.groupby(["concurrency", "pass_index"]).size().tolist() == [2] * 4
            assert reqs.sort_values("start_unix_s")["concurrency"].tolist() == [
                1, 1, 2, 2, 2, 2, 1, 1]

        # a long run, stopped: what was measured is kept
        at.number_input(key="m_passes").set_value(1)
        at.number_input(key="m_requests").set_value(2000)
        at.text_input(key="m_label").set_value("page-stop")
        at.button(key="m_start").click().run()
        _wait(at, "Run 'page-stop': running", 20)
        job = at.session_state[ms.JOB]
        deadline = time.monotonic() + 20
        while job.progress()[0].done < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        at.run()
        at.button(key="m_stop").click().run()
        _wait(at, "stopped, measured requests kept", 20)
        d = job.find_run_dir()
        assert json.loads((d / "meta.json").read_text())["status"] == "interrupted"
        assert job.progress()[0].done >= 3
        at.button(key="m_sim_stop").click().run()
        assert not sim.running
        assert [e.key for e in at.expander] == ["m_sim_box"]
    finally:
        sim.stop()


def test_every_string_of_both_pages_has_english_and_chinese() -> None:
    import re
    import string

    from app.i18n import OVERLAY_CHART_LABELS as CHART_LABELS
    from capacity.report.i18n import MESSAGES as M

    used: set[str] = set()
    for page in ("measure.py", "results.py"):
        src = (ROOT / "pages" / page).read_text()
        used |= set(re.findall(r"""T\(["']([a-z0-9_]+)["']""", src))
    used |= {f"m_status_{s}" for s in ("running", "finished", "stopped", "failed")}
    used |= {f"r_sat_{s}" for s in ("errors", "plateau")} | {"r_source_run", "r_source_import"}
    used |= {f"r_c_{c}" for c in ("label", "started_at", "status", "model", "gpu", "levels",
                                  "requests_ok", "requests_failed", "base_url", "run_id")}
    prefixes = {k for k in used if k.endswith("_")}  # completed at run time (listed above)
    assert not used - prefixes - set(M), "keys the pages use but the table lacks"

    def fields(text: str) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(text) if f}

    for key, (en, *others) in {**M, **CHART_LABELS}.items():  # English first (LANGS)
        assert en.strip() and all(o.strip() for o in others), key
        assert all(fields(o) == fields(en) for o in others), key


def _captured_forms(at: AppTest, monkeypatch: pytest.MonkeyPatch) -> list[MeasureForm]:
    """Click Start with `BenchJob.start` replaced by a check of the forms it gets (each
    validated against the page's limits as the real one does), starting nothing."""
    got: list[MeasureForm] = []

    def start(forms: Sequence[MeasureForm], *args: object, **kw: object) -> BenchJob:
        for f in forms:
            f.validate()
        got.extend(forms)
        raise InputError("captured")

    monkeypatch.setattr(BenchJob, "start", start)
    at.button(key="m_start").click().run()
    assert not at.exception
    assert [e.value for e in at.error] == ["captured"]
    return got


@pytest.mark.slow
def test_calibration_sweep_preset_runs_exactly_the_plans_cells(
        bench_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: the preset ran every level of the plan at every prompt length (40 cells where
    its caption said 12) and filled in concurrency 512, which the page then refused. Now each
    prompt length runs its own levels, all within the page's limits."""
    from capacity.fit.sweep import CALIBRATION_PASSES, OUTPUT_TOKENS, measurement_plan
    from capacity.model.scenario import make_scenario

    at = AppTest.from_file(APP, default_timeout=60).switch_page(PAGE)
    at.run()
    # the page's defaults: the model to predict with and the GPU of the report
    assert (at.selectbox(key="m_predict").value, at.selectbox(key="m_gpu").value) == (
        "qwen3.5-9b-awq", "rtx-4090")
    at.button(key="m_preset_calib").click().run()
    assert not at.exception and not at.error
    assert "calibration plan of qwen3.5-9b-awq on rtx-4090: 12 cells in 8 runs" in texts(at)
    assert "in 2 passes (forward, then backward)" in texts(at)
    # the levels field lists the union; the table says which length runs which
    assert at.text_input(key="m_levels").value == "1,8,32,64,512"
    assert at.text_input(key="m_prompts").value == "1024,2048,4096,8192,16384,32768,65536,131072"
    table = at.table[0].value
    assert table.iloc[:, 2].tolist() == ["1, 32, 64, 512", "1", "1", "1", "1", "1", "1", "1, 8"]
    assert at.number_input(key="m_max_tokens").value == OUTPUT_TOKENS
    assert at.number_input(key="m_passes").value == CALIBRATION_PASSES == 2

    forms = _captured_forms(at, monkeypatch)
    cells = sorted((f.prompt_chars, c) for f in forms for c in f.concurrency)
    plan = measurement_plan(make_scenario("qwen3.5-9b-awq", "rtx-4090"))
    assert len(cells) == 12  # the count, by hand: 4 + 6 x 1 + 2
    assert cells == sorted((c.prompt_chars, c.concurrency) for c in plan.cells)
    assert [f.label for f in forms][:2] == ["calibration-p1024", "calibration-p2048"]
    assert forms[0].concurrency == (1, 32, 64, 512) and forms[-1].concurrency == (1, 8)

    # edited by hand: back to every level at every prompt length, and the page says so
    at.text_input(key="m_levels").set_value("1,8").run()
    assert "edited by hand: the job runs every level at every prompt length (16 cells)" in \
        texts(at)
    assert not at.table
    forms = _captured_forms(at, monkeypatch)
    assert [f.concurrency for f in forms] == [(1, 8)] * 8


def test_every_workload_preset_has_a_name_in_both_languages() -> None:
    from capacity.model.traffic import load_presets
    from capacity.report.i18n import MESSAGES

    for key, p in load_presets().items():
        en, *others = MESSAGES[f"workload_preset_{key}"]
        assert en == p.name and all(others)
