"""Issue 14, items 9 and 10 on the Measure page (AppTest through streamlit_app.py): several
prompt lengths per run and a request-rate (Poisson) mode; a simulated endpoint outlives the tab
that started it, and a page opened later reattaches to it or lists and stops it instead of
starting a second one."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app import measure_state as ms
from capacity.bench.form import MeasureForm, parse_prompt_chars, per_prompt
from capacity.bench.store import RunStore
from capacity.errors import InputError
from tests.test_app_measure import APP, PAGE, texts


@pytest.fixture
def bench_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.delenv("CAPACITY_MEASURE", raising=False)
    monkeypatch.delenv("CAPACITY_MEASURE_ALLOW_HOSTS", raising=False)
    ms.SIMS.stop_all()
    yield tmp_path / "bench"
    ms.SIMS.stop_all()


@pytest.mark.slow
def test_a_new_tab_reattaches_to_the_running_simulator_or_stops_it(bench_dir: Path) -> None:
    first = AppTest.from_file(APP, default_timeout=60).switch_page(PAGE)
    first.run()
    first.number_input(key="m_sim_speedup").set_value(5.0)
    first.button(key="m_sim_start").click().run()
    sim = first.session_state[ms.SIM]
    assert [s.proc.pid for s in ms.SIMS.running()] == [sim.proc.pid]

    # the first tab is closed (its session gone); a new one reattaches instead of starting one
    second = AppTest.from_file(APP, default_timeout=60).switch_page(PAGE)
    second.run()
    assert not second.exception and not second.error
    assert second.session_state[ms.SIM] is sim
    assert second.text_input(key="m_base_url").value == sim.base_url
    assert f"Reattached to the simulated endpoint already running at {sim.base_url}" in \
        texts(second)
    assert not [b for b in second.button if b.key == "m_sim_start"]  # nothing to start twice
    assert len(ms.SIMS.running()) == 1

    # stopped from the second tab; a new one started there shows in the first tab's list
    second.button(key="m_sim_stop").click().run()
    assert not sim.running and ms.SIMS.running() == []
    second.number_input(key="m_sim_speedup").set_value(3.0)
    second.button(key="m_sim_start").click().run()
    other = second.session_state[ms.SIM]
    assert other.running and other is not sim
    first.run()
    assert "Simulated endpoints this app started" in texts(first)
    assert f"pid {other.proc.pid}" in texts(first)
    first.button(key=f"m_sim_stop_{other.proc.pid}").click().run()
    assert not other.running and ms.SIMS.running() == []


def test_form_builds_one_run_per_prompt_length_and_the_rate() -> None:
    base = MeasureForm(base_url="http://127.0.0.1:8000/v1", label="sweep", request_rate=2.5)
    assert "--request-rate" in base.argv() and base.argv()[base.argv().index(
        "--request-rate") + 1] == "2.5"
    assert "--request-rate" not in MeasureForm(base_url="http://127.0.0.1:8000/v1").argv()
    one = per_prompt(base, parse_prompt_chars("4000"))
    assert [(f.label, f.prompt_chars) for f in one] == [("sweep", 4000)]
    two = per_prompt(base, parse_prompt_chars("1000, 8000,1000"))
    assert [(f.label, f.prompt_chars) for f in two] == [("sweep-p1000", 1000),
                                                         ("sweep-p8000", 8000)]
    for bad, says in (("1000,x", "not a whole number"), ("", "at least one"),
                      ("0", ">= 1"), (",".join(str(i) for i in range(1, 10)), "limit of 8")):
        with pytest.raises(InputError, match=says):
            parse_prompt_chars(bad)
    with pytest.raises(InputError, match="request rate must be > 0"):
        MeasureForm(base_url="http://127.0.0.1:8000/v1", request_rate=-1.0).validate()


def test_page_refuses_a_bad_prompt_list(bench_dir: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=60).switch_page(PAGE)
    at.run()
    at.text_input(key="m_prompts").set_value("1000,lots")
    at.button(key="m_start").click().run()
    assert not at.exception
    assert any("prompt length 'lots'" in e.value for e in at.error)


@pytest.mark.slow
def test_two_prompt_lengths_at_a_request_rate_from_the_page(bench_dir: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=60).switch_page(PAGE)
    at.run()
    at.number_input(key="m_sim_speedup").set_value(10.0)
    at.button(key="m_sim_start").click().run()
    at.text_input(key="m_levels").set_value("1,2")
    at.number_input(key="m_requests").set_value(3)
    at.text_input(key="m_prompts").set_value("300,900")
    at.number_input(key="m_max_tokens").set_value(8)
    at.number_input(key="m_rate").set_value(20.0)
    at.text_input(key="m_label").set_value("two")
    at.button(key="m_start").click().run()
    assert not at.exception and not at.error
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        at.run()
        if "label 'two-p900'" in texts(at):
            break
        time.sleep(0.3)
    assert "Stored as run" in texts(at) and "label 'two-p300'" in texts(at)
    assert "label 'two-p900'" in texts(at)
    with RunStore(bench_dir) as store:
        runs = store.list_runs()
        assert sorted(runs["label"]) == ["two-p300", "two-p900"]
        assert set(runs["status"]) == {"finished"}
    for label, chars in (("two-p300", 300), ("two-p900", 900)):
        (d,) = (bench_dir / label).iterdir()
        args = json.loads((d / "meta.json").read_text())["args"]
        assert args["prompt_chars"] == chars and args["request_rate"] == 20.0


def test_the_page_runs_one_client_process() -> None:
    """docs/bench.md: the Measure page runs `--workers 1` (its child ran one worker per CPU)."""
    a = MeasureForm(base_url="http://127.0.0.1:8000/v1").argv()
    assert a[a.index("--workers") + 1] == "1"
