"""Issue 14, items 9 and 10 on the Measure page (AppTest through streamlit_app.py): several
prompt lengths per run and a request-rate (Poisson) mode; a simulated endpoint outlives the tab
that started it, and a page opened later reattaches to it or lists and stops it instead of
starting a second one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app import measure_state as ms
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
