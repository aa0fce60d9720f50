"""The app's navigation, and the guard that sends every entry through it.

`run_app()` is the whole app: page config, the shared sidebar (language), `st.navigation` over
`pages/`, the sign-in gate (`app.auth`: nothing without `[auth]` in the secrets), then the
chosen page. `streamlit_app.py` calls it, and so does `ensure_navigation()`,
the first call of every page, when the page runs outside it.

Why a page can run outside it: Streamlit starts in its legacy multipage mode when a `pages/`
folder sits beside the entrypoint. Until some run calls `st.navigation` (which ends that mode for
the process), a link to `/explorer` on a fresh server runs `pages/explorer.py` on its own, and
AppTest starts every run in that mode (a switched-to page runs alone). Such a run would have no
shared sidebar, no language switch and no page config. `ensure_navigation()` then runs the app in
place (its `st.navigation` resolves the requested page, which runs again inside, properly) and
stops the outer run. Running in place rather than rerunning keeps the run's widget triggers (a
form submit, a button click). Only public Streamlit calls are used: docs/app-internals.md.
"""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path

import streamlit as st

from app import auth
from app.state import LANG_SWITCH, enter_page, init_lang, on_lang_change, seed_lang_switch
from capacity.report.i18n import LANG_NAMES, t

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "pages"
_inside_navigation: ContextVar[bool] = ContextVar("capacity_inside_navigation", default=False)


def pages(lang: str) -> list[st.Page]:
    """The app's pages, titled in `lang`; the first two are the Explorer's addresses and the
    third the Planner (the pages that own query parameters besides `lang`)."""
    explorer = PAGES / "explorer.py"
    return [
        # The root URL opens the Explorer too. Streamlit serves the default page at "/" and
        # answers its own pathname with "page not found", so the default is a hidden alias
        # and the visible Explorer keeps /explorer, the path shared links use.
        st.Page(explorer, title=t("nav_explorer", lang), url_path="home", default=True,
                visibility="hidden"),
        st.Page(explorer, title=t("nav_explorer", lang), icon=":material/tune:",
                url_path="explorer"),
        st.Page(PAGES / "planner.py", title=t("nav_planner", lang),
                icon=":material/request_quote:", url_path="planner"),
        st.Page(PAGES / "measure.py", title=t("nav_measure", lang),
                icon=":material/speed:", url_path="measure"),
        st.Page(PAGES / "results.py", title=t("nav_results", lang),
                icon=":material/query_stats:", url_path="results"),
        st.Page(PAGES / "catalog.py", title=t("nav_catalog", lang),
                icon=":material/menu_book:", url_path="catalog"),
    ]


def run_app() -> None:
    """One run of the app: page config, the sidebar, `st.navigation`, the chosen page."""
    st.set_page_config(page_title="Capacity planner", page_icon=":material/speed:",
                       layout="wide")
    seed_lang_switch()
    with st.sidebar:
        st.segmented_control(t("language", init_lang()), options=list(LANG_NAMES),
                             format_func=LANG_NAMES.__getitem__, key=LANG_SWITCH, required=True,
                             on_change=on_lang_change)
    lang = init_lang()
    app_pages = pages(lang)
    # with sign-in (docs/sign-in.md) the pages are hidden until the visitor has signed in and
    # has a role: `auth.gate` then draws the sign-in screen instead and stops the run
    page = st.navigation(app_pages, position="sidebar" if auth.user() is not None else "hidden")
    auth.gate(lang)
    with st.sidebar:
        st.caption(t("sidebar_caption", lang))
    # url_path tells the Explorer's two addresses apart (the default page's is "").
    # the Explorer (both addresses) and the Planner keep their inputs in the URL
    enter_page(page.url_path, lang, owns_query=any(page is p for p in app_pages[:3]))
    token = _inside_navigation.set(True)
    try:
        page.run()
    finally:
        _inside_navigation.reset(token)


def ensure_navigation() -> None:
    """Every page's first call: when the page runs outside `run_app()` (Streamlit's legacy
    pages/ mode), run the app in place, which runs this page inside it, and stop this run."""
    if _inside_navigation.get():
        return
    run_app()
    st.stop()
