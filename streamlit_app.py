"""The capacity planner app: navigation over `pages/` and the shared sidebar (language).

Run with `streamlit run streamlit_app.py` (or `python3 dev.py app`).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.state import init_lang
from capacity.report.i18n import LANG_NAMES, t

ROOT = Path(__file__).resolve().parent

st.set_page_config(page_title="Capacity planner", page_icon=":material/speed:", layout="wide")

lang = init_lang()
with st.sidebar:
    st.segmented_control(t("language", lang), options=list(LANG_NAMES),
                         format_func=LANG_NAMES.__getitem__, key="lang", required=True)
lang = init_lang()

EXPLORER = ROOT / "pages" / "explorer.py"
pages = [
    # The root URL opens the Explorer too. Streamlit serves the default page at "/" and
    # answers its own pathname with "page not found", so the default is a hidden alias and
    # the visible Explorer keeps /explorer, the path shared links use.
    st.Page(EXPLORER, title=t("nav_explorer", lang), url_path="home", default=True,
            visibility="hidden"),
    st.Page(EXPLORER, title=t("nav_explorer", lang), icon=":material/tune:",
            url_path="explorer"),
    st.Page(ROOT / "pages" / "planner.py", title=t("nav_planner", lang),
            icon=":material/request_quote:", url_path="planner"),
    st.Page(ROOT / "pages" / "measure.py", title=t("nav_measure", lang),
            icon=":material/speed:", url_path="measure"),
    st.Page(ROOT / "pages" / "results.py", title=t("nav_results", lang),
            icon=":material/query_stats:", url_path="results"),
    st.Page(ROOT / "pages" / "catalog.py", title=t("nav_catalog", lang),
            icon=":material/menu_book:", url_path="catalog"),
]
page = st.navigation(pages)
with st.sidebar:
    st.caption(t("sidebar_caption", lang))
page.run()
