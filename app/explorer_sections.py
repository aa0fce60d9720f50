"""The bodies of the Explorer's sections below the verdicts, each drawn only once its section is
open (`app.layout.section`, issue 30): "How sure is this?", the curves, the capacity table and
the math. `pages/explorer.py` opens the section and calls the body with its container.

What only these bodies need loads in them, at the first opening: pandas (the tables,
`app.explorer_tables`) and altair (the charts, `capacity.report.charts`); a first screen with
every section closed loads neither (docs/benchmarks.md, "Start-up"). The figures come from
`app.cache`, as everywhere on the page.

The capacity table's rows outlive its section: Streamlit drops a widget's state in every run
that does not draw it (the section closed, another page shown), and the row editor's state is
only the edits relative to the rows it was given. So the rows as last edited are kept under a
plain session-state key (`TABLE_ROWS`), and the editor, whenever it is drawn anew, starts from
them (issue 30). They stay out of the link: the URL holds the what-if's inputs, and the
table's rows are other what-ifs beside it, as the sections' open or closed state is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from app import cache
from app import explorer_view as view
from app.i18n import chart_labels
from capacity.errors import CapacityError
from capacity.report.i18n import engine_label, error_text, note_text, t
from capacity.report.urlstate import ExplorerState

if TYPE_CHECKING:  # pandas loads with the table's section, at its first opening
    import pandas as pd

TABLE_ROWS = "ex_table_rows"
"""Session-state key of the capacity table's rows, apart from the editor's own (widget) state:
{context tokens: (the rows the editor was drawn with, the rows as last edited)}. The editor's key
holds the context (`table_key`), so a new context starts from its own rows, and coming back to
a context finds its edits."""


def table_key(ctx: int) -> str:
    """The row editor's widget key at the what-if's context `ctx` (tokens)."""
    return f"ex_table_{ctx}"


def table_rows(ctx: int) -> pd.DataFrame:
    """The rows the editor is drawn with at context `ctx`: while it lives (drawn in the last
    run), the rows it was first drawn with, which its edits refer to; when it is drawn anew
    (first opening, or after a run without it: the section closed, another page), the rows as
    last edited, else the chapter's seed rows."""
    from app import explorer_tables as tables

    kept: dict[int, tuple[pd.DataFrame, pd.DataFrame]] = st.session_state.setdefault(
        TABLE_ROWS, {})
    if ctx not in kept or table_key(ctx) not in st.session_state:
        start = kept[ctx][1] if ctx in kept else tables.seed_rows(ctx)
        kept[ctx] = (start, start)
    return kept[ctx][0]


def keep_table_rows(ctx: int, edited: pd.DataFrame) -> None:
    """Remember the editor's rows as edited (`table_rows` starts from them when it is drawn
    anew)."""
    kept = st.session_state[TABLE_ROWS]
    kept[ctx] = (kept[ctx][0], edited.reset_index(drop=True))


def uncertainty_body(box: DeltaGenerator, unc: cache.Uncertainty, lang: str) -> None:
    """The band around TPOT, TTFT and C_vram, the basis' doubtful knobs, why the band is wider,
    and the inputs that move TPOT and TTFT most."""
    from app import explorer_tables as tables

    if unc.typical:
        box.caption(t("unc_basis_typical", lang, engine=engine_label(unc.typical, lang)))
        if unc.lookup_gb > 0:
            box.caption(t("unc_lookup", lang, gb=unc.lookup_gb))
    else:
        box.caption(t("unc_basis_cal" if unc.calibrated else "unc_basis_spec", lang))
    if unc.flags:
        box.warning(tables.flags_text(unc, lang), icon=":material/report:")
    if unc.widenings:
        box.markdown(tables.widenings_text(unc, lang))
    if unc.split_open:   # the step's edges reach further than the spread and widenings say
        box.caption(t("unc_split", lang))
    box.dataframe(tables.band_frame(unc, lang), hide_index=True, key="unc_band")
    s1, s2 = box.columns(2)
    for col, title, rows in ((s1, t("sens_step", lang), unc.step_sensitivity),
                             (s2, t("sens_ttft", lang), unc.ttft_sensitivity)):
        col.markdown(f"**{title}**")
        col.dataframe(tables.sensitivity_frame(rows, lang), hide_index=True,
                      column_config={t("sens_swing", lang):
                                     st.column_config.NumberColumn(format="%.3f")})


def charts_body(box: DeltaGenerator, state: ExplorerState, lang: str) -> None:
    """The six curves, two a row, each titled (`app.cache.explorer_specs`)."""
    from capacity.report.charts import ALL_CHARTS

    specs = cache.explorer_specs(state, chart_labels(lang))
    for i in range(0, len(ALL_CHARTS), 2):
        for col, name in zip(box.columns(2), ALL_CHARTS[i:i + 2], strict=True):
            frame = col.container(border=True)
            frame.markdown(f"**{t('ch_' + name, lang)}**")
            frame.vega_lite_chart(specs[name], width="stretch", key=f"chart_{name}",
                                  height=view.CHART_HEIGHTS[name])


def table_body(box: DeltaGenerator, state: ExplorerState, lang: str) -> None:
    """The capacity table: the rows the user edits (concurrency x context), the verdicts and
    figures of each, and their CSV and Markdown downloads."""
    from app import explorer_tables as tables

    box.caption(t("table_help", lang))
    edited = box.data_editor(
        table_rows(state.ctx), key=table_key(state.ctx), num_rows="dynamic",
        hide_index=True, width="content",
        column_config={
            "concurrency": st.column_config.NumberColumn(
                t("col_concurrency", lang), min_value=1, max_value=100_000, step=1),
            "context_tokens": st.column_config.NumberColumn(
                t("col_context_tokens", lang), min_value=1, max_value=10_000_000, step=1),
        })
    keep_table_rows(state.ctx, edited)
    rows, bad = tables.edited_rows(edited)
    if bad:
        box.warning(t("table_rows_error", lang))
    if not rows:
        return
    try:
        table = tables.capacity_table(cache.capacity_rows(state, tuple(rows)), state.currency,
                                      lang)
    except CapacityError as exc:
        box.error(t("err_inputs", lang, msg=error_text(exc, lang)))
        return
    box.dataframe(table.shown, hide_index=True, width="stretch", key="ex_table_result",
                  column_order=table.column_order,
                  column_config={c: st.column_config.NumberColumn(format=f)
                                 for c, f in table.formats.items()})
    downloads = box.container(horizontal=True, key="ex_downloads")  # labels never cut
    downloads.download_button(t("dl_csv", lang), table.csv, file_name="capacity-table.csv",
                              mime="text/csv", key="dl_csv")
    downloads.download_button(t("dl_md", lang), table.markdown, file_name="capacity-table.md",
                              mime="text/markdown", key="dl_md")


def math_body(box: DeltaGenerator, result: cache.ExplorerResult, lang: str) -> None:
    """Every formula with the what-if's numbers substituted, and why a step differs where it
    does."""
    box.caption(t("math_help", lang))
    for step in result.math:
        box.markdown(f"**{t('m_' + step.key, lang)}**")
        # wrapped: the F4b line is wider than a narrow page (it was cut off at the right)
        box.code(f"{step.formula}\n{step.substituted}", language=None, wrap_lines=True)
        if step.note:  # why the chapter's step and the operator step differ here
            box.caption(note_text(step.note, lang))
