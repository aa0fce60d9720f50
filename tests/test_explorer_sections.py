"""Issue 30: the Explorer's first screen sends only what a user sees first.

The sections below the verdicts (the load view, "How sure is this?", the curves, the capacity
table, the frontier, the two pools, the math) are `app.layout.section`s: closed by default, a
closed one neither computes nor sends its body, and each is one click away. Here: the helper's
rules (opens as its default says, follows the default when it changes, stays open when its
label changes), what the first screen sends, every section opened at once (in English and,
word for word, in Chinese), and that the first screen loads neither pandas nor altair.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Expander

from app.explorer_view import (
    CHARTS_SECTION,
    FRONTIER_SECTION,
    LOAD_SECTION,
    MATH_SECTION,
    POOLS_SECTION,
    TABLE_SECTION,
    UNCERTAINTY_SECTION,
)
from capacity.catalog.loader import default_catalog
from capacity.catalog.offers import load_offers, offers_path
from tests.test_chinese_pages import ALLOWED, WORD, english, names

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "streamlit_app.py")
SECTIONS = (LOAD_SECTION, UNCERTAINTY_SECTION, CHARTS_SECTION, TABLE_SECTION, FRONTIER_SECTION,
            POOLS_SECTION, MATH_SECTION)
"""In the page's order."""
LABELS = ("Under load: chapter", "How sure is this?", "Curves", "Capacity table",
          "Throughput per GPU vs interactivity", "Disaggregated prefill/decode: two pools",
          "Show the math")
"""Each section's label (its start), in the same order."""
pytestmark = pytest.mark.usefixtures("custom")  # the machine's custom entries stay out


# ---- the helper: app.layout.section ----------------------------------------------------------
def one_section() -> None:
    """A page with one section whose label shows `n` and whose default is `d`."""
    import streamlit as st

    from app.layout import section

    n = st.number_input("n", value=1, key="n")
    if box := section(f"label {n}", key="s", default=bool(st.session_state.get("d"))):
        box.markdown("BODY")


def body_shown(at: AppTest) -> bool:
    return [m.value for m in at.markdown] == ["BODY"]


def is_open(at: AppTest) -> bool:
    """Whether the browser is told to show the section open."""
    return bool(at.expander[0].proto.expanded)


def test_a_section_runs_its_body_only_while_open_and_keeps_it_open() -> None:
    at = AppTest.from_function(one_section)
    at.run()
    assert not body_shown(at) and not is_open(at)  # closed: no body
    at.session_state["s"] = True  # opened (the browser sends the same value)
    at.run()
    assert body_shown(at)
    # the label changes with an input: a plain expander would close (a new element), this
    # one stays open
    at.number_input(key="n").set_value(2).run()
    assert body_shown(at) and at.expander[0].label == "label 2"
    at.number_input(key="n").set_value(3).run()
    assert body_shown(at) and is_open(at)
    at.session_state["s"] = False  # closed at once, on the next run
    at.run()
    assert not body_shown(at)


def test_a_section_follows_its_default_when_the_default_changes() -> None:
    at = AppTest.from_function(one_section)
    at.session_state["d"] = True  # a reason to show it (the load view: an engine chosen)
    at.run()
    assert body_shown(at) and is_open(at)
    at.session_state["d"] = False  # the reason is gone: it closes again
    at.run()
    assert not body_shown(at)
    at.session_state["s"] = True  # the user opens it; it stays open over reruns
    at.run()
    at.run()
    assert body_shown(at)


# ---- the Explorer --------------------------------------------------------------------------
def explorer(*opened: str, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in params.items():
        at.query_params[k] = v
    for name in opened:
        at.session_state[name] = True
    at.run()
    assert not at.exception
    return at


def sections(at: AppTest) -> list[Expander]:
    """The page's sections, in order (the sidebar's expanders left out)."""
    return [next(e for e in at.main.expander if e.label.startswith(label)) for label in LABELS]


def count(node: object) -> int:
    """Elements and blocks under `node` (itself included), as AppTest received them."""
    return 1 + sum(count(c) for c in (getattr(node, "children", None) or {}).values())


def test_the_first_screen_sends_every_section_closed_and_empty() -> None:
    """The defaults: the headline and the four verdict cards, and below them seven closed
    sections with nothing inside (no chart, table, code or download). The page's main area
    held 167 elements before issue 30's change and holds 84 now (AppTest's tree); 100 is the
    bound."""
    at = explorer()
    boxes = sections(at)
    assert [b.proto.expanded for b in boxes] == [False] * len(SECTIONS)
    assert all(not b.children for b in boxes)
    assert not at.get("vega_lite_chart") and not at.dataframe and not at.code
    assert not at.get("arrow_data_frame") and not at.get("download_button")
    for c in ("memory", "bandwidth", "compute", "slo"):  # the verdicts stay on the first screen
        assert at.get_by_key(f"verdict_{c}") is not None
    assert count(at.main) <= 100, count(at.main)


@pytest.mark.slow
def test_every_section_is_one_click_away() -> None:
    """Each section opened (all at once here) draws what it drew before issue 30: the load
    view's figures, the band and the two sensitivity tables, six curves, the capacity table
    and its downloads, the frontier's chart and costs, the two pools' figures and two charts,
    and the math."""
    at = explorer(*SECTIONS)
    boxes = sections(at)
    assert all(b.children for b in boxes)
    assert len(at.get("vega_lite_chart")) == 6 + 1 + 2
    labels = {m.label for m in at.metric}
    assert {"TTFT p90 under load", "prefill pool busy"} <= labels
    frames = [d.value for d in at.dataframe]
    assert any("quantity" in f.columns for f in frames)  # the band
    assert sum("swing" in f.columns for f in frames) == 2
    assert any("SLO" in f.columns for f in frames)  # the capacity table
    assert len(at.download_button) == 2
    assert len(at.code) >= 10  # the math, one block a step
    # a section closed again sends nothing again
    at.session_state[CHARTS_SECTION] = False
    at.run()
    assert len(at.get("vega_lite_chart")) == 1 + 2 and not at.exception


@pytest.mark.slow
def test_every_section_open_in_chinese_has_no_english_words() -> None:
    """tests/test_chinese_pages.py reads the Explorer as it opens (its sections closed): here
    every section is open, and every text in it is checked the same way."""
    at = explorer(*SECTIONS, lang="zh")
    assert len(at.get("vega_lite_chart")) == 6 + 1 + 2 and len(at.download_button) == 2
    providers = {w for o in load_offers(offers_path(), default_catalog())
                 for w in WORD.findall(o.provider)}  # the price read-off names the offer's
    # "CPU" (the load view's offload knob) and the pools' ratio, "1P+1D", as written
    found = english(at, ALLOWED | names() | providers | {"CPU", "D"})
    assert found == []


@pytest.mark.slow
def test_the_first_screen_loads_neither_pandas_nor_altair() -> None:
    """A new process runs the page once with its defaults: the modules only the closed
    sections need (pandas, pyarrow, altair, the charts, the frontier's and the pools' views)
    are not loaded; the start-up time they cost is docs/benchmarks.md's."""
    heavy = ("pandas", "pyarrow", "altair", "capacity.report.charts", "app.explorer_tables",
             "app.frontier_view", "app.disagg_view")
    code = (
        "import json, sys\n"
        "from streamlit.testing.v1 import AppTest\n"
        f"at = AppTest.from_file({APP!r}, default_timeout=180)\n"
        "at.run()\n"
        "assert not at.exception, at.exception\n"
        "assert len(at.metric) >= 6\n"
        f"print(json.dumps({{m: m in sys.modules for m in {heavy!r}}}))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == dict.fromkeys(heavy, False)
