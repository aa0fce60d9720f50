"""Make every entry into the app go through `streamlit_app.py`'s `st.navigation`.

Streamlit starts in its legacy multipage mode when a `pages/` folder sits beside the
entrypoint: until some run calls `st.navigation`, a link to `/explorer` on a fresh server would
run `pages/explorer.py` on its own (no shared sidebar, no language switch, no wide layout), and
AppTest starts every run that way. Each page calls `ensure_navigation()` first: in that legacy
mode it switches Streamlit to `st.navigation` and runs the entrypoint in place (which runs this
page again, properly), then stops the outer run. Running in place rather than rerunning keeps
the run's widget triggers (a form submit, a button click).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

ENTRYPOINT = Path(__file__).resolve().parent.parent / "streamlit_app.py"


def ensure_navigation() -> None:
    """Run the page through the entrypoint when Streamlit is in legacy pages/ mode."""
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        code = compile(ENTRYPOINT.read_text(encoding="utf-8"), str(ENTRYPOINT), "exec")
        exec(code, {"__name__": "__main__", "__file__": str(ENTRYPOINT)})  # noqa: S102
        st.stop()
