"""Choosing a model with a shorter context limit on the Planner sets the context to that limit
(`app.planner_state.clamp_context`) and says so, in the words of a link's clamped context;
nothing is said when the context fits the model chosen."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from capacity.catalog.loader import default_catalog
from capacity.report.i18n import note_text
from capacity.report.planner_url import context_clamped_note, planner_decode

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
TITLE = "The context was set to the chosen model's limit:"
SAID = "context 32768 tokens exceeds Llama-2-70B's limit of 4096 tokens; using 4096"


def _clamps(at: AppTest) -> list[str]:
    return [w.value for w in at.warning if w.value.startswith(TITLE)]


def test_the_notice_says_what_a_links_clamped_context_says() -> None:
    catalog = default_catalog()
    note = context_clamped_note(32768, catalog.variant("llama-2-70b-fp8").model)
    assert note == SAID and note_text(note, "en") == SAID
    assert note_text(note, "zh") == ("上下文 32768 tokens 超出 Llama-2-70B 的上限 4096 tokens；"
                                     "改用 4096")
    # the link's notice for the same context: the same reason, the same value used
    _, (link,) = planner_decode({"model": "llama-2-70b-fp8", "ctx": "32768"}, catalog)
    assert link == f"'ctx=32768' ignored ({SAID.replace('; using', '); using')}"


@pytest.mark.slow
def test_choosing_a_shorter_model_says_the_context_was_shortened() -> None:
    """Context 32768, then Llama-2-70B FP8 (4K) chosen: the context reads 4096 and the plan
    is sized for it (the default traffic: 4 GPUs before, 1 after), and before the fix nothing
    said why."""
    at = AppTest.from_file(APP, default_timeout=180).switch_page("pages/planner.py")
    at.run()
    at.selectbox(key="planner_ctx").set_value(32768).run()
    at.selectbox(key="planner_model").set_value("qwen3.5-9b").run()   # fits: nothing to say
    assert not at.exception and _clamps(at) == []
    at.selectbox(key="planner_model").set_value("llama-2-70b-fp8").run()
    assert not at.exception
    assert at.selectbox(key="planner_ctx").value == 4096
    assert _clamps(at) == [f"{TITLE}\n\n- {SAID}"]
    at.number_input(key="planner_dau").set_value(600).run()   # still so: still said
    assert _clamps(at) == [f"{TITLE}\n\n- {SAID}"]
    # another model (the context stays 4096, which it takes): nothing clamped, nothing said
    at.selectbox(key="planner_model").set_value("qwen3.5-9b-awq").run()
    assert at.selectbox(key="planner_ctx").value == 4096 and _clamps(at) == []
    at.selectbox(key="planner_model").set_value("llama-2-70b-fp8").run()
    assert _clamps(at) == []
    # a shorter context chosen by hand after a clamp: the notice goes
    at.selectbox(key="planner_model").set_value("qwen3.5-9b").run()
    at.selectbox(key="planner_ctx").set_value(32768).run()
    assert _clamps(at) == []
    at.selectbox(key="planner_model").set_value("llama-2-70b-fp8").run()
    assert len(_clamps(at)) == 1
    at.selectbox(key="planner_ctx").set_value(2048).run()
    assert not at.exception and _clamps(at) == []


@pytest.mark.slow
def test_in_chinese_and_for_an_added_workload() -> None:
    at = AppTest.from_file(APP, default_timeout=180).switch_page("pages/planner.py")
    at.query_params["lang"] = "zh"
    at.run()
    at.number_input(key="planner_mix_n").set_value(1).run()
    at.selectbox(key="planner_mix_0_ctx").set_value(32768).run()
    assert not at.exception and not [w for w in at.warning if "上限" in w.value]
    at.selectbox(key="planner_mix_0_model").set_value("llama-2-70b-fp8").run()
    assert not at.exception
    assert at.selectbox(key="planner_mix_0_ctx").value == 4096
    (said,) = [w.value for w in at.warning if "上限" in w.value]
    assert said == ("上下文已改为所选模型的上限：\n\n- 工作负载 2：上下文 32768 tokens 超出 "
                    "Llama-2-70B 的上限 4096 tokens；改用 4096")
