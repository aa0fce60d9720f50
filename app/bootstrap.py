"""Make every entry into the app go through `streamlit_app.py`'s `st.navigation`.

Streamlit starts in its legacy multipage mode when a `pages/` folder sits beside the
entrypoint; until some session runs `st.navigation`, a fresh server that receives a link to
`/explorer` would run `pages/explorer.py` on its own (no shared sidebar, no language switch,
no wide layout). Each page calls `ensure_navigation()` first: in that legacy mode it switches
Streamlit to `st.navigation` and reruns, which runs the entrypoint with the same URL.
"""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def ensure_navigation() -> None:
    """Rerun through the entrypoint when Streamlit is still in legacy pages/ mode."""
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
