"""The capacity planner app: navigation over `pages/` and the shared sidebar (language).

Run with `streamlit run streamlit_app.py` (or `python3 dev.py app`). Planner, Measure and
Results join the navigation when their pages exist.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.i18n import LANG_NAMES, t
from app.state import init_lang

ROOT = Path(__file__).resolve().parent

st.set_page_config(page_title="Capacity planner", page_icon=":material/speed:", layout="wide")

lang = init_lang()
with st.sidebar:
    st.segmented_control(t("language", lang), options=list(LANG_NAMES),
                         format_func=LANG_NAMES.__getitem__, key="lang", required=True)
lang = init_lang()

pages = [
    st.Page(ROOT / "pages" / "explorer.py", title=t("nav_explorer", lang),
            icon=":material/tune:", url_path="explorer", default=True),
    st.Page(ROOT / "pages" / "catalog.py", title=t("nav_catalog", lang),
            icon=":material/menu_book:", url_path="catalog"),
]
page = st.navigation(pages)
with st.sidebar:
    st.caption(t("sidebar_caption", lang))
page.run()
