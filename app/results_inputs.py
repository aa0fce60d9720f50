"""The Results page's inputs that choose the measured points: the stored runs (filters, the list,
the runs picked) or an imported file. Each draws its widgets and returns the points
(`app.results_state.Measured`: empty when none is chosen).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import measure_state as ms
from app import results_state as rs
from app import results_view as view
from app.format import markdown_plain, plain_error
from capacity.access import AccessDenied, User, may_share_run
from capacity.errors import CapacityError
from capacity.fit.imports import FORMATS
from capacity.fit.overlay import filter_runs, read_upload
from capacity.report.i18n import t, tn


def stored_runs(variants: list[str], gpus: list[str], lang: str, user: User) -> rs.Measured:
    """The stored runs `user` may see (`ms.runs`), filtered by label, endpoint, model and date;
    the runs picked among them (the newest by default), checked again (`rs.from_runs`); a
    share switch on each picked run the user may share; their warnings."""

    def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
        return t(k, lang, **kw)

    m = rs.Measured()
    try:
        runs, warns = ms.runs(user)
    except CapacityError as exc:
        st.error(T("r_error", msg=plain_error(exc, lang)))
        st.stop()
    for w in warns:
        st.caption(T("r_store_warning", msg=markdown_plain(w)))  # it quotes the files
    if runs.empty:
        st.info(T("r_no_runs", root=str(ms.bench_root())))
    else:
        c1, c2, c3, c4 = st.columns(4)
        f_labels = c1.multiselect(T("r_f_label"), sorted(runs["label"].dropna().unique()),
                                  key="r_f_label", placeholder=T("choose_options"))
        f_eps = c2.multiselect(T("r_f_endpoint"), sorted(runs["base_url"].dropna().unique()),
                               key="r_f_endpoint", placeholder=T("choose_options"))
        f_models = c3.multiselect(T("r_f_model"), sorted(runs["model"].dropna().unique()),
                                  key="r_f_model", placeholder=T("choose_options"))
        since, until = rs.date_range(c4.date_input(T("r_f_date"), value=(), key="r_f_date"))
        shown = filter_runs(runs, labels=f_labels, endpoints=f_eps, models=f_models,
                            since=since, until=until)
        st.dataframe(view.runs_table(shown, lang, user), hide_index=True, width="stretch")
        ids = shown["run_id"].tolist()
        names = rs.run_names(shown)
        rs.keep_picks(ids)
        chosen = st.multiselect(T("r_pick"), ids, key=rs.PICK,
                                format_func=lambda i: names.get(i, i), help=T("r_pick_help"),
                                placeholder=T("choose_options"))
        if not chosen:
            st.info(T("r_pick_none"))
        else:
            try:
                m = rs.from_runs(shown, chosen, names, variants, gpus, user)
            except AccessDenied:
                st.error(T("r_run_not_yours"))
                st.stop()
            share_switches(shown, chosen, names, user, lang)
            if m.run_warnings:  # client-bound levels, prefix-cache hits, one-burst levels...
                st.warning(view.run_warnings_text(m.run_warnings, lang))
            if m.levels_left_out:  # a summary.csv edited by hand: said, not a traceback
                st.warning(tn("r_levels_left_out", m.levels_left_out, lang))
            if m.no_levels:
                st.warning(T("r_no_levels"))
    return m


def share_switches(shown: pd.DataFrame, chosen: list[str], names: dict[str, str], user: User,
                   lang: str) -> None:
    """A "share with everyone" switch for each picked run `user` may share (its owner, an
    admin: `may_share_run`); a change is written at once (`rs.share_run`, checked again)."""
    for run_id in chosen:
        row = shown[shown["run_id"] == run_id].iloc[0]
        access = ms.access_of(row)
        if not may_share_run(user, access):
            continue
        key = rs.share_switch_value(run_id, access.shared)
        want = st.toggle(t("r_share", lang, name=markdown_plain(names.get(run_id, run_id))), key=key,
                         help=t("r_share_help", lang))
        if want != access.shared:
            try:
                rs.share_run(user, str(row["dir"]), want)
            except (AccessDenied, OSError) as exc:
                st.session_state.pop(rs.SHARE_SEEN + run_id, None)  # the switch shows the file
                st.error(t("r_share_not_yours", lang) if isinstance(exc, AccessDenied)
                         else t("r_error", lang, msg=str(exc)))
            else:
                st.rerun()


def imported_points(lang: str) -> rs.Measured:
    """An uploaded file of measurements (one of `capacity.fit.imports.FORMATS`, or found out)
    read into points."""

    def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
        return t(k, lang, **kw)

    m = rs.Measured()
    c1, c2 = st.columns([3, 1])
    up = c1.file_uploader(T("r_upload"), type=["csv", "json", "jsonl"], key="r_upload")
    fmt = c2.selectbox(T("r_format"), ["auto", *FORMATS], key="r_format")
    conc = c2.number_input(T("r_aiperf_c"), min_value=0.0, value=0.0, step=1.0,
                           key="r_aiperf_c", help=T("r_aiperf_c_help"))
    if up is not None:
        try:
            m = rs.from_upload(up.name, read_upload(up.name, up.getvalue(),
                                                    None if fmt == "auto" else fmt,
                                                    concurrency=conc or None))
        except CapacityError as exc:
            st.error(T("r_error", msg=plain_error(exc, lang)))
        else:
            st.success(tn("r_imported", len(m.points), lang, name=up.name))
    return m
