"""A shared link's notices quote what the link held, and whoever made the link chose it: the
Explorer's and the Planner's notice Markdown must draw nothing that fetches or links
(`app.format.link_notices_text`). Found 2026-12-08: `?model=a`![x](http://host/leak)``
closed the message's code span and drew an image that Chromium fetched."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.format import GRAVE_LOOKALIKE, defused, link_notices_text
from capacity.report.url_params import ignored_note
from capacity.types import Note

APP = str(Path(__file__).resolve().parents[2] / "streamlit_app.py")
HOSTILE = {"model": "a`![x](http://127.0.0.1:9/leak)`",
           "ctx": "<img src=http://127.0.0.1:9/leak2>",
           "c": "$\\href{http://127.0.0.1:9/x}{y}$"}


def active(markdown: str) -> list[str]:
    """What in `markdown` a renderer could turn into a fetch or a link (a `](` or `<` that a
    backslash escapes is shown as it is)."""
    bare = markdown.replace("\\](", "").replace("\\<", "")
    return [s for s in ("](", "<", "http://1", "$") if s in bare]


def test_a_value_is_defused_and_a_plain_one_kept() -> None:
    assert defused("qwen3.5-9b") == "qwen3.5-9b" and defused("typical:vllm") == "typical:vllm"
    got = defused(HOSTILE["model"])
    assert "`" not in got and GRAVE_LOOKALIKE in got and active(got) == []


def test_notices_keep_their_code_span_and_lose_the_link() -> None:
    bad = ignored_note("model", HOSTILE["model"], ValueError("not a key"), "qwen3.5-9b", False)
    unknown = Note("x", code="link_unknown", name="gpu", value=HOSTILE["ctx"], using="rtx-4090")
    for lang in ("en", "zh"):
        text = link_notices_text("Title:", [bad, unknown, "plain [a](http://h/)"], lang)
        assert active(text) == [], text
        # the message's own code span stays, with the value inside it
        assert text.count("`") % 2 == 0 and "`model=a" + GRAVE_LOOKALIKE in text


@pytest.mark.slow
@pytest.mark.parametrize("page", ["explorer", "planner"])
def test_a_hostile_link_draws_plain_notices(page: str) -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    if page != "explorer":
        at = at.switch_page(f"pages/{page}.py")
    for k, v in HOSTILE.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    notices = [str(w.value) for w in at.warning if "link parameters" in str(w.value)]
    assert notices and all(active(n) == [] for n in notices), notices
