"""The capacity planner app: navigation over `pages/` and the shared sidebar (language).

Run with `streamlit run streamlit_app.py` (or `python3 dev.py app`). The app itself is
`app.bootstrap.run_app` (page config, sidebar, `st.navigation`), so that a page Streamlit runs
on its own can run it too (docs/app-internals.md).
"""

from __future__ import annotations

from app.bootstrap import run_app

run_app()
