"""Test-only entry script: the shared layout of `streamlit_app.py` (wide, language in the
sidebar) with navigation over the Measure and Results pages, until the lead adds them there."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.i18n import LANG_NAMES, t
from app.i18n_measure import t as tm
from app.state import init_lang

ROOT = Path(__file__).resolve().parents[1]
st.set_page_config(page_title="Capacity planner", layout="wide")
lang = init_lang()
with st.sidebar:
    st.segmented_control(t("language", lang), options=list(LANG_NAMES),
                         format_func=LANG_NAMES.__getitem__, key="lang", required=True)
lang = init_lang()
page = st.navigation([
    st.Page(ROOT / "pages" / "measure.py", title=tm("nav_measure", lang), url_path="measure",
            default=True),
    st.Page(ROOT / "pages" / "results.py", title=tm("nav_results", lang), url_path="results"),
])
page.run()
