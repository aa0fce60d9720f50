"""The Explorer's capacity table keeps the user's edits (issue 30).

Its section runs only while open (`app.layout.section`), and Streamlit drops a widget's state
in every run that does not draw it; the rows as edited are kept apart from the row editor
(`app.explorer_sections.TABLE_ROWS`) and the editor starts from them when it is drawn anew.
An edit is given to the editor as the browser sends it: its edit state (edited, added and
deleted rows, relative to the rows it was drawn with) under the editor's key.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.explorer_sections import table_key
from app.explorer_view import TABLE_SECTION

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
EDITOR = table_key(8192)  # the default what-if's context
pytestmark = pytest.mark.usefixtures("custom")  # the machine's custom entries stay out


def opened() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state[TABLE_SECTION] = True
    at.run()
    assert not at.exception
    return at


def rows_shown(at: AppTest) -> list[tuple[int, int]]:
    """(concurrency, context) of each row of the results under the editor."""
    table = [d for d in at.dataframe if d.editing_mode == "read_only"][-1].value  # after the editor
    return [(int(c), int(x)) for c, x in zip(table["concurrency"], table["context (tokens)"],
                                             strict=True)]


def editor_rows(at: AppTest) -> list[tuple[int, int]]:
    """The rows the editor was drawn with (before any edit the browser holds)."""
    table = at.data_editor(key=EDITOR).value
    return [(int(c), int(x)) for c, x in zip(table["concurrency"], table["context_tokens"],
                                             strict=True)]


def edit(at: AppTest, edited: dict[str, dict[str, int]], added: list[dict[str, int]],
         deleted: list[int]) -> None:
    at.session_state[EDITOR] = {"edited_rows": edited, "added_rows": added,
                                "deleted_rows": deleted}
    at.run()
    assert not at.exception


# the seed rows are the chapter's 10, 50 and 100 concurrent requests at 8K; the edit below
# makes the first 7, deletes the third (100) and adds 3 at 2K
EDITED = [(7, 8192), (50, 8192), (3, 2048)]


@pytest.mark.slow
def test_edits_survive_closing_the_section_a_rerun_and_reopening() -> None:
    at = opened()
    assert rows_shown(at) == [(10, 8192), (50, 8192), (100, 8192)]
    edit(at, {"0": {"concurrency": 7}}, [{"concurrency": 3, "context_tokens": 2048}], [2])
    assert rows_shown(at) == EDITED
    at.session_state[TABLE_SECTION] = False  # closed: the editor is not drawn
    at.run()
    assert not at.data_editor and not at.exception
    at.slider(key="ex_c").set_value(60).run()  # another widget reruns the page meanwhile
    assert not at.data_editor and not at.exception
    at.session_state[TABLE_SECTION] = True  # opened again
    at.run()
    assert not at.exception
    assert rows_shown(at) == EDITED
    assert editor_rows(at) == EDITED  # the editor itself starts from the edits


@pytest.mark.slow
def test_edits_made_after_reopening_refer_to_the_rows_shown() -> None:
    at = opened()
    edit(at, {"0": {"concurrency": 7}}, [], [])
    at.session_state[TABLE_SECTION] = False
    at.run()
    at.session_state[TABLE_SECTION] = True
    at.run()
    assert rows_shown(at) == [(7, 8192), (50, 8192), (100, 8192)]
    # an edit in the reopened editor is relative to what it shows: row 1 is the 50
    edit(at, {"1": {"concurrency": 20}}, [], [])
    assert rows_shown(at) == [(7, 8192), (20, 8192), (100, 8192)]
    at.run()  # a plain rerun keeps the editor and its edit, applied once
    assert rows_shown(at) == [(7, 8192), (20, 8192), (100, 8192)]


@pytest.mark.slow
def test_each_context_keeps_its_own_rows() -> None:
    at = opened()
    edit(at, {"0": {"concurrency": 7}}, [], [])
    at.select_slider(key="ex_ctx").set_value(4096).run()  # a new context: its seed rows
    assert rows_shown(at) == [(10, 4096), (50, 4096), (100, 4096)]
    at.select_slider(key="ex_ctx").set_value(8192).run()  # back: the edit is there
    assert rows_shown(at) == [(7, 8192), (50, 8192), (100, 8192)]
