"""Every page entered from every other page, through the app's entrypoint (Streamlit's AppTest).

The app starts at `streamlit_app.py` (its `st.navigation`), then switches pages the way the
sidebar does; each page must draw its title without an exception whichever page came before, in
both languages, and a page that does not own the Explorer's URL parameters must not carry them.
See docs/app-internals.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from capacity.catalog import custom as catalog_custom
from capacity.report.i18n import t

# AppTest runs of whole pages, a second or more each: outside the quick loop
pytestmark = pytest.mark.slow

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
TITLES = {"explorer": "nav_explorer", "planner": "pl_title", "measure": "m_title",
          "results": "r_title", "catalog": "cat_title"}
EXPLORER_LINK = {"model": "qwen3-32b", "gpu": "a100-80gb-sxm", "c": "12", "ctx": "16384"}


@pytest.fixture(autouse=True)
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Custom catalog entries, runs and calibrations in an empty folder; Measure on."""
    monkeypatch.setenv(catalog_custom.ENV_VAR, str(tmp_path / "custom"))
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.setenv("CAPACITY_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    monkeypatch.delenv("CAPACITY_MEASURE", raising=False)
    monkeypatch.delenv("CAPACITY_MEASURE_ALLOW_HOSTS", raising=False)
    catalog_custom.clear_caches()
    yield
    catalog_custom.clear_caches()


def start(**params: str) -> AppTest:
    """The app entered at its root URL (the entrypoint; its default page is the Explorer)."""
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def visit(at: AppTest, page: str, lang: str) -> None:
    """Switch to `page` and check it drew its own title, in `lang`, without an exception."""
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, (page, [e.message for e in at.exception])
    assert [x.value for x in at.title][:1] == [t(TITLES[page], lang)], page


def sidebar_lang(at: AppTest) -> str | None:
    value = at.sidebar.segmented_control(key="lang").value
    assert value is None or isinstance(value, str)
    return value


@pytest.mark.parametrize("page", list(TITLES))
def test_a_link_to_a_page_opens_it_inside_the_app(page: str) -> None:
    """A session's first run on a page's address (a shared link; Streamlit runs the file on
    its own there) still draws the app around it: the sidebar's language switch."""
    at = AppTest.from_file(APP, default_timeout=120).switch_page(f"pages/{page}.py")
    at.query_params["lang"] = "zh"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.title[0].value == t(TITLES[page], "zh")
    assert sidebar_lang(at) == "zh"


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize(("first", "second"), list(itertools.combinations(TITLES, 2)),
                         ids=lambda p: str(p))
def test_every_page_entered_from_every_other(first: str, second: str, lang: str) -> None:
    """first -> second -> first covers both ordered pairs of the two pages."""
    at = start(**({"lang": lang} if lang != "en" else {}))
    assert at.title[0].value == t("nav_explorer", lang)
    for page in (first, second, first):
        visit(at, page, lang)
        assert sidebar_lang(at) == lang


def test_language_switched_in_the_sidebar_follows_every_page() -> None:
    at = start()
    at.sidebar.segmented_control(key="lang").set_value("zh").run()
    assert not at.exception and at.title[0].value == t("nav_explorer", "zh")
    for page in (*TITLES, "explorer"):
        visit(at, page, "zh")
        assert sidebar_lang(at) == "zh"
        assert at.query_params.get("lang") == "zh", page


def test_explorer_parameters_stay_with_the_explorer() -> None:
    at = start(**EXPLORER_LINK)
    assert at.session_state["ex_model"] == "qwen3-32b" and at.session_state["ex_c"] == 12
    for page in ("planner", "measure", "results", "catalog"):
        visit(at, page, "en")
        assert not set(EXPLORER_LINK) & set(at.query_params), (page, dict(at.query_params))
    visit(at, "explorer", "en")
    # The Explorer comes back with the link's what-if, and puts it back into the URL.
    assert at.session_state["ex_model"] == "qwen3-32b" and at.session_state["ex_c"] == 12
    assert {k: at.query_params.get(k) for k in EXPLORER_LINK} == EXPLORER_LINK


def test_explorer_edits_survive_the_round_trip_through_its_own_alias() -> None:
    """The root URL and /explorer are one page under two addresses: a value set at the root
    is still there after the sidebar's Explorer link."""
    at = start()
    at.number_input(key="ex_gpus").set_value(2).run()
    assert not at.exception
    visit(at, "explorer", "en")
    assert at.number_input(key="ex_gpus").value == 2
    assert at.session_state["ex_currency"] == "CNY"
    visit(at, "planner", "en")
    visit(at, "explorer", "en")
    assert at.number_input(key="ex_gpus").value == 2
