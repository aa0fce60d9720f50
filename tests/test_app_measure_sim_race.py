"""The Measure page pointed at a simulated endpoint while the user types (AppTest).

Streamlit stops a run for the browser's next request at any read or write of the session state,
and that request carries each field as the browser last drew it. These tests make the
browser's request during the run as a browser does (a field typed and Enter pressed), at the
two moments CI and a user hit: while the simulator starts, and in the rerun after, before it
has drawn the form (CI, 2026-12-07: the form kept port 8000 and the label 'measure').
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.proto.WidgetStates_pb2 import WidgetStates
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
from streamlit.testing.v1 import AppTest

from app import measure_form as form
from app import measure_state as ms
from capacity.bench.job import JobRegistry, SimRegistry

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "streamlit_app.py")
PAGE = "pages/measure.py"


@pytest.fixture
def page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AppTest]:
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.setattr(ms, "JOBS", JobRegistry())
    sims = SimRegistry()
    monkeypatch.setattr(ms, "SIMS", sims)
    monkeypatch.delenv("CAPACITY_MEASURE", raising=False)
    monkeypatch.delenv("CAPACITY_MEASURE_ALLOW_HOSTS", raising=False)
    at = AppTest.from_file(APP, default_timeout=60).switch_page(PAGE)
    at.run()
    try:
        yield at
    finally:
        sims.stop_all()


def browser_sends(at: AppTest, **typed: str) -> WidgetStates:
    """What the browser showing `at`'s page sends once the user typed `typed` (Enter), the
    other fields as it drew them; `at` itself is left as it was."""
    was = {k: at.text_input(key=k).value for k in typed}
    for k, v in typed.items():
        at.text_input(key=k).set_value(v)
    states = at._tree.get_widget_states()
    for k, v in was.items():
        at.text_input(key=k).set_value(v)
    return states


def request_now(states: WidgetStates) -> None:
    """The browser's request arrives during this run: Streamlit stops it at the next read or
    write of the session state and reruns with `states`."""
    ctx = get_script_run_ctx()
    assert ctx is not None and ctx.script_requests is not None
    ctx.script_requests.request_rerun(RerunData(widget_states=states,
                                                page_script_hash=ctx.page_script_hash))


def field(at: AppTest, key: str) -> Any:
    return at.text_input(key=key).value


def test_a_label_typed_while_the_simulator_starts_is_kept_and_said(
        page: AppTest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user types a label while the simulator starts: the browser's request stops the run
    that starts it at its next look at the session, and (Streamlit's fast reruns) the next run
    begins while the old one's thread still starts the simulator."""
    at = page
    typed = browser_sends(at, m_label="my-label")
    start = ms.start_sim
    starting: list[threading.Thread] = []

    def start_sim(*a: Any, **kw: Any) -> Any:
        if starting:
            return start(*a, **kw)
        starting.append(threading.Thread(target=start, args=a, kwargs=kw))
        starting[0].start()  # the old run's thread, starting it
        request_now(typed)
        st.session_state.get(ms.SIM)  # the old run stops here: it never sees the simulator
        raise AssertionError("the run went on after the browser's request")

    monkeypatch.setattr(ms, "start_sim", start_sim)
    at.button(key="m_sim_start").click().run()
    starting[0].join(timeout=60)
    assert not at.exception
    [sim] = ms.SIMS.running()  # one simulator, the one the old run started
    # it is the form's (the session lost it: the form at port 8000, the sim under "others")
    assert at.session_state[ms.SIM] is sim
    assert field(at, "m_base_url") == sim.base_url
    assert field(at, "m_model") == sim.model
    # what the user typed is kept, and said
    assert field(at, "m_label") == "my-label"
    [note] = [w.value for w in at.warning]
    assert "Label 'my-label' (the simulator's: 'sim-rtx-4090')" in note
    # the form drawn: whatever is typed now is the user's, the simulator's label or the old one
    at.text_input(key="m_label").set_value("sim-rtx-4090").run()
    assert not at.warning  # the note was about what the field no longer holds
    at.text_input(key="m_label").set_value("measure").run()
    assert field(at, "m_label") == "measure"
    assert field(at, "m_base_url") == sim.base_url


@pytest.mark.parametrize("typed", [{"m_levels": "1,2"}, {"m_levels": "1,2", "m_label": "mine"}])
def test_the_simulators_values_survive_a_request_before_the_form_drew(
        page: AppTest, monkeypatch: pytest.MonkeyPatch, typed: dict[str, str]) -> None:
    at = page
    stale = browser_sends(at, **typed)  # the form as the browser still draws it, typed into
    running = ms.SIMS.running
    sent: list[bool] = []

    def running_then_request(*a: Any, **kw: Any) -> Any:
        # the first look at the simulators after the one that started it: the rerun that
        # draws the form, stopped before it did
        ctx = get_script_run_ctx(suppress_warning=True)
        if ctx is not None and ms.SIM in ctx.session_state and not sent:
            sent.append(True)
            request_now(stale)
        return running(*a, **kw)

    monkeypatch.setattr(ms.SIMS, "running", running_then_request)
    at.button(key="m_sim_start").click().run()
    assert sent and not at.exception
    sim = at.session_state[ms.SIM]
    assert field(at, "m_levels") == "1,2"
    assert field(at, "m_base_url") == sim.base_url  # was http://127.0.0.1:8000/v1
    assert field(at, "m_label") == typed.get("m_label", "sim-rtx-4090")  # was 'measure'
    assert bool(at.warning) == ("m_label" in typed)


def test_merge_sim_values() -> None:
    untyped = {"m_label": ("measure",), "m_base_url": ("http://127.0.0.1:8000/v1",)}
    values = {"m_label": "sim-h100", "m_base_url": "http://127.0.0.1:9/v1"}
    assert form.merge_sim_values({"m_label": "measure", "m_base_url": "http://127.0.0.1:9/v1"},
                                 values, untyped) == ({"m_label": "sim-h100"}, ())
    assert form.merge_sim_values({"m_label": "x", "m_base_url": "http://127.0.0.1:8000/v1"},
                                 values, untyped) == (
        {"m_base_url": "http://127.0.0.1:9/v1"}, (("m_label", "x", "sim-h100"),))
